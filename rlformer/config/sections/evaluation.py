"""The ``eval`` section: the final evaluation, and the periodic ones during training."""

from __future__ import annotations

from pydantic import Field

from rlformer.config.sections.base import StrictModel


class EvalConfig(StrictModel):
    """Evaluation at the end of training, and optionally during it (SB3's EvalCallback)."""

    episodes: int = Field(20, ge=0, description="Episodes for the final evaluation (0 skips it).")
    deterministic: bool = Field(
        True,
        description="Greedy / mean actions during evaluation (false: sampled; Decision "
        "Transformers sample only as online DTs or with discrete actions).",
    )
    num_envs: int = Field(8, ge=1, description="Vector envs used for evaluation.")
    every: int = Field(
        0,
        ge=0,
        description="Also evaluate every N iterations while training (0: only at the end; an "
        "iteration is one PPO rollout and update, dt.log_every DT gradient steps or one ODT "
        "collection); logged as periodic_eval/*, the best weights kept in checkpoints/best.pt "
        "(DT: by the first target's return).",
    )
    every_episodes: int = Field(
        10,
        ge=1,
        description="Episodes per evaluation during training: the same seeds each time, none "
        "shared with the final evaluation, so choosing best.pt does not tune on the final score.",
    )
