"""Slow reference attention written straight from each scheme's formula (loops over i and j)."""

from __future__ import annotations

import math

import torch

from rlformer.core.attention import MemoryAttention
from rlformer.core.positional import sinusoid_table


def reference_attention(
    module: MemoryAttention, x: torch.Tensor, context: torch.Tensor, visible: torch.Tensor
) -> torch.Tensor:
    """``module``'s output for one row: ``x [T, d]``, ``context [S, d]``, ``visible [T, S]``."""
    seg_len, width = x.shape
    ctx_len = context.shape[0]
    mem_len = ctx_len - seg_len
    heads, dh = module.n_heads, module.d_head
    wq = module.query.weight
    wk, wv = module.key_value.weight[:width], module.key_value.weight[width:]
    out = torch.zeros(seg_len, width, dtype=torch.float64)
    for h in range(heads):
        rows = slice(h * dh, (h + 1) * dh)
        for i in range(seg_len):
            q = (wq[rows] @ x[i]).double()
            scores = torch.full((ctx_len,), float("-inf"), dtype=torch.float64)
            for j in range(ctx_len):
                if not visible[i, j]:
                    continue
                k = (wk[rows] @ context[j]).double()
                distance = mem_len + i - j
                if module.scheme == "relative":
                    u = module.content_bias[h].double()
                    v = module.position_bias[h].double()
                    r = sinusoid_table(distance + 1, width)[distance].double()
                    rk = module.position_key.weight[rows].double() @ r
                    # content-content, content-position, global content, global position
                    score = q @ k + q @ rk + u @ k + v @ rk
                    scores[j] = score / math.sqrt(dh)
                elif module.scheme == "rotary":
                    qi, kj = _rotate(q, mem_len + i), _rotate(k, j)
                    scores[j] = (qi @ kj) / math.sqrt(dh)
                elif module.scheme == "learned":
                    scores[j] = (q @ k) / math.sqrt(dh) + module.distance_bias[h, distance].double()
                else:
                    scores[j] = (q @ k) / math.sqrt(dh)
            weights = torch.softmax(scores, dim=0)
            value = torch.zeros(dh, dtype=torch.float64)
            for j in range(ctx_len):
                if weights[j] > 0:
                    value += weights[j] * (wv[rows] @ context[j]).double()
            out[i, rows] = value
    return (out @ module.out.weight.double().T + module.out.bias.double()).float()


def _rotate(vec: torch.Tensor, position: int) -> torch.Tensor:
    """Rotate pairs (k, k + h/2) of ``vec`` by angle position * 10000^(-2k/h)."""
    half = vec.shape[0] // 2
    out = vec.clone()
    for k in range(half):
        angle = position * 10000.0 ** (-2.0 * k / vec.shape[0])
        a, b = vec[k].item(), vec[k + half].item()
        out[k] = a * math.cos(angle) - b * math.sin(angle)
        out[k + half] = a * math.sin(angle) + b * math.cos(angle)
    return out


def tolerance(device: torch.device) -> float:
    """Comparison tolerance: fp32 on CPU; CUDA kernels reorder sums."""
    return 1e-5 if device.type == "cpu" else 2e-4
