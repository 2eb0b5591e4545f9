"""The ``learner`` section: how many learner processes share each gradient step, in how many
chunks each minibatch is processed, and where the learner processes run.

One learner (the default) trains in the driver process, exactly as without this section. More
than one run as Ray actors holding identical model replicas, each computing the gradient of its
share of every minibatch (:mod:`rlformer.learners.learner_group`). ``device`` and ``resources``
place the actors (a GPU each, nodes offering a custom resource); setting either runs even one
learner as an actor, so a driver without a GPU can feed a GPU learner on another node.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from rlformer.config.sections.base import StrictModel


class LearnerConfig(StrictModel):
    """Data-parallel learners and gradient accumulation."""

    num_learners: int = Field(
        1,
        ge=1,
        description="Learner processes (Ray actors, one model replica each) sharing every "
        "minibatch, gradients all-reduced; 1: the learner runs in the driver process (unless "
        "learner.device or learner.resources places it).",
    )
    accumulate: int = Field(
        1,
        ge=1,
        description="Chunks each learner's share of a minibatch is processed in, gradients "
        "accumulated before one optimiser step (for minibatches that do not fit one device).",
    )
    cpus_per_learner: float = Field(1.0, gt=0, description="CPUs reserved per learner actor.")
    device: Literal["cpu", "cuda"] | None = Field(
        None,
        description="Device of the learner actors; cuda reserves one GPU per actor on whichever "
        "node has one (rollout workers and the driver need none); null: run.device, and one "
        "learner stays in the driver.",
    )
    resources: dict[str, float] = Field(
        default_factory=dict,
        description="Custom Ray resources each learner actor reserves, e.g. {learner_node: 1} "
        "places them on nodes started with ray start --resources='{\"learner_node\": 2}'; "
        "non-empty: even one learner runs as an actor.",
    )
    timeout_s: float = Field(
        300.0,
        gt=0,
        description="Seconds any call to a learner actor, and any collective between them, may "
        "take before the run stops as failed (learners on Ray).",
    )

    @property
    def on_ray(self) -> bool:
        """Whether the learners run as Ray actors: more than one, or placed by ``device`` or
        ``resources`` (else the one learner runs in the driver, as without this section)."""
        return self.num_learners > 1 or self.device is not None or bool(self.resources)


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
