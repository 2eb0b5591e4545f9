"""Training as one call: :func:`train` returns a :class:`Run`, whose policy can be loaded,
evaluated and exported."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from rlformer import config as _config
from rlformer.api.config import EnvConfig, TrainConfig
from rlformer.config import TrainConfigBase

if TYPE_CHECKING:
    from rlformer.evaluation.report import EvaluationReport
    from rlformer.policies.base import Policy
    from rlformer.runs.loop import TrainResult

__all__ = ["ConfigSource", "Run", "load_config", "load_policy", "train"]

ConfigSource = TrainConfig | str | Path | Mapping[str, Any] | None
"""What :func:`train` takes: a config, a YAML file (or a shipped config's name), a mapping of
the file's keys, or None for the defaults."""


def load_config(path: str | Path | None = None, overrides: Sequence[str] = ()) -> TrainConfig:
    """``path`` (a YAML file or a shipped config's name; None: the defaults) with ``--set``
    overrides (``"ppo.learning_rate=1e-3"``), validated: :func:`rlformer.config.load_config`."""
    return cast(TrainConfig, _config.load_config(path, list(overrides)))


def _resolve(config: ConfigSource, overrides: Sequence[str]) -> TrainConfig:
    """The validated config of any source :func:`train` takes, overrides applied."""
    if config is None or isinstance(config, str | Path):
        return load_config(config, overrides)
    if isinstance(config, TrainConfigBase):
        raw = _config.set_keys(config)
    else:
        raw = copy.deepcopy(dict(config))
    return cast(TrainConfig, _config.build_config(_config.apply_overrides(raw, list(overrides))))


@dataclass(frozen=True)
class Run:
    """A finished training run: its directory, and its policy to evaluate and export."""

    directory: Path
    """The run directory: ``config.yaml``, ``metrics.jsonl``, ``checkpoints/``."""

    result: TrainResult
    """What :func:`rlformer.runs.training.train` returned: steps, iterations, its evaluation."""

    config: TrainConfig
    """The resolved config the run trained with (its ``config.yaml``)."""

    def policy(self, device: str = "cpu", trust: bool = False) -> Policy:
        """The trained policy (the newest checkpoint): :func:`rlformer.policies.load_policy`."""
        return load_policy(self.directory, trust=trust, device=device)

    def evaluate(
        self,
        episodes: int = 20,
        seeds: int = 1,
        *,
        env: EnvConfig | None = None,
        num_envs: int = 8,
        deterministic: bool = True,
        target_return: float | None = None,
    ) -> EvaluationReport:
        """Play ``episodes`` episodes per seed, as ``rlformer eval RUN`` does; the figures.

        ``env``: the training env when None. A return-conditioned policy (a DT) aims at
        ``target_return``, by default the first target of its config.
        """
        from rlformer.evaluation.report import evaluate_task

        policy = self.policy()
        env_cfg = env if env is not None else policy.info.training_env or self.config.env
        targets = None if target_return is None else [target_return]
        reports = evaluate_task(policy, env_cfg, episodes, seeds, num_envs, deterministic, targets)
        return reports[0]

    def export(self, out_dir: str | Path, format: Literal["onnx", "pt2"] = "onnx") -> Path:
        """Write the policy to ``out_dir`` for inference without rlformer's training code
        (``policy.onnx`` or ``policy.pt2``, and ``policy.json``:
        :func:`rlformer.export.writer.export_policy`); the directory."""
        from rlformer.export.writer import export_policy

        return export_policy(self.policy(), out_dir, format)


def train(
    config: ConfigSource = None, overrides: Sequence[str] = (), *, trust: bool = False
) -> Run:
    """Train the run ``config`` describes, with ``--set`` style ``overrides``; the run.

    ``config`` is a :class:`TrainConfig` (resolved first: its preset laid under the keys set in
    it, and refused for keys its algorithm never reads, as a YAML file of those keys would be),
    a YAML file or shipped config's name, a mapping of a file's keys, or None (the defaults).
    ``trust``: as for :func:`rlformer.runs.training.train`.
    """
    from rlformer.runs.training import train as run_training

    cfg = _resolve(config, overrides)
    result = run_training(cfg, trust=trust)
    return Run(Path(result.run_dir), result, cfg)


def load_policy(spec: str | Path, trust: bool = False, device: str = "cpu") -> Policy:
    """A run directory's, checkpoint's, export's or ``sb3:FILE.zip`` policy:
    :func:`rlformer.policies.load_policy`."""
    from rlformer.policies.registry import load_policy as load

    return load(spec, trust=trust, device=device)
