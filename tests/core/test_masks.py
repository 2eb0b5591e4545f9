"""The attention layout (window, episodes, padding, next memory's validity) against the rule."""

from __future__ import annotations

import pytest
import torch

from rlformer.core.masks import build_layout
from tests.core.reference import reference_new_valid, reference_visible


@pytest.mark.parametrize(("batch", "seg_len", "mem_len"), [(4, 7, 3), (4, 1, 5), (3, 4, 9)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_layout_matches_rule(batch: int, seg_len: int, mem_len: int, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    memory_valid = torch.rand(batch, mem_len, generator=generator) < 0.7
    starts = torch.rand(batch, seg_len, generator=generator) < 0.25
    padded = torch.rand(batch, seg_len, generator=generator) < 0.2
    layout = build_layout(memory_valid, starts, padded, seg_len)
    for b in range(batch):
        expected = reference_visible(memory_valid[b], starts[b], padded[b])
        assert torch.equal(layout.visible[b], expected), f"row {b}"
        assert torch.equal(
            layout.new_valid[b], reference_new_valid(memory_valid[b], starts[b], padded[b])
        ), f"row {b}"
    # Relative distances of the visible pairs: query i sits at key index M + i.
    rows, cols = torch.nonzero(layout.visible.any(0), as_tuple=True)
    assert torch.equal(layout.distance[rows, cols], mem_len + rows - cols)


def test_picture_in_the_docstring() -> None:
    """M = 2, T = 4, full memory, an episode start at t = 2 (the ASCII picture in masks.py)."""
    starts = torch.tensor([[False, False, True, False]])
    layout = build_layout(torch.ones(1, 2, dtype=torch.bool), starts, None, 4)
    expected = torch.tensor(
        [
            [1, 1, 1, 0, 0, 0],
            [0, 1, 1, 1, 0, 0],
            [0, 0, 0, 0, 1, 0],
            [0, 0, 0, 0, 1, 1],
        ],
        dtype=torch.bool,
    )
    assert torch.equal(layout.visible[0], expected)
    assert layout.new_valid.tolist() == [[True, True]]  # t2, t3: the current episode


def test_every_query_sees_at_least_one_key() -> None:
    """SDPA returns NaN on an all-masked row; the layout must never produce one."""
    generator = torch.Generator().manual_seed(5)
    memory_valid = torch.rand(64, 4, generator=generator) < 0.5
    starts = torch.rand(64, 6, generator=generator) < 0.5
    padded = torch.rand(64, 6, generator=generator) < 0.5
    padded[0] = True  # a fully padded row
    layout = build_layout(memory_valid, starts, padded, 6)
    assert layout.visible.any(-1).all()


@pytest.mark.parametrize("mem_len", [0, 1, 7])
def test_single_token_layout_equals_the_general_rule(mem_len: int) -> None:
    """step()'s shortcut must give exactly the masks the general T-token rule gives for T = 1."""
    from rlformer.core.masks import _segment_layout, _single_token_layout

    generator = torch.Generator().manual_seed(mem_len)
    for window in {max(mem_len, 1), mem_len + 3}:
        for _ in range(20):
            valid = torch.rand(6, mem_len, generator=generator) < 0.7
            start = torch.rand(6, 1, generator=generator) < 0.3
            padded = torch.rand(6, 1, generator=generator) < 0.3
            fast = _single_token_layout(valid, start[:, 0], padded, window)
            general = _segment_layout(valid, start, padded, window)
            for a, b in zip(fast, general, strict=True):
                if isinstance(a, bool):  # queries_are_last
                    assert a == b
                    continue
                torch.testing.assert_close(a.expand_as(b), b)
