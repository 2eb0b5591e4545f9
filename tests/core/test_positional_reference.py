"""Every positional scheme against the slow from-the-formula reference, on random inputs."""

from __future__ import annotations

import pytest
import torch

from rlformer.core import CoreConfig
from rlformer.core.attention import MemoryAttention
from rlformer.core.masks import build_layout
from tests.core.reference import reference_attention, tolerance


@pytest.mark.parametrize("scheme", ["relative", "rotary", "learned", "none"])
def test_attention_matches_formula(scheme: str, device: torch.device) -> None:
    torch.manual_seed(1)
    cfg = CoreConfig(d_model=12, n_heads=3, memory_length=4, positional=scheme)
    module = MemoryAttention(cfg).to(device).eval()
    if scheme == "learned":
        torch.nn.init.normal_(module.distance_bias)  # zeros at init would hide a wrong index
    batch, seg_len = 2, 5
    x = torch.randn(batch, seg_len, 12, device=device)
    memory = torch.randn(batch, 4, 12, device=device)
    mem_valid = torch.tensor([[False, True, True, True], [True, True, True, True]], device=device)
    starts = torch.zeros(batch, seg_len, dtype=torch.bool, device=device)
    starts[1, 3] = True
    layout = build_layout(mem_valid, starts, None, seg_len)
    context = torch.cat([memory, x], dim=1)
    with torch.no_grad():
        fast = module(x, context, layout)
    module_cpu = module.cpu()
    for b in range(batch):
        slow = reference_attention(
            module_cpu, x[b].cpu(), context[b].cpu(), layout.visible[b].cpu()
        )
        torch.testing.assert_close(fast[b].cpu(), slow, atol=tolerance(device), rtol=0)


def test_relative_scores_depend_on_distance_not_absolute_position() -> None:
    # Shifting a whole sequence by extra leading tokens in a *different* episode cannot change
    # any output: positions are relative and the earlier episode is masked.
    torch.manual_seed(2)
    from rlformer.core import MemoryCore

    core = MemoryCore(CoreConfig(d_model=8, n_heads=2, d_ff=16, memory_length=16)).eval()
    x = torch.randn(1, 6, 8)
    prefix = torch.randn(1, 3, 8)
    starts = torch.zeros(1, 9, dtype=torch.bool)
    starts[0, 3] = True
    with torch.no_grad():
        alone = core(x).output
        shifted = core(torch.cat([prefix, x], 1), episode_start=starts).output[:, 3:]
    torch.testing.assert_close(alone, shifted, atol=1e-5, rtol=0)
