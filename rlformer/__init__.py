"""rlformer: reinforcement-learning agents with Transformer memory.

GTrXL policies trained online with PPO and Decision Transformers trained offline, both on one
memory-enabled attention core (:mod:`rlformer.core`). The typed Python API
(:mod:`rlformer.api`) is importable from here: :class:`TrainConfig` and its sections,
:func:`train` (a :class:`Run`), :func:`load_config` and :func:`load_policy`.
"""

from rlformer import moved_paths as _moved_paths  # noqa: E402, I001
from rlformer.core.version import VERSION as __version__

_moved_paths.install()  # import paths of earlier layouts keep working, with a warning

import rlformer_envs as _register_tasks  # noqa: E402, F401  (registers the rlformer/* env ids)

from rlformer.api import (  # noqa: E402  (declares the run config of the built-in algorithms)
    DTConfig,
    EnvConfig,
    EvalConfig,
    LearnerConfig,
    ModelConfig,
    ODTConfig,
    PPOConfig,
    RolloutConfig,
    Run,
    RunConfig,
    TrainConfig,
    load_config,
    load_policy,
    train,
)

__all__ = [
    "DTConfig",
    "EnvConfig",
    "EvalConfig",
    "LearnerConfig",
    "ModelConfig",
    "ODTConfig",
    "PPOConfig",
    "RolloutConfig",
    "Run",
    "RunConfig",
    "TrainConfig",
    "__version__",
    "load_config",
    "load_policy",
    "train",
]
