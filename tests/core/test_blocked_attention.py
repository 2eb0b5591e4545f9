"""A long segment's attention in blocks of queries gives the dense computation's outputs, next
memory and gradients, for every positional scheme and block variant, with memory, episode
starts inside the segment, padding and the episode clock."""

from __future__ import annotations

import itertools

import pytest
import torch

from rlformer.core import CoreConfig, Memory, MemoryCore
from rlformer.core import stack as stack_module

SCHEMES = ["relative", "rotary", "learned", "none"]
BLOCKS = ["gtrxl", "trxl_i", "post_ln"]
MEMORY = 4


def _core(**kw: object) -> MemoryCore:
    torch.manual_seed(0)
    cfg = CoreConfig(
        n_layers=2, d_model=16, n_heads=2, d_ff=32, memory_length=MEMORY, precision="fp32", **kw
    )
    core = MemoryCore(cfg)
    for name, param in core.named_parameters():
        if "distance_bias" in name:
            torch.nn.init.normal_(param)
    return core


def _inputs(length: int) -> tuple[torch.Tensor, Memory, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(3, length, 16, generator=generator)
    memory = Memory(
        torch.randn(2, 3, MEMORY, 16, generator=generator),
        torch.tensor([[True] * MEMORY, [False, False, True, True], [False] * MEMORY]),
    )
    starts = torch.zeros(3, length, dtype=torch.bool)
    starts[0, 7] = starts[1, 2] = starts[1, 13] = True  # inside blocks and on a block's edge
    padded = torch.zeros(3, length, dtype=torch.bool)
    padded[2, length - 5 :] = True
    return x, memory, starts, padded


def _forward_and_grads(
    core: MemoryCore, x: torch.Tensor, memory: Memory | None, starts: torch.Tensor,
    padded: torch.Tensor,
) -> tuple[torch.Tensor, Memory, torch.Tensor, dict[str, torch.Tensor]]:  # fmt: skip
    core.zero_grad()
    x = x.clone().requires_grad_(True)
    out = core(x, memory, starts, padded)
    weights = torch.linspace(-1.0, 1.0, out.output.numel()).view_as(out.output)
    (out.output * weights).sum().backward()
    assert x.grad is not None
    grads = {n: p.grad.clone() for n, p in core.named_parameters() if p.grad is not None}
    return out.output.detach(), out.memory, x.grad, grads


def _dense_and_blocked(
    monkeypatch: pytest.MonkeyPatch, core: MemoryCore, *inputs: object
) -> tuple[tuple, tuple, int]:
    calls = []
    blocked = MemoryCore._blocked

    def counting(self: MemoryCore, *args: object) -> torch.Tensor:
        calls.append(1)
        return blocked(self, *args)

    monkeypatch.setattr(MemoryCore, "_blocked", counting)
    monkeypatch.setattr(MemoryCore, "block_length", property(lambda self: 10**6))
    dense = _forward_and_grads(core, *inputs)
    assert not calls
    monkeypatch.setattr(stack_module, "_MIN_BLOCK", 1)
    monkeypatch.setattr(MemoryCore, "block_length", property(lambda self: MEMORY))
    return dense, _forward_and_grads(core, *inputs), len(calls)


def _assert_same(dense: tuple, blocked: tuple) -> None:
    torch.testing.assert_close(blocked[0], dense[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(blocked[1].hidden, dense[1].hidden, atol=1e-5, rtol=1e-5)
    assert torch.equal(blocked[1].valid, dense[1].valid)
    torch.testing.assert_close(blocked[2], dense[2], atol=1e-5, rtol=1e-5)
    assert blocked[3].keys() == dense[3].keys() and dense[3]
    for name, grad in dense[3].items():
        torch.testing.assert_close(blocked[3][name], grad, atol=1e-5, rtol=1e-5, msg=name)


@pytest.mark.parametrize(("scheme", "block"), list(itertools.product(SCHEMES, BLOCKS)))
def test_blocked_segment_equals_dense(
    scheme: str, block: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    core = _core(positional=scheme, block=block).train()
    dense, blocked, calls = _dense_and_blocked(monkeypatch, core, *_inputs(19))
    assert calls == 2  # both layers, in 5 blocks of 4, 4, 4, 4 and 3 queries
    _assert_same(dense, blocked)


def test_blocked_segment_without_memory_and_with_the_episode_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    core = _core(episode_clock=True).train()
    x, _, starts, padded = _inputs(17)
    dense, blocked, calls = _dense_and_blocked(monkeypatch, core, x, None, starts, padded)
    assert calls == 2
    _assert_same(dense, blocked)


def test_short_segments_and_steps_stay_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks start above twice the block length: a segment of the default rollout shape
    (128 steps, M = 64) and every single step take the dense path."""
    calls = []
    monkeypatch.setattr(MemoryCore, "_blocked", lambda self, *a: calls.append(1))
    torch.manual_seed(0)
    core = MemoryCore(CoreConfig(n_layers=1, d_model=16, n_heads=2, d_ff=32, memory_length=64))
    assert core.block_length == 64
    memory = core(torch.randn(2, 128, 16)).memory
    core.step(torch.randn(2, 16), memory)
    assert not calls
    with pytest.raises(TypeError):  # the stub returns None: the long segment reached it
        core(torch.randn(2, 129, 16))
    assert calls == [1]


def test_a_long_segment_in_blocks_equals_stepping_token_by_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The shipped block length: 200 steps at M = 64 take three blocks of 64 and one of 8
    (inference, so from the projections the core caches), and give what stepping one token at
    a time gives, episode starts and the carried memory included."""
    calls = []
    blocked = MemoryCore._blocked

    def counting(self: MemoryCore, *args: object) -> torch.Tensor:
        calls.append(args[-1] is not None)  # the cached keys and values were passed on
        return blocked(self, *args)

    monkeypatch.setattr(MemoryCore, "_blocked", counting)
    torch.manual_seed(0)
    core = MemoryCore(CoreConfig(n_layers=2, d_model=16, n_heads=2, d_ff=32, memory_length=64))
    core.eval()
    x = torch.randn(2, 200, 16)
    starts = torch.zeros(2, 200, dtype=torch.bool)
    starts[0, 90] = True
    with torch.no_grad():
        memory = core(torch.randn(2, 70, 16)).memory
        whole = core(x, memory, starts)
        step_memory, outputs = memory, []
        for t in range(200):
            out = core.step(x[:, t], step_memory, starts[:, t])
            step_memory, _ = out.memory, outputs.append(out.output)
    assert calls == [True, True]
    torch.testing.assert_close(torch.stack(outputs, 1), whole.output, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(step_memory.hidden, whole.memory.hidden, atol=1e-5, rtol=1e-5)
    assert torch.equal(step_memory.valid, whole.memory.valid)
