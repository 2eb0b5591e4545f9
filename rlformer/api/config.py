"""The run config of the built-in algorithms, declared in source.

:class:`TrainConfig` declares the run config of the built-in algorithms (ppo, dt, odt, mappo), so an
editor completes ``cfg.ppo.learning_rate`` and a type checker knows it is a float. It is the
model YAML files validate against (:func:`rlformer.config.train_config_model`); an algorithm
installed besides them adds its section on a subclass.

Built with keywords, a :class:`TrainConfig` checks each section and the rules across sections
as a YAML file's config is checked. Two rules of a YAML file apply when the config is resolved
(:meth:`TrainConfig.resolved`, which :func:`rlformer.train` calls): the preset it names is laid
under the keys set in it, and a key set in a section its algorithm never reads is refused. Until
then its ``preset`` reads as given (``auto``) and holds none of a preset's values.

Example:
    >>> cfg = TrainConfig(env=EnvConfig(id="CartPole-v1"), ppo=PPOConfig(total_steps=2048))
    >>> cfg.ppo.learning_rate
    0.0003
"""

from __future__ import annotations

from typing import Literal, cast

from rlformer import config as _config
from rlformer.algos.dt.config import DTConfig
from rlformer.algos.dt.spec import DT
from rlformer.algos.mappo.config import MAPPOConfig
from rlformer.algos.mappo.spec import MAPPO
from rlformer.algos.odt.config import ODTConfig
from rlformer.algos.odt.spec import ODT
from rlformer.algos.ppo.config import PPOConfig
from rlformer.algos.ppo.spec import PPO
from rlformer.config import (
    EnvConfig,
    EvalConfig,
    ModelConfig,
    RolloutConfig,
    RunConfig,
    TrainConfigBase,
    algo_field,
    preset_field,
    section_field,
)
from rlformer.config.sections.learner import LearnerConfig
from rlformer.config.sections.shared import SHARED_SECTIONS

__all__ = [
    "DTConfig",
    "EnvConfig",
    "EvalConfig",
    "LearnerConfig",
    "MAPPOConfig",
    "ModelConfig",
    "ODTConfig",
    "PPOConfig",
    "RolloutConfig",
    "RunConfig",
    "TrainConfig",
]

_BUILT_IN = (PPO, DT, ODT, MAPPO)


class TrainConfig(TrainConfigBase):
    """Everything one ``rlformer train`` run needs."""

    algo: Literal["ppo", "dt", "odt", "mappo"] = algo_field(_BUILT_IN)
    preset: str | None = preset_field(_BUILT_IN)
    run: RunConfig = section_field(SHARED_SECTIONS["run"])
    env: EnvConfig = section_field(SHARED_SECTIONS["env"])
    rollout: RolloutConfig = section_field(SHARED_SECTIONS["rollout"])
    model: ModelConfig = section_field(SHARED_SECTIONS["model"])
    eval: EvalConfig = section_field(SHARED_SECTIONS["eval"])
    learner: LearnerConfig = section_field(SHARED_SECTIONS["learner"])
    ppo: PPOConfig = section_field(PPO.section)
    dt: DTConfig = section_field(DT.section)
    odt: ODTConfig = section_field(ODT.section)
    mappo: MAPPOConfig = section_field(MAPPO.section)

    def resolved(self) -> TrainConfig:
        """This config as a run uses it (see :meth:`TrainConfigBase.resolved`)."""
        return cast(TrainConfig, super().resolved())


_config.declare_train_config(TrainConfig)
