"""One PPO update's epochs: minibatches of whole env rows drawn in a seeded order, each taken by
a gradient step, their metrics tallied, stopping early past ``ppo.target_kl``.

One :class:`~rlformer.algos.ppo.learner.PPOLearner` and a data-parallel group of replicas
(:mod:`rlformer.algos.ppo.data_parallel`) both run their updates through :func:`run_epochs`, so
they draw the same minibatches from the same generator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from rlformer.algos.ppo.config import PPOConfig

Step = Callable[[torch.Tensor, str], dict[str, Any] | None]
"""One minibatch's gradient step: given its env rows and where it is (for error messages), its
metrics, or None when a non-finite loss or gradient was skipped."""


@dataclass
class EpochTally:
    """The metrics of one update's minibatch steps, summed."""

    sums: dict[str, float] = field(default_factory=dict)
    count: int = 0
    first_ratio_error: float = 0.0
    skipped: int = 0

    def add(self, metrics: dict[str, Any], first_epoch: bool) -> None:
        if first_epoch and self.count == 0:
            # Before any gradient step the ratio must be exactly 1 (memory alignment check;
            # with memory_gradient_steps it measures how far recomputed memory drifted).
            self.first_ratio_error = float(metrics["ppo/max_ratio_error"])
        for key, value in metrics.items():
            self.sums[key] = self.sums.get(key, 0.0) + float(value)
        self.count += 1

    def summary(self, lr: float, ent_coef: float) -> dict[str, float]:
        """Per-minibatch means, ready to log with the update's learning rate and entropy
        weight."""
        result = {key: value / max(self.count, 1) for key, value in self.sums.items()}
        result["nonfinite/skipped_minibatches"] = float(self.skipped)
        result.pop("ppo/max_ratio_error", None)
        result["ppo/first_minibatch_ratio_error"] = self.first_ratio_error
        result["lr"] = lr
        result["ent_coef"] = ent_coef
        return result


def run_epochs(
    generator: torch.Generator, num_rows: int, cfg: PPOConfig, iteration: int, step: Step
) -> EpochTally:
    """``ppo.update_epochs`` passes over ``num_rows`` env rows in ``ppo.num_minibatches`` random
    minibatches, ``step`` taking each; stops early past ``ppo.target_kl``.

    ``generator`` draws one permutation per epoch started, so one learner and a group of
    replicas driven from here consume it alike.
    """
    tally = EpochTally()
    for epoch in range(cfg.update_epochs):
        order = torch.randperm(num_rows, generator=generator)
        for minibatch, rows in enumerate(torch.tensor_split(order, cfg.num_minibatches)):
            where = f"PPO update {iteration + 1}, epoch {epoch + 1}, minibatch {minibatch + 1}"
            metrics = step(rows, where)
            if metrics is None:
                tally.skipped += 1
                continue
            tally.add(metrics, epoch == 0)
            if cfg.target_kl is not None and float(metrics["ppo/approx_kl"]) > cfg.target_kl:
                return tally
    return tally
