"""``rlformer train`` as a library call: train, resume or dry-run any configured algorithm.

The loop itself lives in :mod:`rlformer.runs.loop` and each algorithm in
``rlformer.algos.<name>``; this module is the stable entry point scripts and tests import.
"""

from __future__ import annotations

from pathlib import Path

from rlformer.config import TrainConfig, changed_keys, load_saved_config, parse_override
from rlformer.moved_paths import moved_name
from rlformer.runs.algorithm import algorithm_class
from rlformer.runs.checkpoints import CheckpointError, refuse_saved_calls
from rlformer.runs.loop import (
    RUN_FAILURES,
    RunFailed,
    TrainResult,
    checkpoint_bytes_estimate,
    run,
    write_checkpoint,
)
from rlformer.runs.resume import refuse_fixed_changes

__all__ = [
    "RUN_FAILURES",
    "RunFailed",
    "TrainResult",
    "check_config",
    "checkpoint_bytes_estimate",
    "resume",
    "train",
    "write_checkpoint",
]

train = run


def check_config(cfg: TrainConfig) -> str:
    """``rlformer train --dry-run``: build what a run needs once, without running; a summary.

    Catches an unknown env, spaces the model cannot handle and an unusable run folder before
    any time is spent; the config itself was validated when it was loaded.
    """
    return algorithm_class(cfg.algo).dry_run(cfg)


def resume(
    run_dir: str | Path, overrides: list[str] | None = None, trust: bool = False
) -> TrainResult:
    """Continue a run from its newest readable checkpoint with the config saved beside it.

    ``overrides`` may change the settings of training (its length, rates, coefficients,
    evaluation, checkpoints), not what shapes the run (:mod:`rlformer.runs.resume`).

    The saved ``env.imports`` may call functions only with ``trust`` (or when ``overrides``
    replace them): run directories travel between people as checkpoints do.
    """
    if not Path(run_dir).is_dir():
        raise CheckpointError(f"{run_dir}: run directory not found")
    path = Path(run_dir) / "config.yaml"
    cfg = load_saved_config(path, overrides)
    if overrides:
        saved = load_saved_config(path).model_dump(mode="json")
        refuse_fixed_changes(changed_keys(cfg.model_dump(mode="json"), saved), run_dir)
    if not any(
        parse_override(item)[0][:2] in (["env"], ["env", "imports"]) for item in overrides or []
    ):
        refuse_saved_calls(cfg.env, path, trust)
    return run(cfg, resume_dir=run_dir, trust=trust)


def __getattr__(name: str) -> object:
    """PPO's helpers, read from here in earlier layouts."""
    return moved_name(__name__, name)
