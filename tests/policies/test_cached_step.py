"""The exported GTrXL step reads the memory's keys and values from its state
(:meth:`MemoryCore.step_cached`) instead of projecting all M slots: the same outputs and
memory as :meth:`MemoryCore.step`, for every block kind and positional scheme, across
episode starts and a full memory, and the exported graph still equals the eager step."""

from __future__ import annotations

import itertools

import pytest
import torch

from rlformer.core import CoreConfig, MemoryCore

CASES = list(
    itertools.product(["gtrxl", "trxl_i", "post_ln"], ["relative", "learned", "rotary", "none"])
)


@pytest.mark.parametrize(("block", "positional"), CASES)
@pytest.mark.parametrize("clock", [False, True])
def test_step_cached_equals_step(block: str, positional: str, clock: bool) -> None:
    torch.manual_seed(0)
    cfg = CoreConfig(
        n_layers=2,
        d_model=16,
        n_heads=2,
        d_ff=32,
        memory_length=5,
        block=block,
        positional=positional,
        episode_clock=clock,
    )
    core = MemoryCore(cfg).eval()
    core.projection_cache = False  # the plain computation is the reference
    batch = 3
    memory = core.initial_memory(batch)
    hidden = list(memory.hidden)
    keys, values = core.project_memory(memory)
    valid = memory.valid
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for t in range(14):  # fills the memory twice over, with restarts
            x = torch.randn(batch, 16, generator=generator)
            start = (
                torch.rand(batch, generator=generator) < 0.15
                if t
                else torch.ones(batch, dtype=torch.bool)
            )
            expected = core.step(x, memory, start)
            out, hidden, valid, keys, values = core.step_cached(
                x, hidden, valid, keys, values, start
            )
            torch.testing.assert_close(out, expected.output, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(torch.stack(hidden), expected.memory.hidden)
            assert torch.equal(valid, expected.memory.valid)
            memory = expected.memory
            # the carried keys and values are those of the memory, wherever a slot is valid
            fresh_keys, fresh_values = core.project_memory(memory)
            for ours, theirs in zip([*keys, *values], [*fresh_keys, *fresh_values], strict=True):
                slots = valid[:, None, :, None].expand_as(ours)
                torch.testing.assert_close(ours[slots], theirs[slots], rtol=1e-5, atol=1e-5)
