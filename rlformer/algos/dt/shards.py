"""One Decision Transformer gradient step computed in shares: chunks of windows
(``learner.accumulate``) and replicas (``learner.num_learners``).

The DT loss averages over the real (unpadded) steps of every window, so each share contributes
the sum of its steps' losses divided by the whole batch's real-step count (summed over the
replicas). The shares' losses then add up to the batch's and their gradients, accumulated over
chunks and summed over replicas, to its gradient: the step equals the one-chunk, one-learner
step up to float rounding (and dropout's draws). A memory DT's consecutive windows stay with
their rows, so memory is carried within each share as in the whole batch.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import torch

from rlformer.algos.dt.learner import DTLearner
from rlformer.data.sampling import WindowBatch
from rlformer.learners.process_group import LOCAL, Reducer, reduce_gradients
from rlformer.networks.spaces import tree_map


def window_rows(batch: WindowBatch, rows: torch.Tensor) -> WindowBatch:
    """The windows ``rows`` of ``batch``."""
    values = {f.name: tree_map(lambda t: t[rows], getattr(batch, f.name)) for f in fields(batch)}
    return type(batch)(**values)


def _chunk_terms(
    learner: ShardedDTLearner, segments: list[WindowBatch], total: torch.Tensor
) -> dict[str, torch.Tensor] | None:
    """The chunk's share of every loss term (its steps' sum over ``total`` real steps); None
    when it has no real step."""
    memory = None
    terms: dict[str, torch.Tensor] | None = None
    for raw in segments:
        batch = raw.to(learner.device)
        if not batch.mask.any():
            continue
        out = learner.forward(batch, memory)
        memory = out.memory
        weight = batch.mask.sum()
        parts = {name: value * weight for name, value in learner.segment_loss(out, batch).items()}
        terms = parts if terms is None else {name: terms[name] + parts[name] for name in terms}
    return None if terms is None else {name: value / total for name, value in terms.items()}


def _shared_terms(
    learner: ShardedDTLearner, segments: list[WindowBatch]
) -> dict[str, torch.Tensor]:
    """Backpropagate this member's chunks; the batch's loss terms, summed over the group."""
    reducer = learner.reducer
    real = sum(float(segment.mask.sum()) for segment in segments)
    total = reducer.sum(torch.tensor(real, dtype=torch.float64, device=learner.device)).float()
    sums: dict[str, torch.Tensor] = {}
    for chunk in torch.tensor_split(torch.arange(segments[0].mask.shape[0]), learner.accumulate):
        terms = _chunk_terms(learner, [window_rows(s, chunk) for s in segments], total)
        if terms is None:
            continue
        if bool(torch.isfinite(terms["loss/action"])):  # else the step stops after the sums
            terms["loss/action"].backward()
        for name, value in terms.items():
            sums[name] = sums.get(name, 0.0) + value.detach().double()
    if not sums:
        raise ValueError("a learner's share of the windows holds no real step")
    summed = reducer.sum(torch.stack(list(sums.values())))
    return {name: summed[i].float() for i, name in enumerate(sums)}


def sharded_update(
    learner: ShardedDTLearner, windows: WindowBatch | list[WindowBatch]
) -> dict[str, Any]:
    """:meth:`DTLearner.update` on this member's windows, as one step of the whole batch."""
    segments = [windows] if isinstance(windows, WindowBatch) else windows
    learner.model.train()
    learner.optimizer.zero_grad(set_to_none=True)
    terms = _shared_terms(learner, segments)
    # the shares' backward passes ran above; the step needs their sum
    return learner.apply_gradients(
        terms, lambda: reduce_gradients(learner.model.parameters(), learner.reducer)
    )


class ShardedDTLearner(DTLearner):
    """A :class:`DTLearner` whose every step is computed in ``accumulate`` chunks of windows and
    summed over the members of ``reducer`` (one replica's group, or :data:`LOCAL`)."""

    def __init__(
        self, *args: Any, accumulate: int = 1, reducer: Reducer = LOCAL, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.accumulate = accumulate  # learner.accumulate: chunks of windows per step
        self.reducer = reducer

    def update(self, windows: WindowBatch | list[WindowBatch]) -> dict[str, float]:
        return sharded_update(self, windows)
