"""The Decision Transformer's part of the run config: the ``dt`` section (also the network,
data and optimiser of the online DT) and what an offline DT reads of the shared sections.

The algorithm itself is :mod:`rlformer.algos.dt.algorithm`; this module stays free of torch and of
the algorithm's code, since :mod:`rlformer.config` imports it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from rlformer.config.sections.base import StrictModel
from rlformer.config.sections.learner import shares_fit
from rlformer.core.config import CoreConfig

DT_NETWORK = "a Decision Transformer's network is dt.core"
"""Why the Decision Transformers ignore the ``model`` section."""


def dt_core() -> CoreConfig:
    """The defaults of ``dt.core``: a Decision Transformer's attention core."""
    # Published DT gym setup: 3 layers, 1 head, width 128, dropout 0.1; window covers 3K tokens.
    # No positional scheme: like the original DT, order comes from the timestep embedding
    # (added to all three tokens of a step) and the causal mask; transformers' DT passes all-zero
    # position ids, the same thing. It also trains 7-14% faster than relative attention (no
    # position term, boolean mask).
    return CoreConfig(
        n_layers=3,
        n_heads=1,
        d_model=128,
        d_ff=512,
        dropout=0.1,
        memory_length=60,
        positional="none",
        block="trxl_i",
        precision="auto",
    )


class DTConfig(StrictModel):
    """Decision Transformer (offline) settings; defaults follow the published gym setup."""

    dataset: str = Field(
        "dataset.hdf5", description="d4rl:FILE, minari:ID or an rlformer recording (see collect)."
    )
    context: int = Field(20, ge=1, description="K: steps per training window.")
    return_scale: float = Field(1000.0, gt=0, description="Returns-to-go are divided by this.")
    core: CoreConfig = Field(default_factory=dt_core, description="Attention core of the DT.")
    max_timestep: int = Field(4096, ge=1, description="Size of the timestep embedding table.")
    cnn: Literal["auto", "nature", "impala", "minatar"] = Field(
        "auto",
        description="Encoder of image observation leaves (uint8 or bool, HWC/CHW), as model.cnn "
        "for PPO: Nature-DQN CNN (36x36 and up), IMPALA ResNet (any size) or MinAtar's one 3x3 "
        "convolution (small grids); auto: by each image's size. Other leaves: non-image Box "
        "standardised with the data's statistics, Discrete / MultiDiscrete one-hot, MultiBinary "
        "as bits; Dict / Tuple leaves concatenated.",
    )
    cnn_features: int | None = Field(
        None,
        ge=1,
        description="Features out of each image encoder; null: the encoder's own (nature and "
        "impala 512; minatar 128, as the MinAtar paper).",
    )
    image_scale: float = Field(
        255.0,
        gt=0,
        description="uint8 image leaves are divided by this before the CNN: 255 for camera "
        "pixels; the largest code for symbolic grids (MiniGrid: 10).",
    )
    batch_size: int = Field(64, ge=1, description="Windows per gradient step.")
    learning_rate: float = Field(1e-4, gt=0, description="AdamW learning rate.")
    weight_decay: float = Field(1e-4, ge=0, description="AdamW weight decay.")
    warmup_steps: int = Field(10_000, ge=0, description="Linear learning-rate warm-up steps.")
    max_grad_norm: float = Field(0.25, gt=0, description="Global gradient-norm clip.")
    train_steps: int = Field(10_000, ge=1, description="Gradient steps to train for.")
    log_every: int = Field(100, ge=1, description="Log metrics every N gradient steps.")
    memory_segments: int = Field(
        0,
        ge=0,
        description="0: plain DT; n > 0: train on n consecutive K-step windows carrying memory.",
    )
    condition_on_return: bool = Field(
        True,
        description="false: behaviour cloning, the DT paper's comparison, with the same "
        "transformer, tokens and compute: every returns-to-go input is replaced by zeros, so "
        "the policy cannot read a target (training, evaluation, export and serving alike; "
        "target returns are still accepted and ignored).",
    )
    timestep_embedding: bool = Field(
        True,
        description="false: every timestep input is replaced by 0, so the model has no "
        "absolute clock (a plain DT then cannot tell the episode's past from the step number; "
        "training, evaluation, export and serving alike; the embedding table stays).",
    )
    target_returns: list[float] = Field(
        default_factory=lambda: [100.0], description="Target returns for the final evaluation."
    )
    act_context: int | None = Field(
        None,
        ge=1,
        description="Steps of history a plain DT looks at when acting (evaluation and ODT "
        "rollouts), at most dt.context; null: dt.context. The ODT paper trains on K = 20 "
        "windows and acts on the last 5 steps on its gym tasks.",
    )

    @model_validator(mode="after")
    def _act_context_fits(self) -> DTConfig:
        if self.act_context is None:
            return self
        if self.act_context > self.context:
            raise ValueError(
                f"act_context ({self.act_context}) is longer than the training windows "
                f"(context {self.context}); set act_context <= context"
            )
        if self.memory_segments > 0:
            raise ValueError(
                "act_context is for a plain DT: a memory DT (memory_segments > 0) acts on whole "
                "K-step windows as it was trained; unset one of them"
            )
        return self

    @field_validator("core", mode="before")
    @classmethod
    def _dt_defaults_under_overrides(cls, value: Any) -> Any:
        # A partial `dt.core` section overrides the DT defaults, not CoreConfig's generic ones.
        if isinstance(value, dict):
            return {**dt_core().model_dump(), **value}
        return value


def check_config(cfg: Any) -> None:
    batch = cfg.dt.batch_size
    shares_fit(cfg, batch, "windows per batch", f"dt.batch_size={batch}")
