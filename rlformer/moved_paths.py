"""Import paths of earlier layouts, kept working with a :class:`DeprecationWarning`.

Modules moved into the per-algorithm packages (``rlformer.algos.<name>``), the run lifecycle
(``rlformer.runs``), export (``rlformer.export``) and the networks (``rlformer.networks``). An
old module path imports the module at its new path (the same module object, so classes compare
equal and ``isinstance`` holds) and warns once, naming the new path; a moved name read from its
old module (``rlformer.training.build_model``) does the same. Nothing here imports the package's
modules until an old path is used.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Any

MODULES: dict[str, str] = {
    "rlformer.algos.base": "rlformer.runs.algorithm",
    "rlformer.algos.loop": "rlformer.runs.loop",
    "rlformer.algos.odt_worker": "rlformer.algos.odt.worker",
    "rlformer.checkpoints": "rlformer.runs.checkpoints",
    "rlformer.config_sections": "rlformer.config.sections",
    "rlformer.config_sections.base": "rlformer.config.sections.base",
    "rlformer.config_sections.dt": "rlformer.algos.dt.config",
    "rlformer.config_sections.env": "rlformer.config.sections.env",
    "rlformer.config_sections.evaluation": "rlformer.config.sections.evaluation",
    "rlformer.config_sections.learner": "rlformer.config.sections.learner",
    "rlformer.config_sections.model": "rlformer.config.sections.model",
    "rlformer.config_sections.odt": "rlformer.algos.odt.config",
    "rlformer.config_sections.ppo": "rlformer.algos.ppo.config",
    "rlformer.config_sections.registry": "rlformer.config.sections.registry",
    "rlformer.config_sections.rollout": "rlformer.config.sections.rollout",
    "rlformer.config_sections.run": "rlformer.config.sections.run",
    "rlformer.config_sections.shared": "rlformer.config.sections.shared",
    "rlformer.config_sections.spec": "rlformer.config.sections.spec",
    "rlformer.config_sections.suggest": "rlformer.config.sections.suggest",
    "rlformer.data.compatibility": "rlformer.algos.dt.dataset_fit",
    "rlformer.evaluation.dt_runner": "rlformer.algos.dt.evaluation",
    "rlformer.evaluation.fitting": "rlformer.evaluation.space_match",
    "rlformer.interrupts": "rlformer.runs.signals",
    "rlformer.learners.distributed": "rlformer.learners.process_group",
    "rlformer.learners.dt": "rlformer.algos.dt.learner",
    "rlformer.learners.dt_parallel": "rlformer.algos.dt.data_parallel",
    "rlformer.learners.dt_shards": "rlformer.algos.dt.shards",
    "rlformer.learners.finite": "rlformer.learners.nonfinite",
    "rlformer.learners.odt": "rlformer.algos.odt.learner",
    "rlformer.learners.odt_parallel": "rlformer.algos.odt.data_parallel",
    "rlformer.learners.parallel": "rlformer.learners.learner_group",
    "rlformer.learners.ppo": "rlformer.algos.ppo.learner",
    "rlformer.learners.ppo_parallel": "rlformer.algos.ppo.data_parallel",
    "rlformer.learners.ppo_shards": "rlformer.algos.ppo.shards",
    "rlformer.models": "rlformer.networks",
    "rlformer.models.actor_critic": "rlformer.networks.actor_critic",
    "rlformer.models.decision_transformer": "rlformer.networks.decision_transformer",
    "rlformer.models.distributions": "rlformer.networks.distributions",
    "rlformer.models.dt_spaces": "rlformer.networks.dt_spaces",
    "rlformer.models.encoders": "rlformer.networks.encoders",
    "rlformer.models.normalization": "rlformer.networks.normalization",
    "rlformer.models.reconstruction": "rlformer.networks.reconstruction",
    "rlformer.models.recurrent": "rlformer.networks.recurrent",
    "rlformer.models.spaces": "rlformer.networks.spaces",
    "rlformer.models.torso": "rlformer.networks.torso",
    "rlformer.models.value_scaling": "rlformer.networks.value_scaling",
    "rlformer.policies.actor_critic": "rlformer.algos.ppo.policy",
    "rlformer.policies.decision_transformer": "rlformer.algos.dt.policy",
    "rlformer.policies.export": "rlformer.export.writer",
    "rlformer.policies.export_dt": "rlformer.algos.dt.export",
    "rlformer.policies.export_meta": "rlformer.export.metadata",
    "rlformer.policies.export_ppo": "rlformer.algos.ppo.export",
    "rlformer.policies.export_spec": "rlformer.export.spec",
    "rlformer.policies.onnx_policy": "rlformer.export.onnx_policy",
    "rlformer.policies.onnx_runner": "rlformer.export.onnx_runner",
    "rlformer.presets": "rlformer.config.presets",
    "rlformer.resume_rules": "rlformer.runs.resume",
    "rlformer.serve.stepper": "rlformer.serve.batched_steps",
    "rlformer.serve.wire": "rlformer.serve.messages",
    "rlformer.spaces_codec": "rlformer.export.space_codec",
    "rlformer.training": "rlformer.runs.training",
}
"""Old module path -> new module path. An old package's unlisted submodules follow the package
(``rlformer.models.x`` -> ``rlformer.networks.x``)."""

PACKAGES = {
    "rlformer.models": "rlformer.networks",
    "rlformer.config_sections": "rlformer.config.sections",
}

NAMES: dict[tuple[str, str], str] = {
    ("rlformer.runs.training", "build_model"): "rlformer.algos.ppo.algorithm",
    ("rlformer.runs.training", "format_evaluation"): "rlformer.algos.ppo.algorithm",
    ("rlformer.runs.training", "load_agent"): "rlformer.algos.ppo.algorithm",
    ("rlformer.config", "PPOConfig"): "rlformer.algos.ppo.config",
    ("rlformer.config", "DTConfig"): "rlformer.algos.dt.config",
    ("rlformer.config", "ODTConfig"): "rlformer.algos.odt.config",
    ("rlformer.evaluation.runner", "run_episodes"): "rlformer.algos.ppo.evaluation",
    ("rlformer.export.metadata", "ppo_metadata"): "rlformer.algos.ppo.export",
    ("rlformer.export.metadata", "dt_metadata"): "rlformer.algos.dt.export",
    ("rlformer.algos.ppo.learner", "EpochTally"): "rlformer.algos.ppo.epochs",
    ("rlformer.algos.ppo.learner", "Step"): "rlformer.algos.ppo.epochs",
    ("rlformer.algos.dt.policy", "build_dt"): "rlformer.algos.dt.loading",
    ("rlformer.algos.dt.policy", "dt_encoder"): "rlformer.algos.dt.loading",
    ("rlformer.algos.dt.policy", "dt_policy"): "rlformer.algos.dt.loading",
    ("rlformer.algos.dt.policy", "load_dt_policy"): "rlformer.algos.dt.loading",
    ("rlformer.algos.dt.policy", "stored_array"): "rlformer.algos.dt.loading",
}
"""(module, name) -> the module that holds the name now: names that left a module that stayed."""

FACES = {
    "rlformer.runs": "rlformer.runs.directory",
    "rlformer.algos.ppo": "rlformer.algos.ppo.algorithm",
    "rlformer.algos.dt": "rlformer.algos.dt.algorithm",
    "rlformer.algos.odt": "rlformer.algos.odt.algorithm",
}
"""Modules that became packages of the same name: a name read from the package that it does not
hold comes from the module it became (``rlformer.runs.RunDirectory``)."""


def new_path(old: str) -> str | None:
    """The module an old path names today (None: not a moved path)."""
    if old in MODULES:
        return MODULES[old]
    for package, target in PACKAGES.items():
        if old.startswith(package + "."):
            return target + old[len(package) :]
    return None


def _warn(old: str, new: str) -> None:
    warnings.warn(f"{old} has moved to {new}", DeprecationWarning, stacklevel=3)


class _Alias(importlib.abc.Loader):
    """Loads an old path as the module at its new path."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        _warn(spec.name, self.new)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """The module ran when it was imported at its new path."""


class MovedPathFinder(importlib.abc.MetaPathFinder):
    """Finds old module paths, ahead of the file system (an old path may still be a folder)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        new = new_path(fullname)
        if new is None or new == fullname:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def moved_name(module: str, name: str) -> Any:
    """A name that left ``module``, read from where it lives now (for a module's
    ``__getattr__``); AttributeError for any other name."""
    target = NAMES.get((module, name))
    face = FACES.get(module)
    if target is None and face is not None and not name.startswith("__"):
        target = face if hasattr(importlib.import_module(face), name) else None
    if target is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(f"{module}.{name} has moved to {target}.{name}", DeprecationWarning, stacklevel=3)
    return getattr(importlib.import_module(target), name)


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, MovedPathFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedPathFinder())
