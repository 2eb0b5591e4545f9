"""The typed Python API, importable from :mod:`rlformer`: the run config declared in source
(:mod:`rlformer.api.config`) and training as one call (:mod:`rlformer.api.run`).

This is the top layer: it names the built-in algorithms' sections, which the generic packages
below it never import; the config package receives :class:`TrainConfig` by
:func:`rlformer.config.declare_train_config`.

Example:
    >>> import rlformer
    >>> cfg = rlformer.TrainConfig(env=rlformer.EnvConfig(id="CartPole-v1"))
    >>> run = rlformer.train(cfg, ["ppo.total_steps=512"])  # doctest: +SKIP
    >>> run.evaluate(episodes=5).summary.mean  # doctest: +SKIP
"""

from rlformer.api.config import (
    DTConfig,
    EnvConfig,
    EvalConfig,
    LearnerConfig,
    MAPPOConfig,
    ModelConfig,
    ODTConfig,
    PPOConfig,
    RolloutConfig,
    RunConfig,
    TrainConfig,
)
from rlformer.api.run import ConfigSource, Run, load_config, load_policy, train

__all__ = [
    "ConfigSource",
    "DTConfig",
    "EnvConfig",
    "EvalConfig",
    "LearnerConfig",
    "MAPPOConfig",
    "ModelConfig",
    "ODTConfig",
    "PPOConfig",
    "RolloutConfig",
    "Run",
    "RunConfig",
    "TrainConfig",
    "load_config",
    "load_policy",
    "train",
]
