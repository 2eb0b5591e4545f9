"""The ``learner`` section: how many learner processes share each gradient step, and in how many
chunks each minibatch is processed.

One learner (the default) trains in the driver process, exactly as without this section. More
than one run as Ray actors holding identical model replicas, each computing the gradient of its
share of every minibatch (:mod:`rlformer.learners.parallel`).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from rlformer.config_sections.base import StrictModel


class LearnerConfig(StrictModel):
    """Data-parallel learners and gradient accumulation."""

    num_learners: int = Field(
        1,
        ge=1,
        description="Learner processes (Ray actors, one model replica each) sharing every "
        "minibatch, gradients all-reduced; 1: the learner runs in the driver process.",
    )
    accumulate: int = Field(
        1,
        ge=1,
        description="Chunks each learner's share of a minibatch is processed in, gradients "
        "accumulated before one optimiser step (for minibatches that do not fit one device).",
    )
    cpus_per_learner: float = Field(
        1.0, gt=0, description="CPUs reserved per learner actor (num_learners > 1)."
    )
    timeout_s: float = Field(
        300.0,
        gt=0,
        description="Seconds any call to a learner actor, and any collective between them, may "
        "take before the run stops as failed (num_learners > 1).",
    )


def shares_fit(cfg: Any, sequences: int, unit: str, split: str) -> None:
    """Every learner's share of a minibatch of ``sequences`` must hold at least one whole
    sequence per accumulation chunk; ``unit`` names them (``windows per batch``) and ``split``
    the keys that set their number (a ValueError naming the keys otherwise)."""
    learner = cfg.learner
    needed = learner.num_learners * learner.accumulate
    if needed > sequences:
        raise ValueError(
            f"learner.num_learners={learner.num_learners} x learner.accumulate="
            f"{learner.accumulate} needs at least {needed} {unit}; {split} "
            f"gives {sequences}"
        )
