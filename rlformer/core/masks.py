"""Who may attend to whom: causal sliding window, episode boundaries, padding.

Keys are ``[memory (M slots) ; segment (T tokens)]``; query i sits at key index ``M + i``.
Query i may see key j iff

* ``0 <= (M + i) - j <= M``   — causal, and at most M tokens back (the sliding window that makes
  whole-sequence, segment-by-segment and one-step processing agree exactly);
* key j is valid — a memory slot of the current episode, or an unpadded segment token;
* key j is in query i's episode — an ``episode_start`` at or before i (in the same row) hides
  everything before it, memory included. Rows restart independently.

Picture for M = 2, T = 4, an episode start at t = 2 (``x`` = visible, ``.`` = hidden)::

              mem0 mem1  t0  t1  t2  t3
    query t0    x    x    x   .   .   .
    query t1    .    x    x   x   .   .
    query t2    .    .    .   .   x   .      <- new episode: t0, t1 and memory are gone
    query t3    .    .    .   .   x   x

A padded query sees only itself, so softmax never meets an all-masked row; its output is
discarded by the stack.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class AttentionLayout(NamedTuple):
    """Masks shared by all layers of one forward call."""

    visible: torch.Tensor  # [B, T, M + T] bool
    distance: torch.Tensor  # [T, M + T] long, (M + i) - j clamped to [0, M]
    new_valid: torch.Tensor  # [B, M] validity of the memory after this segment
    padded: torch.Tensor  # [B, T] bool
    query_positions: torch.Tensor  # [T] long, each query's index among the keys (S + i)
    # True while the queries are the last T keys in order (every layout but a selection's),
    # which lets attention shift position scores into place instead of gathering them.
    queries_are_last: bool = True

    def select_queries(self, index: torch.Tensor) -> AttentionLayout:
        """The layout for the queries at segment positions ``index`` only (same keys)."""
        return AttentionLayout(
            self.visible[:, index],
            self.distance[index],
            self.new_valid,
            self.padded[:, index],
            self.query_positions[index],
            queries_are_last=False,
        )


def episode_ids(episode_start: torch.Tensor) -> torch.Tensor:
    """Per-row episode counter ``[B, T]``: 0 until the first start in the segment, then 1, 2, ..."""
    return episode_start.long().cumsum(dim=1)


def build_layout(
    memory_valid: torch.Tensor,
    episode_start: torch.Tensor | None,
    padding_mask: torch.Tensor | None,
    seg_len: int,
    window: int | None = None,
) -> AttentionLayout:
    """Visibility ``[B, T, S+T]`` and the validity of the memory that follows this segment.

    ``memory_valid [B, S]`` describes the memory slots actually passed in; ``window`` is M, how
    far back a query may look (default S). With no memory (S = 0) the keys are the segment
    alone, which halves attention work for memoryless calls without changing any output.
    """
    batch, mem_len = memory_valid.shape
    window = mem_len if window is None else window
    device = memory_valid.device
    if episode_start is None:
        episode_start = torch.zeros(batch, seg_len, dtype=torch.bool, device=device)
    if padding_mask is None:
        padding_mask = torch.zeros(batch, seg_len, dtype=torch.bool, device=device)
    episode_start = episode_start.to(device=device, dtype=torch.bool)
    padded = padding_mask.to(device=device, dtype=torch.bool)
    if seg_len == 1:
        return _single_token_layout(memory_valid, episode_start[:, 0], padded, window)
    return _segment_layout(memory_valid, episode_start, padded, window)


def _segment_layout(
    memory_valid: torch.Tensor, episode_start: torch.Tensor, padded: torch.Tensor, window: int
) -> AttentionLayout:
    """The general rule for T tokens (see the module docstring)."""
    (batch, mem_len), seg_len = memory_valid.shape, episode_start.shape[1]
    device = memory_valid.device
    query_pos = torch.arange(seg_len, device=device)[:, None] + mem_len  # [T, 1]
    key_pos = torch.arange(mem_len + seg_len, device=device)[None, :]  # [1, S]
    raw_distance = query_pos - key_pos  # [T, S]
    in_window = (raw_distance >= 0) & (raw_distance <= window)

    seg_episode = episode_ids(episode_start)  # [B, T]
    mem_episode = torch.zeros(batch, mem_len, dtype=torch.long, device=device)
    key_episode = torch.cat([mem_episode, seg_episode], dim=1)  # [B, S]
    key_valid = torch.cat([memory_valid, ~padded], dim=1)  # [B, S]

    visible = (
        in_window[None]
        & key_valid[:, None, :]
        & (key_episode[:, None, :] == seg_episode[:, :, None])
    )  # [B, T, S]
    # A padded query sees itself only (keeps softmax finite; its output is discarded). A select
    # by logic ops: onnxruntime has no boolean Where, and exported graphs run this too.
    self_key = torch.eye(seg_len, dtype=torch.bool, device=device)
    self_key = torch.cat(
        [torch.zeros(seg_len, mem_len, dtype=torch.bool, device=device), self_key], 1
    )
    pad = padded[:, :, None]
    visible = (pad & self_key[None]) | (~pad & visible)

    # Memory after the segment: the last M of [memory ; segment], valid if it belongs to the
    # episode of the segment's last position and is not padding.
    last_episode = seg_episode[:, -1:]  # [B, 1]
    combined_valid = key_valid & (key_episode == last_episode)
    new_valid = _last_slots(combined_valid, window)
    return AttentionLayout(
        visible, raw_distance.clamp(0, window), new_valid, padded, query_pos[:, 0]
    )


def _single_token_layout(
    memory_valid: torch.Tensor, episode_start: torch.Tensor, padded: torch.Tensor, window: int
) -> AttentionLayout:
    """The same rule for one token per row (``step()``), in a handful of operations.

    The token sees the memory slots that are valid, inside the window and of its episode (none
    if it starts one), and itself. A padded token sees only itself and adds no memory.
    """
    mem_len = memory_valid.shape[1]
    distance = torch.arange(mem_len, -1, -1, device=memory_valid.device)  # key j -> S - j
    same_episode = memory_valid & ~episode_start[:, None] & (distance[:-1] <= window)
    visible_memory = same_episode & ~padded  # padded [B, 1] broadcasts over slots
    visible = torch.cat([visible_memory, torch.ones_like(padded)], dim=1)[:, None]  # [B, 1, S+1]
    new_valid = _last_slots(torch.cat([same_episode, ~padded], dim=1), window)
    return AttentionLayout(
        visible, distance.clamp(max=window)[None], new_valid, padded, distance[:1]
    )


def _last_slots(valid: torch.Tensor, window: int) -> torch.Tensor:
    """The last ``window`` entries of ``valid [B, S]``, left-filled with False if S < window."""
    if valid.shape[1] >= window:
        return valid[:, valid.shape[1] - window :]
    fill = torch.zeros(
        valid.shape[0], window - valid.shape[1], dtype=torch.bool, device=valid.device
    )
    return torch.cat([fill, valid], dim=1)
