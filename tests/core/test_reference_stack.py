"""The whole stack (masks, positions, blocks, gates, norms, new memory) against the slow reference.

Inputs exercise everything at once: carried memory with invalid slots, episode restarts at
different times per row (one at t = 0), right and left padding, and T > M so the window bites.
"""

from __future__ import annotations

import pytest
import torch

from rlformer.core import CoreConfig, Memory, MemoryCore
from tests.core.reference import reference_core, tolerance

VARIANTS = [
    (scheme, block, "gru")
    for scheme in ("relative", "rotary", "learned", "none")
    for block in ("gtrxl", "trxl_i", "post_ln")
] + [("relative", "gtrxl", gate) for gate in ("input", "output", "highway", "sigmoid_tanh")]


def _core(device: torch.device, scheme: str, block: str, gate: str) -> MemoryCore:
    torch.manual_seed(0)
    cfg = CoreConfig(
        n_layers=2,
        d_model=8,
        n_heads=2,
        d_ff=16,
        memory_length=3,
        positional=scheme,
        block=block,
        gate=gate,
        precision="fp32",
    )
    core = MemoryCore(cfg).eval()
    with torch.no_grad():
        for name, param in core.named_parameters():
            # Default inits (zeros/ones, tiny biases) would hide a dropped or misplaced term.
            if name.endswith(("bias", "weight")) and "norm" in name:
                param.copy_(
                    1.0 + 0.3 * torch.randn_like(param)
                    if "weight" in name
                    else 0.3 * torch.randn_like(param)
                )
            elif any(key in name for key in ("distance_bias", "content_bias", "position_bias")):
                param.normal_()
            elif "gate_bias" in name:
                param.add_(0.5 * torch.randn_like(param))
    return core.to(device)


@pytest.mark.parametrize(("scheme", "block", "gate"), VARIANTS)
def test_core_matches_reference(scheme: str, block: str, gate: str, device: torch.device) -> None:
    core = _core(device, scheme, block, gate)
    batch, seg_len, mem_len, width = 3, 6, 3, 8
    x = torch.randn(batch, seg_len, width, device=device)
    hidden = torch.randn(2, batch, mem_len, width, device=device)
    valid = torch.tensor([[True] * 3, [False, True, True], [True] * 3], device=device)
    starts = torch.zeros(batch, seg_len, dtype=torch.bool, device=device)
    starts[0, 4] = starts[1, 0] = starts[1, 3] = True
    padded = torch.zeros(batch, seg_len, dtype=torch.bool, device=device)
    padded[0, 5] = True  # right padding
    padded[2, :2] = True  # left padding after valid memory
    with torch.no_grad():
        out = core(x, Memory(hidden, valid), starts, padded)
    atol = tolerance(device)
    for b in range(batch):
        ref = reference_core(core, x[b], hidden[:, b], valid[b], starts[b], padded[b])
        torch.testing.assert_close(out.output[b].cpu(), ref.output.float(), atol=atol, rtol=0)
        assert torch.equal(out.memory.valid[b].cpu(), ref.new_valid), f"row {b}"
        for layer in range(2):
            # New memory of layer l = last M of [memory ; what entered layer l], at valid slots.
            expected = ref.layer_inputs[layer][-mem_len:][ref.new_valid].float()
            got = out.memory.hidden[layer, b].cpu()[ref.new_valid]
            torch.testing.assert_close(got, expected, atol=atol, rtol=0)


def _sdpa_math(
    scaled_q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, dropout: float
) -> torch.Tensor:
    """What the explicit training path replaced: SDPA with the float mask."""
    return torch.nn.functional.scaled_dot_product_attention(
        scaled_q, k, v, attn_mask=bias, dropout_p=dropout, scale=1.0
    )


@pytest.mark.parametrize("scheme", ["relative", "learned"])
def test_training_path_matches_reference_and_sdpa_gradients(
    scheme: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With gradients on, a float mask takes the explicit scores on the CPU: its outputs must
    be the reference's and its gradients those SDPA gives for the same mask."""
    core = _core(torch.device("cpu"), scheme, "gtrxl", "gru")
    batch, seg_len, mem_len, width = 3, 6, 3, 8
    x = torch.randn(batch, seg_len, width)
    hidden = torch.randn(2, batch, mem_len, width)
    valid = torch.tensor([[True] * 3, [False, True, True], [True] * 3])
    starts = torch.zeros(batch, seg_len, dtype=torch.bool)
    starts[0, 4] = starts[1, 0] = True

    def gradients() -> tuple[torch.Tensor, list[torch.Tensor]]:
        core.zero_grad(set_to_none=True)
        out = core(x, Memory(hidden, valid), starts).output
        (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        return out.detach(), [p.grad.clone() for p in core.parameters() if p.grad is not None]

    out, explicit_grads = gradients()
    for b in range(batch):
        ref = reference_core(
            core, x[b], hidden[:, b], valid[b], starts[b], torch.zeros(seg_len, dtype=torch.bool)
        )
        torch.testing.assert_close(
            out[b], ref.output.float(), atol=tolerance(torch.device("cpu")), rtol=0
        )
    monkeypatch.setattr("rlformer.core.attention._explicit_attention", _sdpa_math)
    _, sdpa_grads = gradients()
    assert len(explicit_grads) == len(sdpa_grads) > 0
    for got, expected in zip(explicit_grads, sdpa_grads, strict=True):
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
