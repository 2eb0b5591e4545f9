"""What ``rlformer train --resume RUN --set ...`` may change, and how the change is recorded.

A resumed run continues from weights, optimiser moments, env and rollout states that were
built for one env, one network and one rollout shape. Changing those on resume either fails deep
inside the restore (a weight shape, an env-slot count) or, worse, trains something the run
directory does not describe. So the keys that shape the run are refused in one line, before
anything is loaded; the settings of training itself (length, learning rate, coefficients,
evaluation, checkpoints, threads, timeouts) may change, as SB3's ``learn(reset_num_timesteps=
False)`` or RLlib's restored algorithms allow. ``config.yaml`` then records the config the run
continues with, and each checkpoint carries the config it was written under.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlformer.config import ConfigError, TrainConfigBase, changed_keys

# Key (or section) -> what it fixes. A key is refused when it, or a section above it, is here,
# unless it is one of MAY_CHANGE. Where modules and files live (env.imports, dt.dataset) may
# change: a run resumed on another machine finds them elsewhere.
FIXED_ON_RESUME: dict[str, str] = {
    "algo": "the algorithm",
    "preset": "the settings the run was built from",
    "env.id": "the env the weights and saved env states belong to",
    "env.kwargs": "the env the weights and saved env states belong to",
    "env.max_episode_steps": "the env the weights and saved env states belong to",
    "env.wrappers": "the observations the network was trained on",
    "env.action_mask": "the actions the policy was trained to choose from",
    "model": "the network the checkpoint's weights fit",
    "run.seed": "the random streams, restored from the checkpoint",
    "run.name": "the run directory",
    "run.root": "the run directory",
    "rollout.num_workers": "the saved rollout workers' states",
    "rollout.envs_per_worker": "the saved env slots and their memories",
    "rollout.fragment_length": "the saved rollout fragments",
    "dt.context": "the network the checkpoint's weights fit",
    "dt.core": "the network the checkpoint's weights fit",
    "dt.max_timestep": "the network the checkpoint's weights fit",
    "dt.cnn": "the network the checkpoint's weights fit",
    "dt.cnn_features": "the network the checkpoint's weights fit",
    "dt.image_scale": "the inputs the network was trained on",
    "dt.return_scale": "the inputs the network was trained on",
    "dt.memory_segments": "the kind of model (plain or memory DT)",
    "dt.condition_on_return": "the kind of model (DT or behaviour cloning)",
    "dt.timestep_embedding": "the inputs the network was trained on",
    "odt.init_from": "the weights the run started from",
}


# How a network computes, not what it is: these may change under a fixed section.
MAY_CHANGE = ("core.compile", "core.precision", "core.dropout")


def _fixed_by(key: str) -> str | None:
    if key.endswith(MAY_CHANGE):
        return None
    parts = key.split(".")
    for depth in range(len(parts), 0, -1):
        reason = FIXED_ON_RESUME.get(".".join(parts[:depth]))
        if reason is not None:
            return reason
    return None


def refuse_fixed_changes(changed: list[str], where: str | Path) -> None:
    """A :class:`ConfigError` naming the first of the ``changed`` keys that may not change on
    resume (``where``: the run directory)."""
    for key in changed:
        reason = _fixed_by(key)
        if reason is not None:
            raise ConfigError(
                f"{where}: --resume cannot change {key}, which fixes {reason}; start a new run "
                "with `rlformer train` (settings of training itself, such as ppo.total_steps or "
                "ppo.learning_rate, may change)"
            )


def describe_changes(new: TrainConfigBase, old: TrainConfigBase) -> list[str]:
    """``"key: old -> new"`` for each key that differs."""
    after, before = new.model_dump(mode="json"), old.model_dump(mode="json")
    return [
        f"{key}: {_lookup(before, key)!r} -> {_lookup(after, key)!r}"
        for key in changed_keys(after, before)
    ]


def _lookup(values: Any, key: str) -> Any:
    for part in key.split("."):
        if not isinstance(values, Mapping):
            return None
        values = values.get(part)
    return values
