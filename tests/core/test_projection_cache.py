"""The inference cache of memory keys/values must never change an output.

``MemoryCore`` remembers the key/value projections of the last memory it produced under
``torch.no_grad`` in eval mode, so the next ``step()`` projects one token instead of M. Each test
compares cached steps with the same computation done without the cache (autograd enabled turns
it off), after the events that must invalidate it.
"""

from __future__ import annotations

import pytest
import torch

from rlformer.core import CoreConfig, MemoryCore
from tests.core.reference import tolerance


def _core(device: torch.device, block: str = "gtrxl", positional: str = "relative") -> MemoryCore:
    torch.manual_seed(0)
    cfg = CoreConfig(
        n_layers=2,
        d_model=16,
        n_heads=2,
        d_ff=32,
        memory_length=5,
        block=block,
        positional=positional,
        precision="fp32",
    )
    return MemoryCore(cfg).to(device).eval()


def _uncached_step(core: MemoryCore, x: torch.Tensor, memory, starts=None):  # noqa: ANN001, ANN202
    with torch.enable_grad():
        assert not core._projection_cache_enabled()  # autograd on: the cache is bypassed
        out = core.step(x, memory, starts)
    return out.output.detach()


def _chain(core: MemoryCore, x: torch.Tensor, steps: int):  # noqa: ANN202
    memory = None
    with torch.no_grad():
        for t in range(steps):
            memory = core.step(x[:, t], memory).memory
    return memory


def _assert_step_matches_uncached(core: MemoryCore, token: torch.Tensor, memory) -> None:  # noqa: ANN001
    with torch.no_grad():
        stepped = core.step(token, memory).output
    expected = _uncached_step(core, token, memory)
    torch.testing.assert_close(stepped, expected, atol=tolerance(token.device), rtol=0)


@pytest.mark.parametrize("block", ["gtrxl", "post_ln"])
@pytest.mark.parametrize("positional", ["relative", "rotary"])
def test_cache_is_used_and_exact(block: str, positional: str, device: torch.device) -> None:
    core = _core(device, block, positional)
    x = torch.randn(3, 9, 16, device=device)
    memory = _chain(core, x, 8)
    assert core._cached_projections(memory) is not None  # the next step hits the cache
    _assert_step_matches_uncached(core, x[:, 8], memory)


OPTIMIZERS = {
    "sgd": lambda params: torch.optim.SGD(params, lr=0.5),
    # Fused kernels update parameters without bumping their version counters.
    "fused_adamw": lambda params: torch.optim.AdamW(params, lr=0.05, fused=True),
}


@pytest.mark.parametrize("optimizer_name", sorted(OPTIMIZERS))
def test_weight_update_invalidates(optimizer_name: str, device: torch.device) -> None:
    core = _core(device)
    x = torch.randn(3, 9, 16, device=device)
    memory = _chain(core, x, 8)
    optimizer = OPTIMIZERS[optimizer_name](core.parameters())
    core.train()
    core(x).output.square().mean().backward()
    optimizer.step()
    core.eval()  # the memory survives the update, as in a loop that trains between episodes
    assert core._cached_projections(memory) is None
    _assert_step_matches_uncached(core, x[:, 8], memory)


def test_data_edit_of_a_weight_invalidates(device: torch.device) -> None:
    core = _core(device)
    x = torch.randn(3, 9, 16, device=device)
    memory = _chain(core, x, 8)
    core.blocks[1].attention.key_value.weight.data.mul_(2.0)  # no version bump through .data
    assert core._cached_projections(memory) is None
    _assert_step_matches_uncached(core, x[:, 8], memory)


def test_loading_weights_invalidates(device: torch.device) -> None:
    core = _core(device)
    x = torch.randn(3, 9, 16, device=device)
    memory = _chain(core, x, 8)
    other = {k: v + 0.1 for k, v in core.state_dict().items()}
    core.load_state_dict(other)
    assert core._cached_projections(memory) is None


def test_in_place_memory_edit_invalidates(device: torch.device) -> None:
    core = _core(device)
    x = torch.randn(3, 9, 16, device=device)
    memory = _chain(core, x, 8)
    memory.hidden[:, 1] += 1.0
    assert core._cached_projections(memory) is None
    with torch.no_grad():
        edited = core.step(x[:, 8], memory).output
    torch.testing.assert_close(
        edited, _uncached_step(core, x[:, 8], memory), atol=tolerance(device), rtol=0
    )


def test_two_streams_keep_their_own_projections_across_episode_starts(
    device: torch.device,
) -> None:
    core = _core(device)
    x = torch.randn(3, 12, 16, device=device)
    first = _chain(core, x, 8)
    second = _chain(core, x.flip(1), 8)
    starts = torch.tensor([True, False, True], device=device)
    for t in range(8, 12):  # the two streams alternate, as two evaluations sharing one core
        for memory_name, memory in (("first", first), ("second", second)):
            assert core._cached_projections(memory) is not None
            with torch.no_grad():
                out = core.step(x[:, t], memory, starts if t == 9 else None)
            expected = _uncached_step(core, x[:, t], memory, starts if t == 9 else None)
            torch.testing.assert_close(out.output, expected, atol=tolerance(device), rtol=0)
            if memory_name == "first":
                first = out.memory
            else:
                second = out.memory


def test_no_cache_under_inference_mode_or_training() -> None:
    core = _core(torch.device("cpu"))
    x = torch.randn(2, 4, 16)
    with torch.inference_mode():
        core.step(x[:, 0], None)
    assert core._projections == []
    core.train()
    with torch.no_grad():
        core.step(x[:, 0], None)
    assert core._projections == []
