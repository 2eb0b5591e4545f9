"""One Transformer-XL block in three variants.

* ``post_ln`` (Transformer-XL): ``h = LN(x + Attn(x, mem)); out = LN(h + MLP(h))``.
* ``trxl_i`` (identity-map reordering): LayerNorm only on sub-layer *inputs*, never on the skip
  path: ``h = x + Attn(LN(x), LN(mem)); out = h + MLP(LN(h))``.
* ``gtrxl``: the reordering plus gates instead of sums:
  ``h = g1(x, ReLU(Attn(...))); out = g2(h, ReLU(MLP(LN(h))))``.
"""

from __future__ import annotations

import torch
from torch import nn

from rlformer.core.attention import MemoryAttention
from rlformer.core.config import CoreConfig
from rlformer.core.gates import make_gate
from rlformer.core.masks import AttentionLayout


class MemoryBlock(nn.Module):
    """Attention over ``[memory ; x]`` then a position-wise MLP, combined per ``cfg.block``."""

    def __init__(self, cfg: CoreConfig) -> None:
        super().__init__()
        self.kind = cfg.block
        self.attention = MemoryAttention(cfg)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.d_ff), nn.ReLU(), nn.Linear(cfg.d_ff, cfg.d_model)
        )
        self.norm_attn = nn.LayerNorm(cfg.d_model)
        self.norm_mlp = nn.LayerNorm(cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        if self.kind == "gtrxl":
            self.gate_attn = make_gate(cfg.gate, cfg.d_model, cfg.gate_bias)
            self.gate_mlp = make_gate(cfg.gate, cfg.d_model, cfg.gate_bias)

    def project_kv(self, tokens: torch.Tensor) -> torch.Tensor:
        """Keys and values ``[B, N, 2d]`` this block's attention derives from ``tokens``.

        Per token (LayerNorm and the projection act on each token alone), so the projections
        of memory and of new tokens can be computed apart and concatenated.
        """
        if self.kind != "post_ln":
            tokens = self.norm_attn(tokens)
        return self.attention.key_value(tokens)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        layout: AttentionLayout,
        context_kv: torch.Tensor | None = None,
        query_index: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``x [B, T, d]``, ``memory [B, M, d]`` (what entered this block) -> ``[B, T, d]``.

        ``context_kv``: :meth:`project_kv` of ``[memory ; x]``, when the caller has it.
        ``query_index``: compute the outputs at these positions of ``x`` only (``[B, T', d]``);
        every token still serves as key and value. ``layout`` must already be restricted to them.
        """
        queries = x if query_index is None else x[:, query_index]
        if self.kind == "post_ln":
            context = None if context_kv is not None else torch.cat([memory, x], dim=1)
            attended = self.attention(queries, context, layout, context_kv)
            h = self.norm_attn(queries + self.drop(attended))
            return self.norm_mlp(h + self.drop(self.mlp(h)))
        if context_kv is None:
            normed = self.norm_attn(torch.cat([memory, x], dim=1))  # LN on [mem ; x], per token
            normed_queries = normed[:, memory.shape[1] :]
            if query_index is not None:
                normed_queries = normed_queries[:, query_index]
            attended = self.drop(self.attention(normed_queries, normed, layout))
        else:  # keys/values known: only the queries need normalising
            attended = self.drop(self.attention(self.norm_attn(queries), None, layout, context_kv))
        return self._combine(queries, attended)

    def _combine(self, queries: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        """The block's output from its queries and their attention (pre-LN variants)."""
        if self.kind == "trxl_i":
            h = queries + attended
            return h + self.drop(self.mlp(self.norm_mlp(h)))
        h = self.gate_attn(queries, torch.relu(attended))
        return self.gate_mlp(h, torch.relu(self.drop(self.mlp(self.norm_mlp(h)))))

    def memory_keys_values(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values ``[B, H, M, h]`` of memory states ``[B, M, d]`` (by heads, as
        :meth:`step_cached` reads them)."""
        keys, values = self.project_kv(memory).split(memory.shape[-1], dim=-1)
        return self.attention._heads(keys), self.attention._heads(values)

    def step_cached(
        self, x: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, layout: AttentionLayout
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One token per row ``x [B, 1, d]`` against the memory's keys and values ``[B, H, M,
        h]`` (:meth:`memory_keys_values`); returns the output ``[B, 1, d]`` and the token's
        key and value ``[B, H, 1, h]``. What :meth:`forward` computes for that token."""
        normed = x if self.kind == "post_ln" else self.norm_attn(x)
        kv = self.attention.key_value(normed)
        attended, key, value = self.attention.step_cached(normed, keys, values, kv, layout)
        if self.kind == "post_ln":
            h = self.norm_attn(x + self.drop(attended))
            return self.norm_mlp(h + self.drop(self.mlp(h))), key, value
        return self._combine(x, self.drop(attended)), key, value
