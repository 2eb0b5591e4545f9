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
