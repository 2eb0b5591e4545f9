"""Slow references for the core, written straight from the formulas with explicit loops.

Nothing here calls the core's own maths (no ``sinusoid_table``, no ``build_layout``, no SDPA):
each function re-derives its result from the papers' equations and the masking rule stated in
``rlformer/core/masks.py``, in float64 on CPU, reading only the module's parameters. A test that
compares the core with these can therefore catch a wrong table, a wrong mask or a wrong gate,
not only a wrong kernel.

Visibility rule (per batch row; keys are ``[memory (M slots) ; segment (T tokens)]``, query i at
key index ``M + i``): query i sees key j iff i is not padded, ``0 <= M + i - j <= M``, key j is
valid (a valid memory slot, or an unpadded token), and no episode starts in ``(j, i]``
(for memory keys: no start at any position ``<= i`` of the segment). A padded query sees itself.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import nn

from rlformer.core.attention import MemoryAttention


class ReferenceResult(NamedTuple):
    """What :func:`reference_core` computes for one batch row."""

    output: torch.Tensor  # [T, d] float64; zeros at padded positions
    layer_inputs: list[torch.Tensor]  # per layer: [M + T, d] = [memory ; what entered the layer]
    new_valid: torch.Tensor  # [M] bool


def tolerance(device: torch.device) -> float:
    """Comparison tolerance: fp32 on CPU; CUDA kernels reorder sums (TF32 is switched off)."""
    return 1e-5 if device.type == "cpu" else 2e-4


def _p(tensor: torch.Tensor) -> torch.Tensor:
    """A parameter or input as a float64 CPU tensor without autograd history."""
    return tensor.detach().double().cpu()


def reference_sinusoid(distance: int, width: int) -> torch.Tensor:
    """Transformer-XL's r_d = ``[sin(d w_k)]_k ++ [cos(d w_k)]_k`` with ``w_k = 10000^(-2k/D)``."""
    half = (width + 1) // 2
    sines = [math.sin(distance * 10000.0 ** (-2.0 * k / width)) for k in range(half)]
    cosines = [math.cos(distance * 10000.0 ** (-2.0 * k / width)) for k in range(half)]
    return torch.tensor((sines + cosines)[:width], dtype=torch.float64)


def _rotate(vec: torch.Tensor, position: int) -> torch.Tensor:
    """RoFormer: rotate the pair (vec[k], vec[k + h/2]) by ``position * 10000^(-2k/h)``."""
    half = vec.shape[0] // 2
    out = vec.clone()
    for k in range(half):
        angle = position * 10000.0 ** (-2.0 * k / vec.shape[0])
        a, b = float(vec[k]), float(vec[k + half])
        out[k] = a * math.cos(angle) - b * math.sin(angle)
        out[k + half] = a * math.sin(angle) + b * math.cos(angle)
    return out


def reference_visible(
    memory_valid: torch.Tensor, episode_start: torch.Tensor, padded: torch.Tensor
) -> torch.Tensor:
    """The visibility rule for one row: ``memory_valid [M]``, ``episode_start/padded [T]``.

    Returns ``[T, M + T]`` bool.
    """
    mem_len, seg_len = memory_valid.shape[0], episode_start.shape[0]
    visible = torch.zeros(seg_len, mem_len + seg_len, dtype=torch.bool)
    for i in range(seg_len):
        if padded[i]:
            visible[i, mem_len + i] = True
            continue
        for j in range(mem_len + seg_len):
            if not 0 <= mem_len + i - j <= mem_len:
                continue
            if j < mem_len:
                valid = bool(memory_valid[j])
                cut = any(bool(episode_start[s]) for s in range(0, i + 1))
            else:
                valid = not bool(padded[j - mem_len])
                cut = any(bool(episode_start[s]) for s in range(j - mem_len + 1, i + 1))
            visible[i, j] = valid and not cut
    return visible


def reference_new_valid(
    memory_valid: torch.Tensor, episode_start: torch.Tensor, padded: torch.Tensor
) -> torch.Tensor:
    """Validity ``[M]`` of the last M entries of ``[memory ; segment]`` after one segment."""
    mem_len, seg_len = memory_valid.shape[0], episode_start.shape[0]
    combined = []
    for c in range(mem_len + seg_len):
        if c < mem_len:
            later_start = any(bool(s) for s in episode_start)
            combined.append(bool(memory_valid[c]) and not later_start)
        else:
            t = c - mem_len
            later_start = any(bool(episode_start[s]) for s in range(t + 1, seg_len))
            combined.append(not bool(padded[t]) and not later_start)
    return torch.tensor(combined[-mem_len:], dtype=torch.bool)


def reference_attention(
    module: MemoryAttention, x: torch.Tensor, context: torch.Tensor, visible: torch.Tensor
) -> torch.Tensor:
    """``module``'s output for one row: ``x [T, d]``, ``context [S, d]``, ``visible [T, S]``.

    Scores, per head and per (i, j), with distance ``d = (S - T) + i - j`` and ``D = d_head``:

    * relative (Dai et al. 2019, eq. 3):
      ``(q_i·k_j + q_i·W_r r_d + u·k_j + v·W_r r_d) / sqrt(D)``;
    * rotary: ``rot(q_i, S - T + i)·rot(k_j, j) / sqrt(D)``;
    * learned: ``q_i·k_j / sqrt(D) + b[h, d]``;
    * none: ``q_i·k_j / sqrt(D)``.
    """
    x, context = _p(x), _p(context)
    seg_len, width = x.shape
    ctx_len = context.shape[0]
    mem_len = ctx_len - seg_len
    heads, dh = module.n_heads, module.d_head
    wq = _p(module.query.weight)
    wk, wv = _p(module.key_value.weight[:width]), _p(module.key_value.weight[width:])
    out = torch.zeros(seg_len, width, dtype=torch.float64)
    for h in range(heads):
        rows = slice(h * dh, (h + 1) * dh)
        for i in range(seg_len):
            q = wq[rows] @ x[i]
            scores = torch.full((ctx_len,), float("-inf"), dtype=torch.float64)
            for j in range(ctx_len):
                if not visible[i, j]:
                    continue
                k = wk[rows] @ context[j]
                distance = mem_len + i - j
                if module.scheme == "relative":
                    u, v = _p(module.content_bias[h]), _p(module.position_bias[h])
                    rk = _p(module.position_key.weight[rows]) @ reference_sinusoid(distance, width)
                    # content-content, content-position, global content, global position
                    scores[j] = (q @ k + q @ rk + u @ k + v @ rk) / math.sqrt(dh)
                elif module.scheme == "rotary":
                    scores[j] = _rotate(q, mem_len + i) @ _rotate(k, j) / math.sqrt(dh)
                elif module.scheme == "learned":
                    bias = float(module.distance_bias.detach()[h, distance])
                    scores[j] = q @ k / math.sqrt(dh) + bias
                else:
                    scores[j] = q @ k / math.sqrt(dh)
            weights = torch.softmax(scores, dim=0)
            value = torch.zeros(dh, dtype=torch.float64)
            for j in range(ctx_len):
                if weights[j] > 0:
                    value += weights[j] * (wv[rows] @ context[j])
            out[i, rows] = value
    return out @ _p(module.out.weight).T + _p(module.out.bias)


def reference_layer_norm(norm: nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
    """``(x - mean) / sqrt(var + eps) * gamma + beta`` over the last dim (biased variance)."""
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + norm.eps) * _p(norm.weight) + _p(norm.bias)


def reference_gate(gate: nn.Module, kind: str, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The GTrXL gates of Parisotto et al. 2019 (section 3.2), x the skip stream, y the sub-layer.

    The weights are read from the module (stacked rows ``[W_r; W_z; W_g]`` for the GRU gate).
    """
    sig = torch.sigmoid
    if kind == "gru":
        w_r, w_z, w_g = _p(gate.w.weight).chunk(3, dim=0)
        u_r, u_z = _p(gate.u_rz.weight).chunk(2, dim=0)
        u_g, b_g = _p(gate.u_g.weight), _p(gate.gate_bias)
        r = sig(y @ w_r.T + x @ u_r.T)
        z = sig(y @ w_z.T + x @ u_z.T - b_g)
        candidate = torch.tanh(y @ w_g.T + (r * x) @ u_g.T)
        return (1 - z) * x + z * candidate
    if kind == "input":
        return sig(x @ _p(gate.w.weight).T + _p(gate.w.bias)) * x + y
    if kind == "output":
        return x + sig(x @ _p(gate.w.weight).T - _p(gate.gate_bias)) * y
    if kind == "highway":
        carry = sig(x @ _p(gate.w.weight).T + _p(gate.gate_bias))
        return carry * x + (1 - carry) * y
    if kind == "sigmoid_tanh":
        w, u, b = _p(gate.w.weight), _p(gate.u.weight), _p(gate.gate_bias)
        return x + sig(y @ w.T - b) * torch.tanh(y @ u.T)
    raise ValueError(f"unknown gate {kind!r}")


def _mlp(block: nn.Module, x: torch.Tensor) -> torch.Tensor:
    first, last = block.mlp[0], block.mlp[2]
    hidden = torch.relu(x @ _p(first.weight).T + _p(first.bias))
    return hidden @ _p(last.weight).T + _p(last.bias)


def reference_block(
    block: nn.Module,
    kind: str,
    gate: str,
    x: torch.Tensor,
    memory: torch.Tensor,
    visible: torch.Tensor,
) -> torch.Tensor:
    """One block for one row: ``x [T, d]``, ``memory [M, d]`` -> ``[T, d]`` (float64).

    * post_ln:  ``h = LN1(x + A(x, [m; x]));  out = LN2(h + MLP(h))``
    * trxl_i:   ``n = LN1([m; x]);  h = x + A(n_x, n);  out = h + MLP(LN2(h))``
    * gtrxl:    ``h = g1(x, ReLU(A(n_x, n)));  out = g2(h, ReLU(MLP(LN2(h))))``
    """
    mem_len = memory.shape[0]
    context = torch.cat([memory, x], dim=0)
    if kind == "post_ln":
        h = reference_layer_norm(
            block.norm_attn, x + reference_attention(block.attention, x, context, visible)
        )
        return reference_layer_norm(block.norm_mlp, h + _mlp(block, h))
    normed = reference_layer_norm(block.norm_attn, context)
    attended = reference_attention(block.attention, normed[mem_len:], normed, visible)
    if kind == "trxl_i":
        h = x + attended
        return h + _mlp(block, reference_layer_norm(block.norm_mlp, h))
    h = reference_gate(block.gate_attn, gate, x, torch.relu(attended))
    y = torch.relu(_mlp(block, reference_layer_norm(block.norm_mlp, h)))
    return reference_gate(block.gate_mlp, gate, h, y)


def reference_core(
    core: nn.Module,
    x: torch.Tensor,
    memory_hidden: torch.Tensor,
    memory_valid: torch.Tensor,
    episode_start: torch.Tensor,
    padded: torch.Tensor,
) -> ReferenceResult:
    """The whole stack for one row: ``x [T, d]``, ``memory_hidden [L, M, d]``, masks ``[M]/[T]``."""
    cfg = core.cfg
    x, memory_hidden = _p(x), _p(memory_hidden)
    visible = reference_visible(memory_valid.cpu(), episode_start.cpu(), padded.cpu())
    h = x
    layer_inputs = []
    for layer, block in enumerate(core.blocks):
        layer_inputs.append(torch.cat([memory_hidden[layer], h], dim=0))
        h = reference_block(block, cfg.block, cfg.gate, h, memory_hidden[layer], visible)
    if cfg.block != "post_ln":
        h = reference_layer_norm(core.final_norm, h)
    h = h.masked_fill(padded.cpu()[:, None], 0.0)
    new_valid = reference_new_valid(memory_valid.cpu(), episode_start.cpu(), padded.cpu())
    return ReferenceResult(h, layer_inputs, new_valid)
