"""One PPO minibatch step computed in shares: chunks of rows (``learner.accumulate``) and
replicas (``learner.num_learners``).

The minibatch's loss is a mean over its steps, so each share contributes its *sum* divided by
the whole minibatch's step count, and the advantages are normalised with the whole minibatch's
mean and std (summed moments). The shares' losses then add up to the minibatch's loss and their
gradients, accumulated over chunks and summed over replicas, to its gradient: the step equals
the one-chunk, one-learner step up to float rounding. The non-finite checks read the summed
loss and gradient, so every replica skips or stops on the same minibatch.
"""

from __future__ import annotations

from typing import Any

import torch

from rlformer.algos.ppo import learner as ppo_module
from rlformer.algos.ppo.learner import PPOLearner, SequenceBatch
from rlformer.learners.process_group import LOCAL, Reducer, reduce_gradients

MAX_KEY = "ppo/max_ratio_error"
"""The one metric that is a maximum over steps, not a mean."""


def advantage_scale(
    advantages: torch.Tensor, count: int, norm_adv: bool, reducer: Reducer
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The (mean, unbiased std) of the advantages of the whole minibatch of ``count`` steps,
    from this share's ``advantages`` and the other members' sums (float64 moments); None where
    one learner would not normalise either."""
    if not norm_adv or count <= 1:
        return None
    flat = advantages.detach().double().reshape(-1)
    sums = reducer.sum(torch.stack([flat.sum(), flat.square().sum()]))
    mean = sums[0] / count
    var = ((sums[1] - sums[0] * mean) / (count - 1)).clamp_min(0.0)
    return mean.to(advantages.dtype), var.sqrt().to(advantages.dtype)


def _share_losses(
    learner: ShardedPPOLearner,
    batch: SequenceBatch,
    rows: torch.Tensor,
    count: int,
    ent_coef: float,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Backpropagate this member's chunks of ``rows``; its share of the loss and of every
    metric (float64, summed over chunks; the ratio error as a maximum)."""
    cfg, model, device = learner.cfg, learner.model, learner.device
    scale = advantage_scale(batch.advantages[rows.to(device)], count, cfg.norm_adv, learner.reducer)

    def average(term: torch.Tensor) -> torch.Tensor:
        return term.sum() / count

    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    sums: dict[str, torch.Tensor] = {}
    for chunk in torch.tensor_split(rows, learner.accumulate):
        if len(chunk) == 0:
            continue
        mb = batch.rows(chunk.to(device))
        out = model.evaluate(
            mb.obs, mb.actions, mb.state, mb.episode_start, mb.rewards, mb.action_masks
        )
        if mb.prefix_steps:  # the prefix only rebuilds memory; the loss is the fragment's
            out = out.from_step(mb.prefix_steps)
        loss, metrics = ppo_module.ppo_loss(out, mb, cfg, ent_coef, average, scale)
        if bool(torch.isfinite(loss)):  # a non-finite share stops the step after the sums
            loss.backward()
        loss_sum = loss_sum + loss.detach().double()
        for key, value in metrics.items():
            value = value.detach().double()
            if key in sums:
                value = torch.maximum(sums[key], value) if key == MAX_KEY else sums[key] + value
            sums[key] = value
    return loss_sum, sums


def _reduce_metrics(
    loss: torch.Tensor, sums: dict[str, torch.Tensor], reducer: Reducer
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The minibatch's loss and metrics from every member's shares (two all-reduces)."""
    keys = [key for key in sums if key != MAX_KEY]
    total = reducer.sum(torch.stack([loss, *[sums[key] for key in keys]]))
    worst = reducer.max(sums[MAX_KEY].reshape(1).clone())
    reduced = dict(zip(keys, total[1:], strict=True)) | {MAX_KEY: worst[0]}
    # In the order ppo_loss gives them: the first non-finite one is the one reported.
    return total[0].float(), {key: reduced[key].float() for key in sums}


def sharded_step(
    learner: ShardedPPOLearner,
    batch: SequenceBatch,
    rows: torch.Tensor,
    total_rows: int,
    where: str,
    ent_coef: float,
) -> dict[str, Any] | None:
    """The gradient step of a minibatch of ``total_rows`` rows of which this member holds
    ``rows``, in ``learner.accumulate`` chunks; the same metrics as
    :meth:`~rlformer.algos.ppo.learner.PPOLearner._minibatch_step`, identical on every member."""
    count = total_rows * batch.advantages.shape[1]
    learner.optimizer.zero_grad(set_to_none=True)
    loss, sums = _share_losses(learner, batch, rows, count, ent_coef)
    loss, metrics = _reduce_metrics(loss, sums, learner.reducer)
    # the shares' backward passes ran above; the step needs their sum
    return learner.apply_gradients(
        loss,
        metrics,
        where,
        lambda: reduce_gradients(learner.model.parameters(), learner.reducer),
    )


class ShardedPPOLearner(PPOLearner):
    """A :class:`PPOLearner` whose every minibatch step is computed in ``accumulate`` chunks of
    rows and summed over the members of ``reducer`` (one replica's group, or :data:`LOCAL`)."""

    def __init__(
        self, *args: Any, accumulate: int = 1, reducer: Reducer = LOCAL, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.accumulate = accumulate  # learner.accumulate: chunks per minibatch
        self.reducer = reducer

    def step(
        self,
        batch: SequenceBatch,
        rows: torch.Tensor,
        total_rows: int,
        where: str,
        ent_coef: float,
    ) -> dict[str, Any] | None:
        return sharded_step(self, batch, rows, total_rows, where, ent_coef)
