"""Running mean / variance statistics, merged from many workers (SB3 VecNormalize-style).

Each rollout worker normalises with the statistics of the weight version it was given (they
are buffers of the model, so they travel with the weights and the checkpoint) and reports the
*moments of what it saw* in that fragment: ``(count, mean, M2)``. The learner merges every
worker's moments into the model's statistics after the update, in worker order, with the
parallel-variance formula (Chan, Golub & LeVeque 1979)::

    delta = mean_b - mean_a,  n = n_a + n_b
    mean  = mean_a + delta * n_b / n
    M2    = M2_a + M2_b + delta**2 * n_a * n_b / n

so both rollout backends give bit-identical statistics, and evaluation (which never merges)
uses them frozen.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

# (count, mean, M2) of a batch of values; mean and M2 have the shape of one value.
Moments = tuple[float, np.ndarray, np.ndarray]

EPSILON = 1e-8


def moments(values: np.ndarray, value_shape: tuple[int, ...] = ()) -> Moments:
    """Moments of ``values [..., *value_shape]`` over all leading dims, in float64."""
    flat = np.asarray(values, dtype=np.float64).reshape(-1, *value_shape)
    if flat.shape[0] == 0:  # nothing seen (a multi-agent fragment whose agents were all absent)
        zeros = np.zeros(value_shape, dtype=np.float64)
        return 0.0, zeros, zeros.copy()
    mean = flat.mean(axis=0)
    return float(flat.shape[0]), mean, ((flat - mean) ** 2).sum(axis=0)


def merge_moments(a: Moments, b: Moments) -> Moments:
    """Moments of the union of two batches (parallel-variance formula)."""
    n_a, mean_a, m2_a = a
    n_b, mean_b, m2_b = b
    n = n_a + n_b
    if n_b == 0:
        return a
    if n_a == 0:
        return b
    delta = mean_b - mean_a
    return n, mean_a + delta * (n_b / n), m2_a + m2_b + delta**2 * (n_a * n_b / n)


class RunningMeanStd(nn.Module):
    """Statistics of one quantity as float64 buffers (count, mean, M2); no parameters."""

    def __init__(self, shape: tuple[int, ...] = ()) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("m2", torch.zeros(shape, dtype=torch.float64))

    def var(self) -> torch.Tensor:
        """Population variance; 1 before anything was seen (normalisation is then a no-op).

        A select rather than a Python branch on the count, so that exported graphs (which see
        the statistics as constants they must not branch on) keep this rule.
        """
        return torch.where(self.count == 0, torch.ones_like(self.m2), self.m2 / self.count)

    def merge(self, batch: Moments) -> None:
        """Fold a batch's moments into the statistics (in place)."""
        current = (float(self.count), self.mean.cpu().numpy(), self.m2.cpu().numpy())
        count, mean, m2 = merge_moments(current, batch)
        self.count.fill_(count)
        # torch.tensor copies: moments from a Ray worker arrive as read-only arrays, which
        # as_tensor would share (and warn about) before copy_ reads them.
        self.mean.copy_(torch.tensor(mean, dtype=torch.float64))
        self.m2.copy_(torch.tensor(m2, dtype=torch.float64))

    def normalize(self, x: torch.Tensor, clip: float) -> torch.Tensor:
        """``clip((x - mean) / sqrt(var + eps))`` in float32; x's trailing dims match mean."""
        mean = self.mean.to(torch.float32)
        std = torch.sqrt(self.var() + EPSILON).to(torch.float32)
        return ((x - mean) / std).clamp(-clip, clip)

    def scale(self, unmerged: Moments | None = None) -> float:
        """``1 / sqrt(var + eps)``: what rewards are multiplied by (return-based scaling).

        ``unmerged``: moments of a batch not folded in yet, counted as if they were (the learner's
        scale for a fragment whose statistics merge only after the update).
        """
        if unmerged is None:
            return float(1.0 / torch.sqrt(self.var() + EPSILON))
        current = (float(self.count), self.mean.cpu().numpy(), self.m2.cpu().numpy())
        count, _, m2 = merge_moments(current, unmerged)
        variance = float(m2) / count if count > 0 else 1.0
        return float(1.0 / np.sqrt(variance + EPSILON))
