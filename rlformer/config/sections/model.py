"""The ``model`` section: the actor-critic network, a torso (GTrXL core, LSTM, GRU or MLP) with
policy and value heads."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, PositiveInt, field_validator, model_validator

from rlformer.config.sections.base import StrictModel
from rlformer.core.config import CoreConfig


def actor_critic_core() -> CoreConfig:
    """The defaults of ``model.core``, tuned with PPO (which is why ``CoreConfig``'s generic
    ones are not used)."""
    # From the sweeps and runs in docs/benchmarks/: one layer (memory is carried
    # between fragments without gradient, so a second layer cannot learn to relay a cue
    # through the first one's memory: T-Maze L=100 58% with two layers, 100% with one), gate
    # bias 0 (b_g = 2 kept every gate at chance on POPGym RepeatPrevious and CartPole without
    # velocities at 145 against 499), width 64 with 4 heads and an MLP of 128 (the POPGym configs).
    return CoreConfig(n_layers=1, d_model=64, n_heads=4, d_ff=128, memory_length=64, gate_bias=0.0)


class ModelConfig(StrictModel):
    """The actor-critic network: a torso (GTrXL core or MLP) plus policy and value heads."""

    torso: Literal["gtrxl", "lstm", "gru", "mlp"] = Field(
        "gtrxl",
        description="gtrxl: memory-enabled attention core; lstm / gru: recurrent baselines; "
        "mlp: memoryless baseline.",
    )
    core: CoreConfig = Field(
        default_factory=actor_critic_core,
        description="Attention core settings (precision defaults to fp32 for PPO, see below).",
    )
    shared_torso: bool = Field(
        True, description="Actor and critic share one torso (false: two separate torsos)."
    )
    mlp_hidden: list[PositiveInt] = Field(
        default_factory=lambda: [64, 64], description="Hidden sizes of the MLP torso."
    )
    recurrent_hidden: int = Field(
        128, ge=1, description="Hidden size of the lstm / gru torso (and its input embedding)."
    )
    recurrent_layers: int = Field(1, ge=1, description="Stacked layers of the lstm / gru torso.")
    log_std_init: float = Field(0.0, description="Initial log std of the Gaussian action head.")
    cnn: Literal["auto", "nature", "impala", "minatar"] = Field(
        "auto",
        description="Encoder of image leaves (uint8 or bool, HWC/CHW): Nature-DQN CNN (36x36 "
        "and up), IMPALA ResNet (any size) or MinAtar's one 3x3 convolution (small grids); "
        "auto: by each image's size, nature from 36x36, minatar below (rlformer train --dry-run "
        "says which).",
    )
    cnn_features: int | None = Field(
        None,
        ge=1,
        description="Features out of each image encoder; null: the encoder's own (nature and "
        "impala 512, as SB3 and Nature-DQN; minatar 128, as the MinAtar paper).",
    )
    image_scale: float = Field(
        255.0,
        gt=0,
        description="uint8 image leaves are divided by this before the CNN: 255 for camera "
        "pixels; the largest code for symbolic grids (MiniGrid: 10), which /255 squashes to "
        "at most 0.04.",
    )
    prev_action_reward: bool = Field(
        False, description="Feed the previous action and reward into each token (0 at resets)."
    )
    normalize_obs: bool = Field(
        False,
        description="Running mean/std normalisation of vector observation leaves (bool Box "
        "and MultiBinary leaves stay 0/1).",
    )
    reconstruction: bool = Field(
        False,
        description="Build a decoder from the actor's latent at each step to that step's "
        "observation (the encoder's inputs; images pooled to 8x8): an auxiliary loss for "
        "memory tasks stuck at chance, weighted by ppo.reconstruction_coef (> 0 with it).",
    )
    normalize_reward: bool = Field(
        True,
        description="Scale rewards by the std of a running discounted return (VecNormalize): "
        "value_scaling return_std. Set without value_scaling, it chooses return_std (true) or "
        "none (false); set with it, value_scaling wins.",
    )
    value_scaling: (
        Literal["none", "return_std", "percentile", "symlog", "symlog_percentile", "popart"] | None
    ) = Field(
        "return_std",
        description="How PPO copes with the reward's scale (rlformer/networks/value_scaling.py); "
        "return_std by default (first or second of six on the pilot tasks: "
        "docs/benchmarks/value_scaling.md). null: as normalize_reward says (run configs "
        "saved without this key); none: rewards and "
        "value targets as they are; return_std: rewards divided by the running return's std "
        "(normalize_reward=true); percentile: advantages divided by max(1, P95 - P5 of returns), "
        "EMA 0.99 (DreamerV3), instead of per-minibatch standardisation; symlog: the value head "
        "predicts symlog(return); symlog_percentile: both; popart: a normalised value head "
        "rescaled to preserve its outputs when the return statistics move (PopArt).",
    )
    normalize_gamma: float = Field(
        0.99, ge=0, le=1, description="Discount of the return whose std scales rewards."
    )
    normalize_clip: float = Field(
        10.0, gt=0, description="Normalised observations and scaled rewards are clipped to +-this."
    )

    @field_validator("core", mode="before")
    @classmethod
    def _defaults_under_overrides(cls, value: Any) -> Any:
        # A partial `model.core` section overrides these defaults, not CoreConfig's generic ones.
        if isinstance(value, dict):
            return {**actor_critic_core().model_dump(exclude_unset=True), **value}
        return value

    @model_validator(mode="after")
    def _value_scaling_decides_reward_normalisation(self) -> ModelConfig:
        # Reward normalisation is one of the value_scaling choices; the others leave rewards
        # as they are. normalize_reward set alone (a preset, a task config, a user) still says
        # which of its two it wants; value_scaling null (run configs saved before the key)
        # leaves the decision to normalize_reward.
        chosen = self.model_fields_set
        if "normalize_reward" in chosen and "value_scaling" not in chosen:
            wanted_scaling = "return_std" if self.normalize_reward else "none"
            if self.value_scaling != wanted_scaling:
                self.value_scaling = wanted_scaling  # type: ignore[assignment]
        wanted = self.value_scaling == "return_std"
        if self.value_scaling is not None and self.normalize_reward != wanted:
            self.normalize_reward = wanted  # validated again, then equal: no further call
        return self

    @model_validator(mode="after")
    def _fp32_unless_asked(self) -> ModelConfig:
        # CPU rollout workers run fp32; a CUDA learner under bf16 autocast would compute
        # log-probs ~1e-2 off and break PPO's ratio = 1. Only an explicit choice overrides this.
        if "precision" not in self.core.model_fields_set:
            self.core.precision = "fp32"
        return self
