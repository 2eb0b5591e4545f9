"""A long segment's attention in blocks of queries against the dense computation.

Forward and backward of the core over one batch of segments (one torch thread, the PPO
default's core: one GTrXL layer, d_model 64, 4 heads, MLP 128, memory 64), the blocked path
(:meth:`rlformer.core.stack.MemoryCore._blocked`, taken above twice its block length) and the
dense one on the same inputs, in turns, so that load from elsewhere hits both alike. Prints a
markdown table of medians and their ratio.

    .venv/bin/python benchmarks/blocked_attention.py
    .venv/bin/python benchmarks/blocked_attention.py --lengths 600 --rows 40 --rounds 9
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from rlformer.core import CoreConfig, MemoryCore

DENSE = property(lambda self: 10**9)  # a block length no segment exceeds: the dense path


def timed(core: MemoryCore, rows: int, length: int) -> float:
    """Seconds for one forward and backward over ``rows`` segments of ``length`` steps, each
    starting an episode, with an empty memory (as a PPO minibatch's first rows do)."""
    x = torch.randn(rows, length, core.cfg.d_model, requires_grad=True)
    starts = torch.zeros(rows, length, dtype=torch.bool)
    starts[:, 0] = True
    memory = core.initial_memory(rows)
    started = time.perf_counter()
    core(x, memory, starts).output.sum().backward()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 256, 600, 1024])
    parser.add_argument("--tokens", type=int, default=16_384, help="rows x length per batch")
    parser.add_argument("--rows", type=int, default=None, help="rows per batch (else --tokens)")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = CoreConfig(n_layers=1, d_model=64, n_heads=4, d_ff=128, memory_length=64, gate_bias=0)
    core = MemoryCore(cfg).train()
    blocked = MemoryCore.block_length
    print(f"block length {core.block_length}; blocks above {2 * core.block_length} steps")
    print("| steps per segment | rows | dense ms | blocked ms | dense / blocked |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    try:
        for length in args.lengths:
            rows = args.rows or max(1, args.tokens // length)
            dense_times, blocked_times = [], []
            for round_index in range(args.rounds + 1):  # the first round warms up, untimed
                MemoryCore.block_length = DENSE  # type: ignore[assignment,method-assign]
                dense_time = timed(core, rows, length)
                MemoryCore.block_length = blocked  # type: ignore[method-assign]
                blocked_time = timed(core, rows, length)
                if round_index:
                    dense_times.append(dense_time)
                    blocked_times.append(blocked_time)
            dense_ms = 1000 * statistics.median(dense_times)
            blocked_ms = 1000 * statistics.median(blocked_times)
            print(f"| {length} | {rows} | {dense_ms:.0f} | {blocked_ms:.0f} "
                  f"| {dense_ms / blocked_ms:.2f}x |", flush=True)  # fmt: skip
    finally:
        MemoryCore.block_length = blocked  # type: ignore[method-assign]


if __name__ == "__main__":
    main()
