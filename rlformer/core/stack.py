"""The memory-enabled attention core: a stack of :class:`MemoryBlock` s with segment memory.

Example:
    >>> cfg = CoreConfig(n_layers=2, d_model=16, n_heads=2, d_ff=32, memory_length=4)
    >>> core = MemoryCore(cfg)
    >>> mem = core.initial_memory(batch_size=3)
    >>> out = core(torch.randn(3, 5, 16), memory=mem)          # a segment of 5 tokens
    >>> out.output.shape, out.memory.hidden.shape
    (torch.Size([3, 5, 16]), torch.Size([2, 3, 4, 16]))
    >>> step = core.step(torch.randn(3, 16), memory=out.memory)  # one more token, O(M) work
    >>> step.output.shape
    torch.Size([3, 16])
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import nn

from rlformer.core.block import MemoryBlock
from rlformer.core.config import CoreConfig
from rlformer.core.device import autocast_context
from rlformer.core.masks import AttentionLayout, build_layout
from rlformer.core.memory import Memory
from rlformer.core.positional import sinusoid_table

# Memories whose key/value projections the core keeps for incremental inference.
_CACHED_MEMORIES = 4
# The fewest queries per attention block of a long segment. Segments up to twice this (every
# shipped config's rollout shape, 128 steps at most) keep the dense path, where blocks gained
# within 1.15x; forward and backward of one layer (d 64, M 64, one thread) measured 2.6x
# faster in blocks at 256 steps, 4.4x at 600 and 6.3x at 1,024 (docs/benchmarks/throughput.md).
_MIN_BLOCK = 64


class CoreOutput(NamedTuple):
    """Outputs ``[B, T, d]`` (``[B, d]`` from :meth:`MemoryCore.step`) and the next memory."""

    output: torch.Tensor
    memory: Memory


class SinusoidalClock(nn.Module):
    """Step -> a learned linear map of a fixed sinusoid of the step (``[..., d]``).

    A query linear in sin/cos of its step and a key linear in those of theirs can score any
    fixed combination of the two steps' sum or difference, for all steps with the same weights.
    """

    def __init__(self, num_steps: int, width: int) -> None:
        super().__init__()
        self.register_buffer("table", sinusoid_table(num_steps, width), persistent=False)
        self.weight = nn.Parameter(torch.empty(width, width))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, steps: torch.Tensor) -> torch.Tensor:
        return self.table[steps] @ self.weight


def _episode_clock(cfg: CoreConfig) -> nn.Module:
    """The clock's encoder of steps 0..M (see :meth:`MemoryCore._with_episode_clock`)."""
    if cfg.episode_clock_encoding == "sinusoidal":
        return SinusoidalClock(cfg.memory_length + 1, cfg.d_model)
    clock = nn.Embedding(cfg.memory_length + 1, cfg.d_model)
    nn.init.normal_(clock.weight, std=0.02)
    return clock


class MemoryCore(nn.Module):
    """Transformer-XL memory + relative positions + GTrXL gating, shared by PPO and DT.

    Every call obeys one rule: a token attends to itself and to at most M earlier tokens per
    layer, of its own episode, never to padding. Hence processing a sequence whole, in segments
    with carried memory, or one token at a time with :meth:`step` gives the same outputs.
    Memory is returned detached: gradients never flow into earlier segments.

    ``projection_cache`` (default True) lets eager inference reuse the memory's key/value
    projections between calls; tracers (``torch.export``, ONNX export) turn it off, since the
    cache keys on object identity and version counters that a traced graph cannot hold.
    """

    projection_cache: bool = True

    def __init__(self, cfg: CoreConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.blocks = nn.ModuleList(MemoryBlock(cfg) for _ in range(cfg.n_layers))
        # Time within the episode, read off the visibility mask (see _with_episode_clock).
        self.episode_clock: nn.Module | None = None
        if cfg.episode_clock:
            self.episode_clock = _episode_clock(cfg)
        # Pre-LN stacks leave the residual stream un-normalised; normalise once at the top.
        self.final_norm = nn.LayerNorm(cfg.d_model) if cfg.block != "post_ln" else nn.Identity()
        self._compiled: Callable[..., CoreOutput] | None = None  # built on first use
        # (weak ref to a memory produced in inference, its version, its per-layer K/V), newest
        # last; all computed with the weights in _projected_with.
        self._projections: list[tuple[weakref.ref, int, list[torch.Tensor]]] = []
        self._projected_with: list[torch.Tensor] = []
        self._projected_stamps: list[tuple[int, int]] = []  # (data_ptr, version) of those

    def __getstate__(self) -> dict[str, object]:
        # A torch.compile'd bound method cannot be pickled (Ray ships policies by pickle);
        # drop it and let the copy compile again on its first call.
        state = dict(self.__dict__)
        state["_compiled"] = None
        state["_projections"] = []  # weak references do not pickle
        state["_projected_with"] = []
        state["_projected_stamps"] = []
        return state

    def _forward(self, *args: object) -> CoreOutput:
        if not self.cfg.compile:
            return self._forward_impl(*args)
        if self._compiled is None:
            self._compiled = torch.compile(self._forward_impl, dynamic=True)
        return self._compiled(*args)

    def initial_memory(self, batch_size: int, device: torch.device | str | None = None) -> Memory:
        """Empty memory (all slots invalid) for ``batch_size`` rows."""
        if device is None:
            device = next(self.parameters()).device
        return Memory.empty(
            self.cfg.n_layers, batch_size, self.cfg.memory_length, self.cfg.d_model, device=device
        )

    def forward(
        self,
        x: torch.Tensor,
        memory: Memory | None = None,
        episode_start: torch.Tensor | None = None,
        padding_mask: torch.Tensor | None = None,
        output_index: torch.Tensor | None = None,
    ) -> CoreOutput:
        """Process a segment ``x [B, T, d]``.

        Args:
            x: input tokens.
            memory: memory from the previous segment, or None for an empty one.
            episode_start: ``[B, T]`` True where a new episode starts (hides all earlier tokens).
            padding_mask: ``[B, T]`` True for padded positions (never attended to, output zero).
            output_index: ``[T']`` positions whose outputs are wanted (default: all). The last
                layer then computes only those queries, e.g. a Decision Transformer needs the
                outputs at its state tokens only. Memory is unaffected.

        Returns:
            Outputs ``[B, T, d]`` (``[B, T', d]`` with ``output_index``) and the next memory.
        """
        if memory is None:
            # No memory slots at all (rather than M invalid ones): same outputs, fewer keys.
            memory = Memory.empty(self.cfg.n_layers, x.shape[0], 0, self.cfg.d_model, x.device)
        else:
            self._check_memory(x, memory)
        return self._forward(x, memory, episode_start, padding_mask, output_index)

    def _check_memory(self, x: torch.Tensor, memory: Memory) -> None:
        """Fail with the expected shapes rather than an index error deep inside attention."""
        cfg = self.cfg
        expected = (cfg.n_layers, x.shape[0], cfg.memory_length, cfg.d_model)
        if tuple(memory.hidden.shape) != expected or tuple(memory.valid.shape) != expected[1:3]:
            raise ValueError(
                f"memory hidden {tuple(memory.hidden.shape)} / valid {tuple(memory.valid.shape)} "
                f"does not fit this core and batch: expected hidden {expected} (layers, batch, "
                f"memory_length, d_model) and valid {expected[1:3]}"
            )

    def step(
        self,
        x: torch.Tensor,
        memory: Memory | None = None,
        episode_start: torch.Tensor | None = None,
    ) -> CoreOutput:
        """Advance one token per row: ``x [B, d]``, ``episode_start [B]`` -> output ``[B, d]``."""
        starts = None if episode_start is None else episode_start.reshape(-1, 1)
        out = self.forward(x[:, None], memory, starts)
        return CoreOutput(out.output[:, 0], out.memory)

    def step_cached(
        self,
        x: torch.Tensor,
        hidden: list[torch.Tensor],
        valid: torch.Tensor,
        keys: list[torch.Tensor],
        values: list[torch.Tensor],
        episode_start: torch.Tensor,
    ) -> tuple[
        torch.Tensor, list[torch.Tensor], torch.Tensor, list[torch.Tensor], list[torch.Tensor]
    ]:
        """:meth:`step` with the memory's attention keys and values held by the caller.

        ``x [B, d]``; per layer ``hidden[l] [B, M, d]`` (what entered layer l) and
        ``keys[l], values[l] [B, H, M, h]``, which must be :meth:`project_memory` of the
        hidden states wherever ``valid [B, M]`` is True (invalid slots are never read, so any
        value does there). Returns the output ``[B, d]`` and the next hidden, valid, keys and
        values in the same layout. Only the new token is projected: O(1) projection work per
        step instead of O(M). Functional (no in-place writes, no cache keyed on objects), so
        it traces into an exported graph, which carries the keys and values as state like
        the memory itself.
        """
        tokens = x[:, None]  # [B, 1, d]
        layout = build_layout(valid, episode_start.reshape(-1, 1), None, 1, self.cfg.memory_length)
        h = tokens if self.episode_clock is None else self._with_episode_clock(tokens, layout)
        next_hidden, next_keys, next_values = [], [], []
        with autocast_context(x.device, self.cfg.precision):
            for layer, block in enumerate(self.blocks):
                kept = torch.cat([hidden[layer][:, 1:], h.to(hidden[layer].dtype)], dim=1)
                next_hidden.append(kept)  # the last M states that entered the layer
                h, key, value = block.step_cached(h, keys[layer], values[layer], layout)
                next_keys.append(torch.cat([keys[layer][:, :, 1:], key], dim=2))
                next_values.append(torch.cat([values[layer][:, :, 1:], value], dim=2))
            h = self.final_norm(h)
        return h.float()[:, 0], next_hidden, layout.new_valid, next_keys, next_values

    def project_memory(self, memory: Memory) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Per layer, the keys and values ``[B, H, M, h]`` of a memory's slots (what
        :meth:`step_cached` takes)."""
        pairs = [
            block.memory_keys_values(memory.hidden[layer].to(block.norm_attn.weight.dtype))
            for layer, block in enumerate(self.blocks)
        ]
        return [k for k, _ in pairs], [v for _, v in pairs]

    def _forward_impl(
        self,
        x: torch.Tensor,
        memory: Memory,
        episode_start: torch.Tensor | None,
        padding_mask: torch.Tensor | None,
        output_index: torch.Tensor | None = None,
    ) -> CoreOutput:
        mem_len = self.cfg.memory_length
        layout = build_layout(memory.valid, episode_start, padding_mask, x.shape[1], mem_len)
        # Graph capture (torch.compile, torch.export) builds the next memory without in-place
        # writes: exported, a write into one layer's slice scatters into the whole tensor.
        # Tested first, so that no graph meets the cache's inference-mode probe (a graph break).
        traced = torch.compiler.is_compiling()
        caching = not traced and self._projection_cache_enabled()
        cached = self._cached_projections(memory) if caching else None
        batch, width = x.shape[0], self.cfg.d_model
        new_hidden = None
        if not traced:
            new_hidden = torch.empty(len(self.blocks), batch, mem_len, width, device=x.device)
        kept_states = []
        new_projections = []
        h = x if self.episode_clock is None else self._with_episode_clock(x, layout)
        with autocast_context(x.device, self.cfg.precision):
            for layer, block in enumerate(self.blocks):
                layer_memory = memory.hidden[layer].detach().to(h.dtype)  # [B, S, d]
                if new_hidden is None:
                    kept_states.append(_last_states(layer_memory, h.detach(), mem_len))
                else:
                    filled = _write_last_slots(new_hidden[layer], layer_memory, h.detach())
                context_kv = None
                if caching:
                    context_kv = (
                        block.project_kv(torch.cat([layer_memory, h], dim=1))
                        if cached is None
                        else torch.cat([cached[layer], block.project_kv(h)], dim=1)
                    )
                    kv = context_kv[:, max(0, context_kv.shape[1] - mem_len) :]
                    if filled < mem_len:  # zero-filled slots: keys/values of a zero state
                        empty = block.project_kv(new_hidden[layer][:1, :1].new_zeros(1, 1, width))
                        kv = torch.cat([empty.expand(batch, mem_len - filled, -1), kv], dim=1)
                    new_projections.append(kv)
                if output_index is not None and layer == len(self.blocks) - 1:
                    layout = layout.select_queries(output_index)
                    h = block(h, layer_memory, layout, context_kv, query_index=output_index)
                elif not traced and h.shape[1] > 2 * self.block_length:
                    h = self._blocked(block, h, layer_memory, layout, context_kv)
                else:
                    h = block(h, layer_memory, layout, context_kv)
            h = self.final_norm(h)
        output = h.float().masked_fill(layout.padded[..., None], 0.0)
        if new_hidden is None:
            new_hidden = torch.stack(kept_states).to(torch.get_default_dtype())
        new_memory = Memory(new_hidden, layout.new_valid)
        if caching:
            self._remember_projections(new_memory, new_projections)
        return CoreOutput(output, new_memory)

    @property
    def block_length(self) -> int:
        """Queries per attention block of a long segment (see :meth:`_blocked`)."""
        return max(self.cfg.memory_length, _MIN_BLOCK)

    def _blocked(
        self,
        block: MemoryBlock,
        h: torch.Tensor,
        memory: torch.Tensor,
        layout: AttentionLayout,
        context_kv: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``block`` over a long segment, its queries in blocks of :attr:`block_length`.

        A query sees at most M keys back, so a block of C queries needs only the M + C keys
        before and inside it: attention costs T (M + C) instead of T (M + T), linear in the
        segment's length (a 600-step row: a fifth of the scores at M = 64). Keys and values are
        projected once for the whole ``[memory ; segment]`` (``context_kv``, where the caller
        has them already); each block is the segment case of :class:`MemoryBlock` with the keys
        before it as its memory, so the outputs are the dense ones up to float rounding, and
        gradients reach earlier tokens through the keys.
        """
        slots, length, window = memory.shape[1], h.shape[1], self.cfg.memory_length
        if context_kv is None:
            context_kv = block.project_kv(torch.cat([memory, h], dim=1))
        outputs = []
        for first in range(0, length, self.block_length):
            last = min(first + self.block_length, length)
            low = max(0, slots + first - window)  # the first key any query of the block sees
            keys = slice(low, slots + last)
            part = AttentionLayout(
                layout.visible[:, first:last, keys],
                layout.distance[first:last, keys],
                layout.new_valid,
                layout.padded[:, first:last],
                layout.query_positions[first:last] - low,
            )
            outputs.append(block(h[:, first:last], memory, part, context_kv[:, keys]))
        return torch.cat(outputs, dim=1)

    def _with_episode_clock(self, x: torch.Tensor, layout: AttentionLayout) -> torch.Tensor:
        """``x`` plus the embedding of each token's count of visible earlier tokens.

        The count comes from the same visibility rule as attention (episode, window, padding),
        so whole sequences, segments and single steps see the same clock: the step within the
        episode, capped at M. It is the memory the token holds, not a stored counter, so no
        state beyond the memory is needed. The input to the first block changes; what enters
        the memory is that input, as for every other token feature.
        """
        assert self.episode_clock is not None
        earlier = layout.visible.sum(dim=-1) - 1  # [B, T]; each token sees itself
        return x + self.episode_clock(earlier.clamp(0, self.cfg.memory_length)).to(x.dtype)

    # --- incremental inference: keys/values of the memory are projected once, not every step ---

    def _projection_cache_enabled(self) -> bool:
        """Only for inference (no autograd, eval mode) in eager mode, unless switched off.

        Inference-mode tensors carry no version counter, so in-place edits of a memory could
        not be detected there: the cache is off under ``torch.inference_mode``.
        """
        return self.projection_cache and not (
            torch.is_grad_enabled()
            or self.training
            or self.cfg.compile
            or torch.is_inference_mode_enabled()
        )

    def _projection_weights(self) -> list[torch.Tensor]:
        """The parameters that :meth:`MemoryBlock.project_kv` reads."""
        weights = []
        for block in self.blocks:
            weights += [block.norm_attn.weight, block.norm_attn.bias]
            weights.append(block.attention.key_value.weight)
        return weights

    def _drop_projections_of_old_weights(self) -> None:
        """Forget every cached projection if a weight feeding them was written since.

        Two checks. Version counters catch every in-place write through autograd-visible ops
        (``load_state_dict``, most optimizers), even of equal values, so a caller that reloads
        weights gets the uncached computation, bit for bit, as a fresh process would. Values
        catch what versions miss: fused optimizers and ``.data`` edits do not bump them.
        """
        weights = self._projection_weights()
        stamps = [(w.data_ptr(), w._version) for w in weights]
        # Equal stamps mean the same storages, hence the same shapes and devices as the copies.
        unchanged = stamps == self._projected_stamps and all(
            torch.equal(a.detach(), b) for a, b in zip(weights, self._projected_with, strict=True)
        )
        if not unchanged:
            self._projections = []
            self._projected_with = [w.detach().clone() for w in weights]
            self._projected_stamps = stamps

    def _cached_projections(self, memory: Memory) -> list[torch.Tensor] | None:
        """The memory's per-layer keys/values if this core produced exactly this memory with
        the current weights."""
        self._drop_projections_of_old_weights()
        if memory.hidden.shape[2] == 0:
            return None
        for owner, version, projections in self._projections:
            if owner() is memory.hidden:
                return projections if version == memory.hidden._version else None
        return None

    def _remember_projections(self, memory: Memory, projections: list[torch.Tensor]) -> None:
        """Keep the projections of the few most recent memories that are still alive.

        Weak references: the cache never keeps a memory alive that its caller dropped, and
        entries of dropped memories go at the next call. A few entries, not one, so an extra
        call in between (a recompute, a second stream of episodes) does not evict a rollout's.
        """
        live = [entry for entry in self._projections if entry[0]() is not None]
        live.append((weakref.ref(memory.hidden), memory.hidden._version, projections))
        self._projections = live[-_CACHED_MEMORIES:]


def _last_states(older: torch.Tensor, newer: torch.Tensor, slots: int) -> torch.Tensor:
    """What :func:`_write_last_slots` writes, as one functional expression ``[B, slots, d]``."""
    combined = torch.cat([older, newer], dim=1)
    if combined.shape[1] >= slots:
        return combined[:, combined.shape[1] - slots :]
    fill = combined.new_zeros(combined.shape[0], slots - combined.shape[1], combined.shape[2])
    return torch.cat([fill, combined], dim=1)


def _write_last_slots(out: torch.Tensor, older: torch.Tensor, newer: torch.Tensor) -> int:
    """Write the last M states of ``[older ; newer]`` into ``out [B, M, d]``, zero-filling the
    front when there are fewer; returns how many slots hold real states.

    One copy per state, straight into the next memory (no concatenation, no stacking).
    """
    slots, new = out.shape[1], newer.shape[1]
    if new >= slots:
        out.copy_(newer[:, new - slots :])
        return slots
    out[:, slots - new :] = newer
    kept = min(slots - new, older.shape[1])
    out[:, slots - new - kept : slots - new] = older[:, older.shape[1] - kept :]
    out[:, : slots - new - kept] = 0.0
    return new + kept
