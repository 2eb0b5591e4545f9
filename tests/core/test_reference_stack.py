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
