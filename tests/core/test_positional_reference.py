"""Every positional scheme against the slow from-the-formula reference, on random inputs."""

from __future__ import annotations

import pytest
import torch

from rlformer.core import CoreConfig, MemoryCore
from rlformer.core.attention import MemoryAttention
from rlformer.core.masks import build_layout
from rlformer.core.positional import sinusoid_table
from tests.core.reference import reference_attention, reference_sinusoid, tolerance

SCHEMES = ["relative", "rotary", "learned", "none"]


def _randomise_position_parameters(module: MemoryAttention) -> None:
    """Init values that would hide a wrong index or a dropped term (zeros, tiny biases)."""
    for name, param in module.named_parameters():
        if name in ("distance_bias", "content_bias", "position_bias"):
            torch.nn.init.normal_(param)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize(("seg_len", "mem_len"), [(5, 4), (1, 6), (7, 3)])
def test_attention_matches_formula(
    scheme: str, seg_len: int, mem_len: int, device: torch.device
) -> None:
    """Fast path (SDPA, shifted relative term, folded u) == per-(i, j) loop over the formula.

    Cases: T > M, a single query (the step() shape), and T > M with the window biting.
    """
    torch.manual_seed(1)
    cfg = CoreConfig(d_model=12, n_heads=3, memory_length=mem_len, positional=scheme)
    module = MemoryAttention(cfg).to(device).eval()
    _randomise_position_parameters(module)
    batch = 2
    x = torch.randn(batch, seg_len, 12, device=device)
    memory = torch.randn(batch, mem_len, 12, device=device)
    mem_valid = torch.ones(batch, mem_len, dtype=torch.bool, device=device)
    mem_valid[0, 0] = False
    starts = torch.zeros(batch, seg_len, dtype=torch.bool, device=device)
    starts[1, seg_len // 2] = seg_len > 1
    layout = build_layout(mem_valid, starts, None, seg_len)
    context = torch.cat([memory, x], dim=1)
    with torch.no_grad():
        fast = module(x, context, layout)
    for b in range(batch):
        slow = reference_attention(module, x[b], context[b], layout.visible[b].cpu())
        torch.testing.assert_close(fast[b].cpu(), slow.float(), atol=tolerance(device), rtol=0)


def test_sinusoid_table_matches_transformer_xl_formula() -> None:
    """r_d = [sin(d w_k)]_k ++ [cos(d w_k)]_k with w_k = 10000^(-2k/D), for d = 0..M."""
    table = sinusoid_table(9, 16)
    for distance in range(9):
        expected = reference_sinusoid(distance, 16).float()
        torch.testing.assert_close(table[distance], expected, atol=1e-6, rtol=0)


def test_relative_scores_depend_on_distance_not_absolute_position() -> None:
    """Extra leading tokens of a *different* episode change nothing: only distances matter."""
    torch.manual_seed(2)
    core = MemoryCore(CoreConfig(d_model=8, n_heads=2, d_ff=16, memory_length=16)).eval()
    x = torch.randn(1, 6, 8)
    prefix = torch.randn(1, 3, 8)
    starts = torch.zeros(1, 9, dtype=torch.bool)
    starts[0, 3] = True
    with torch.no_grad():
        alone = core(x).output
        shifted = core(torch.cat([prefix, x], 1), episode_start=starts).output[:, 3:]
    torch.testing.assert_close(alone, shifted, atol=1e-5, rtol=0)


@pytest.mark.parametrize("scheme", ["relative", "rotary", "learned"])
def test_position_information_is_used(scheme: str) -> None:
    """Order matters: swapping two earlier tokens changes the last output (unlike ``none``)."""
    torch.manual_seed(4)
    cfg = CoreConfig(n_layers=1, d_model=8, n_heads=2, d_ff=16, memory_length=8, positional=scheme)
    core = MemoryCore(cfg).eval()
    _randomise_position_parameters(core.blocks[0].attention)
    x = torch.randn(1, 4, 8)
    swapped = x[:, [1, 0, 2, 3]]
    with torch.no_grad():
        delta = (core(x).output[:, -1] - core(swapped).output[:, -1]).abs().max()
    assert delta > 1e-4
