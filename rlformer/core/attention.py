"""Multi-head attention over ``[memory ; segment]`` with a choice of positional scheme.

Fast path: ``torch.nn.functional.scaled_dot_product_attention``. Position terms that are not
part of ``q·k`` (Transformer-XL's ``(q + v)·W_r r_d`` and the learned distance bias) are passed
as an additive float mask, pre-multiplied by the softmax scale where the formula scales them, and
Transformer-XL's content bias u is folded into the query. Rotary and ``none`` need only a
boolean mask, which lets SDPA pick its fused kernels.

A float mask that needs a gradient (training with ``relative`` or ``learned``) sends SDPA on the
CPU to its unfused math path, which also guards against fully masked rows; our layouts have
none (every query sees itself), so there the scores are computed explicitly: one ``baddbmm``
that adds ``q·k`` to the position term, softmax, one ``bmm``. At the popgym preset's minibatch
(4 rows x 64 steps, 64 memory slots) the attention's forward and backward fell from 2.6-2.9 to
2.1-2.4 ms timed alone, a whole minibatch step by about 3% (docs/benchmarks/throughput.md).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from rlformer.core.config import CoreConfig
from rlformer.core.masks import AttentionLayout
from rlformer.core.positional import (
    apply_rotary,
    relative_shift,
    rotary_angles,
    sinusoid_table,
)


class MemoryAttention(nn.Module):
    """Queries from the segment, keys and values from ``[memory ; segment]``."""

    def __init__(self, cfg: CoreConfig) -> None:
        super().__init__()
        d, self.n_heads, self.d_head = cfg.d_model, cfg.n_heads, cfg.d_head
        self.scheme = cfg.positional
        self.dropout = cfg.dropout
        self.query = nn.Linear(d, d, bias=False)
        self.key_value = nn.Linear(d, 2 * d, bias=False)
        self.out = nn.Linear(d, d)
        if self.scheme == "relative":
            self.position_key = nn.Linear(d, d, bias=False)  # W_r: the key projection for positions
            self.content_bias = nn.Parameter(torch.randn(cfg.n_heads, cfg.d_head) * 0.02)  # u
            self.position_bias = nn.Parameter(torch.randn(cfg.n_heads, cfg.d_head) * 0.02)  # v
            self.register_buffer(
                "relative_table", sinusoid_table(cfg.memory_length + 1, d), persistent=False
            )
        elif self.scheme == "learned":
            self.distance_bias = nn.Parameter(torch.zeros(cfg.n_heads, cfg.memory_length + 1))

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.n_heads, self.d_head).transpose(1, 2)  # [B, H, L, h]

    def forward(
        self,
        x: torch.Tensor,
        context: torch.Tensor | None,
        layout: AttentionLayout,
        context_kv: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``x [B, T, d]`` queries, ``context [B, M+T, d]`` keys/values -> ``[B, T, d]``.

        ``context_kv``, if given, is ``key_value(context)`` computed earlier (incremental
        inference reuses the memory's projections instead of re-projecting M states per step);
        then ``context`` may be None.
        """
        batch, seg_len, width = x.shape
        if context_kv is None:
            assert context is not None, "give the context or its keys/values"
            context_kv = self.key_value(context)
        ctx_len = context_kv.shape[1]
        q = self._heads(self.query(x))  # [B, H, T, h]
        k, v = context_kv.split(width, dim=-1)
        k, v = self._heads(k), self._heads(v)  # [B, H, S, h]
        visible = layout.visible[:, None]  # [B, 1, T, S]
        scale = 1.0 / math.sqrt(self.d_head)

        if self.scheme == "relative":
            pos_term = self._relative_term(q, layout, ctx_len, scale)  # [B, H, T, S], scaled
            mask = pos_term.masked_fill(~visible, float("-inf"))
            q = q + self.content_bias[None, :, None]
        elif self.scheme == "learned":
            bias = self.distance_bias[:, layout.distance].to(q.dtype)  # [H, T, S]
            mask = bias[None].masked_fill(~visible, float("-inf"))
        else:
            mask = visible
            if self.scheme == "rotary":
                positions = torch.arange(ctx_len, device=x.device)
                cos, sin = rotary_angles(positions, self.d_head)
                k = apply_rotary(k, cos, sin)
                at = layout.query_positions  # where each query sits among the keys
                q = apply_rotary(q, cos[at], sin[at])

        dropout = self.dropout if self.training else 0.0
        if mask.dtype != torch.bool and mask.requires_grad and mask.device.type == "cpu":
            attended = _explicit_attention(q * scale, k, v, mask, dropout)
        else:
            attended = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=dropout
            )  # [B, H, T, h]
        return self.out(attended.transpose(1, 2).reshape(batch, seg_len, width))

    def step_cached(
        self,
        x: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        kv: torch.Tensor,
        layout: AttentionLayout,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One query per row against memory keys/values kept by heads, without concatenating.

        ``x [B, 1, d]`` (the query token), ``keys, values [B, H, M, h]`` (the memory slots'),
        ``kv [B, 1, 2d]`` (:attr:`key_value` of the token itself). Returns the output
        ``[B, 1, d]`` and the token's key and value ``[B, H, 1, h]``. The same scores as
        :meth:`forward` over ``[memory ; token]``, but the memory is read where it lies: an
        exported step, which cannot view a tensor, would copy it once more per step otherwise.
        """
        batch, _, width = x.shape
        slots = keys.shape[2]
        q = self._heads(self.query(x))  # [B, H, 1, h]
        key, value = (self._heads(part) for part in kv.split(width, dim=-1))  # [B, H, 1, h]
        token_key = key  # kept unrotated: rotations depend on a key's place, which moves
        scale = 1.0 / math.sqrt(self.d_head)
        bias = torch.zeros(layout.visible.shape, dtype=q.dtype, device=q.device)[:, None]
        if self.scheme == "relative":
            bias = self._relative_term(q, layout, slots + 1, scale)  # [B, H, 1, S]
            q = q + self.content_bias[None, :, None]
        elif self.scheme == "learned":
            bias = self.distance_bias[:, layout.distance].to(q.dtype)[None]  # [1, H, 1, S]
        elif self.scheme == "rotary":  # keys rotate with their place among the M + 1
            cos, sin = rotary_angles(torch.arange(slots + 1, device=x.device), self.d_head)
            keys = apply_rotary(keys, cos[:slots], sin[:slots])
            key = apply_rotary(key, cos[slots:], sin[slots:])
            q = apply_rotary(q, cos[slots:], sin[slots:])
        q = q * scale
        scores = torch.cat([q @ keys.transpose(-1, -2), (q * key).sum(-1, keepdim=True)], dim=-1)
        scores = (scores + bias).masked_fill(~layout.visible[:, None], float("-inf"))
        weights = scores.softmax(dim=-1)  # the token sees itself: never a row of -inf only
        attended = weights[..., :slots] @ values + weights[..., slots:] * value  # [B, H, 1, h]
        return self.out(attended.transpose(1, 2).reshape(batch, 1, width)), token_key, value

    def _relative_term(
        self, q: torch.Tensor, layout: AttentionLayout, ctx_len: int, scale: float
    ) -> torch.Tensor:
        """Transformer-XL's ``(q + v)·W_r r_d`` times ``scale``, for every query and key,
        ``[B, H, T, S]`` (scaled on the small query side, not on the scores).

        Distances beyond M (always hidden by the window) reuse ``r_M``. When the queries are
        the last keys in order, scores against distances ``S-1 .. 0`` are shifted into place;
        a selection of queries (``output_index``) gathers them by its distance table instead.
        """
        biased = (q + self.position_bias[None, :, None]) * scale
        table = self.relative_table.to(q.dtype)
        if layout.queries_are_last:
            distances = torch.arange(ctx_len - 1, -1, -1, device=q.device).clamp(max=len(table) - 1)
            r = self.position_key(table[distances]).view(ctx_len, self.n_heads, self.d_head)
            return relative_shift(torch.einsum("bhtc,khc->bhtk", biased, r))
        r = self.position_key(table).view(-1, self.n_heads, self.d_head)  # [M+1, H, h]
        scores = torch.einsum("bhtc,dhc->bhtd", biased, r)
        batch, heads, queries, _ = scores.shape
        index = layout.distance[None, None].expand(batch, heads, queries, ctx_len)
        return scores.gather(-1, index)


def _explicit_attention(
    scaled_q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, dropout: float
) -> torch.Tensor:
    """``softmax(bias + q·kᵀ) v`` for ``scaled_q [B, H, T, h]``, ``k, v [B, H, S, h]`` and a float
    ``bias [B, H, T, S]`` whose rows each hold at least one finite entry."""
    batch, heads, queries, width = scaled_q.shape
    keys = k.shape[2]
    scores = torch.baddbmm(
        bias.reshape(batch * heads, queries, keys),
        scaled_q.reshape(batch * heads, queries, width),
        k.reshape(batch * heads, keys, width).transpose(1, 2),
    )
    weights = scores.softmax(dim=-1)
    if dropout > 0.0:
        weights = F.dropout(weights, dropout)
    attended = torch.bmm(weights, v.reshape(batch * heads, keys, width))
    return attended.view(batch, heads, queries, width)
