"""Positional schemes for attention over ``[memory ; segment]``.

Absolute positions break once memory is reused (two segments would share indices), so every
scheme here depends only on the distance ``d = i - j`` between query and key, with d in [0, M]
because of the sliding window.

* ``relative`` — Transformer-XL (Dai et al. 2019): sinusoidal ``r_d`` projected by a separate key
  matrix ``W_r``; ``score = (q + u)·k + (q + v)·W_r r_d`` with learned global biases u, v.
* ``rotary`` — RoFormer (Su et al. 2021): q and k rotated by angles proportional to their
  positions, so ``q·k`` depends on ``i - j`` only. No extra parameters, SDPA-friendly.
* ``learned`` — a learned scalar bias per head and distance (as in T5, without buckets).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def sinusoid_table(num_positions: int, width: int) -> torch.Tensor:
    """``[num_positions, width]`` table: sin in the first half, cos in the second half."""
    positions = torch.arange(num_positions, dtype=torch.float32)[:, None]
    inv_freq = torch.exp(
        -math.log(10000.0) * torch.arange(0, width, 2, dtype=torch.float32) / width
    )
    angles = positions * inv_freq[None, :]  # [P, ceil(width/2)]
    table = torch.cat([angles.sin(), angles.cos()], dim=-1)
    return table[:, :width]


def relative_shift(scores: torch.Tensor) -> torch.Tensor:
    """Scores by distance ``[..., T, S]`` -> scores by key ``[..., T, S]`` (Transformer-XL's shift).

    Column k of ``scores`` holds each query's score for distance ``S - 1 - k``; the T queries are
    the last T of the S keys, so query i sits at key ``S - T + i``. The result holds, at key
    ``j <= S - T + i``, the score for distance ``S - T + i - j``. At later keys it holds finite
    values from the neighbouring row, which the causal mask hides. A pad and views do what a
    gather would; on CPU the gather's backward (a scatter-add) cost more than its forward.
    """
    *lead, queries, keys = scores.shape
    padded = F.pad(scores, (1, 0)).view(*lead, keys + 1, queries)
    return padded[..., 1:, :].reshape(*lead, queries, keys)


def rotary_angles(positions: torch.Tensor, head_width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin ``[P, head_width/2]`` of the rotation angles for integer ``positions``."""
    inv_freq = 1.0 / (
        10000.0
        ** (
            torch.arange(0, head_width, 2, dtype=torch.float32, device=positions.device)
            / head_width
        )
    )
    angles = positions.float()[:, None] * inv_freq[None, :]
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs ``(x[..., k], x[..., k + h/2])`` of ``x [B, H, P, h]`` by the given angles.

    Computed in fp32 even under bf16 autocast: the same key gets different absolute angles in
    different segmentations, and bf16 rounding of those would break step/segment equivalence.
    """
    half = x.shape[-1] // 2
    xf = x.float()
    first, second = xf[..., :half], xf[..., half:]
    rotated = torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)
    return rotated.to(x.dtype)
