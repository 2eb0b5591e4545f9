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

    def forward(
        self, x: torch.Tensor, memory: torch.Tensor, layout: AttentionLayout
    ) -> torch.Tensor:
        """``x [B, T, d]``, ``memory [B, M, d]`` (what entered this block) -> ``[B, T, d]``."""
        if self.kind == "post_ln":
            context = torch.cat([memory, x], dim=1)
            h = self.norm_attn(x + self.drop(self.attention(x, context, layout)))
            return self.norm_mlp(h + self.drop(self.mlp(h)))
        normed = self.norm_attn(torch.cat([memory, x], dim=1))  # LN on [mem ; x], per token
        attended = self.drop(self.attention(normed[:, memory.shape[1] :], normed, layout))
        if self.kind == "trxl_i":
            h = x + attended
            return h + self.drop(self.mlp(self.norm_mlp(h)))
        h = self.gate_attn(x, torch.relu(attended))
        return self.gate_mlp(h, torch.relu(self.drop(self.mlp(self.norm_mlp(h)))))
