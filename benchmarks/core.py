"""Attention-core benchmark: incremental inference, training throughput, achieved FLOP/s.

Run (CPU, one thread, as our rollout workers run):
    .venv/bin/python benchmarks/core.py
    .venv/bin/python benchmarks/core.py --quick           # smaller, for a smoke run
    .venv/bin/python benchmarks/core.py --device cuda      # the same code on a GPU
    .venv/bin/python benchmarks/core.py --schemes rotary   # time only some positional schemes
    .venv/bin/python benchmarks/core.py --compile          # cores built with compile=True

Prints three tables, each measured side by side in this one process:
  (a) step() (one token against cached memory) vs recomputing the whole window, per memory length M;
  (b) training tokens/s (forward + backward) of the core, for each positional scheme, vs the same
      maths without the fused SDPA kernel (explicit matmul + softmax) and vs
      torch.nn.TransformerEncoder of equal size (which has no memory: T keys instead of M + T);
  (c) achieved FLOP/s of the core's training step vs this device's measured matmul peak.

On CUDA the core and the encoder both run under bf16 autocast (the core's default there).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import time
from collections.abc import Callable, Iterator

import torch
from torch import nn

from rlformer.core import CoreConfig, Memory, MemoryCore
from rlformer.core import attention as attention_module
from rlformer.core.device import autocast_context, resolve_device


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def compare(
    fns: dict[str, Callable[[], object]],
    device: torch.device,
    min_time: float,
    warmup: int = 2,
    burst_time: float = 0.01,
) -> dict[str, float]:
    """Median seconds per call of each function, timed in interleaved rounds.

    Side-by-side ratios are what this script reports. On a shared machine the load drifts, so
    the competitors take turns within each round rather than each getting its own stretch of
    time: a busy minute then slows all of them alike and the ratios survive it. Within a round a
    fast function is called in a burst of about ``burst_time`` seconds (per-call time = burst /
    calls), the steady state of repeated calls as in a rollout, rather than one call on caches
    the previous competitor has just flushed.
    """
    calls: dict[str, int] = {}
    for name, fn in fns.items():
        for _ in range(warmup):
            _sync(device)
            start = time.perf_counter()
            fn()
            _sync(device)
        single = max(time.perf_counter() - start, 1e-6)
        calls[name] = max(1, int(burst_time / single))
    samples: dict[str, list[float]] = {name: [] for name in fns}
    deadline = time.perf_counter() + min_time * len(fns)
    while time.perf_counter() < deadline or len(samples[next(iter(fns))]) < 5:
        for name, fn in fns.items():
            _sync(device)
            start = time.perf_counter()
            for _ in range(calls[name]):
                fn()
            _sync(device)
            samples[name].append((time.perf_counter() - start) / calls[name])
    return {name: sorted(values)[len(values) // 2] for name, values in samples.items()}


@contextlib.contextmanager
def naive_attention() -> Iterator[None]:
    """Swap the fused SDPA kernel for explicit matmul + masked softmax (same maths)."""

    def explicit(
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        dropout_p: float = 0.0,
    ) -> torch.Tensor:
        """``q [B, H, T, h]``, ``k/v [B, H, S, h]``, mask ``[B, 1, T, S]`` -> ``[B, H, T, h]``."""
        # dropout_p is accepted for signature compatibility; the benchmark runs with dropout 0.
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                scores = scores.masked_fill(~attn_mask, float("-inf"))
            else:
                scores = scores + attn_mask
        return torch.softmax(scores, dim=-1) @ v

    original = attention_module.F.scaled_dot_product_attention
    attention_module.F.scaled_dot_product_attention = explicit  # type: ignore[assignment]
    try:
        yield
    finally:
        attention_module.F.scaled_dot_product_attention = original  # type: ignore[assignment]


def core_config(args: argparse.Namespace, memory_length: int, positional: str) -> CoreConfig:
    """The benchmarked core: GTrXL blocks with GRU gates, d_ff = 4 d_model."""
    return CoreConfig(
        n_layers=args.layers,
        d_model=args.d_model,
        n_heads=args.heads,
        d_ff=4 * args.d_model,
        memory_length=memory_length,
        positional=positional,
        compile=args.compile,
    )


def bench_incremental(args: argparse.Namespace, device: torch.device) -> None:
    print("\n(a) one-step inference: step() with cached memory vs recomputing the window")
    print(f"B={args.batch}, {args.layers} layers, d={args.d_model}, relative positions")
    print(f"{'M':>6} {'step ms':>10} {'recompute ms':>14} {'speed-up':>10}")
    for mem_len in args.memory_lengths:
        core = MemoryCore(core_config(args, mem_len, "relative")).to(device).eval()
        batch = args.batch
        x_window = torch.randn(batch, mem_len + 1, args.d_model, device=device)
        with torch.no_grad():
            # Steps are chained as in a rollout: each consumes the memory the last one made, so
            # the memory's keys/values come from the core's projection cache.
            carried = {"memory": core(x_window[:, :-1]).memory}
            token = x_window[:, -1]

            def step(c: MemoryCore = core, t: torch.Tensor = token, s: dict = carried) -> None:
                s["memory"] = c.step(t, s["memory"]).memory

            times = compare(
                {"step": step, "full": lambda c=core, x=x_window: c(x)},
                device,
                args.min_time,
            )
        step, full = times["step"], times["full"]
        print(f"{mem_len:>6} {1e3 * step:>10.3f} {1e3 * full:>14.3f} {full / step:>9.1f}x")


def training_flops(cfg: CoreConfig, batch: int, seg_len: int) -> float:
    """Multiply-adds x 2 of one forward + backward (backward ~ 2x forward) of the core.

    Counts the matmuls only (projections, scores, weighted sums, MLP, two GRU gates of 6 d^2
    per token each, and the relative position term); element-wise work is not counted.
    """
    d, ctx, ff = cfg.d_model, cfg.memory_length + seg_len, cfg.d_ff
    per_layer = (
        2 * seg_len * d * d  # query
        + 2 * ctx * d * 2 * d  # keys and values over [memory ; segment]
        + 2 * seg_len * d * d  # output projection
        + 2 * 2 * seg_len * ctx * d  # scores and weighted sum
        + 2 * 2 * seg_len * d * ff  # MLP
        + 2 * 2 * seg_len * 6 * d * d  # two GRU gates
    )
    if cfg.positional == "relative":
        per_layer += 2 * (cfg.memory_length + 1) * d * d + 2 * seg_len * (cfg.memory_length + 1) * d
    return 3.0 * batch * cfg.n_layers * per_layer


def square_matmul(device: torch.device, dtype: torch.dtype) -> tuple[Callable[[], object], float]:
    """One large square matmul and its FLOP count: the practical ceiling for device and dtype."""
    size = 1024 if device.type == "cpu" else 8192
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    return (lambda: a @ b), 2.0 * size**3


def bench_training(args: argparse.Namespace, device: torch.device) -> None:
    batch, seg = args.batch, args.segment
    tokens = batch * seg
    x = torch.randn(batch, seg, args.d_model, device=device)
    fns: dict[str, Callable[[], object]] = {}
    for scheme in args.schemes:
        torch.manual_seed(0)
        core = MemoryCore(core_config(args, args.train_memory, scheme)).to(device).train()
        memory = core(x).memory  # a full, valid memory: every query sees M + 1 keys

        def core_step(c: MemoryCore = core, m: Memory = memory) -> None:
            out = c(x, m)
            out.output.square().mean().backward()

        def naive_step(step: Callable[[], None] = core_step) -> None:
            with naive_attention():
                step()

        fns[f"{scheme}, SDPA"] = core_step
        fns[f"{scheme}, explicit matmul + softmax"] = naive_step

    encoder_layer = nn.TransformerEncoderLayer(
        args.d_model, args.heads, 4 * args.d_model, dropout=0.0, batch_first=True, norm_first=True
    )
    encoder = nn.TransformerEncoder(encoder_layer, args.layers, enable_nested_tensor=False).to(
        device
    )
    causal = nn.Transformer.generate_square_subsequent_mask(seg, device=device)

    def encoder_step() -> None:
        with autocast_context(device):  # the same precision the core uses on this device
            out = encoder(x, mask=causal, is_causal=True)
        out.float().square().mean().backward()

    fns["torch.nn.TransformerEncoder (no memory)"] = encoder_step
    seconds = compare(fns, device, args.min_time)

    reference = seconds[f"{args.schemes[0]}, SDPA"]
    print(
        f"\n(b) training tokens/s (forward + backward), B={batch} T={seg} "
        f"M={args.train_memory}, {args.layers} layers, d={args.d_model}, GTrXL/GRU blocks"
    )
    print(f"{'implementation':<52} {'tokens/s':>12} {'time / ' + args.schemes[0]:>16}")
    for name, secs in seconds.items():
        label = name if name.startswith("torch") else f"rlformer core: {name}"
        print(f"{label:<52} {tokens / secs:>12,.0f} {secs / reference:>15.2f}x")

    # (c): time the core step again, interleaved with the peak matmul, so both see the same load.
    cfg = core_config(args, args.train_memory, args.schemes[0])
    flops = training_flops(cfg, batch, seg)
    peak_dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    matmuls = {dtype: square_matmul(device, dtype) for dtype in {torch.float32, peak_dtype}}
    timings = compare(
        {"core": fns[f"{args.schemes[0]}, SDPA"]} | {str(d): mm for d, (mm, _) in matmuls.items()},
        device,
        args.min_time,
    )
    rates = {dtype: flop / timings[str(dtype)] for dtype, (_, flop) in matmuls.items()}
    achieved, peak = flops / timings["core"], rates[peak_dtype]
    precision = "bf16 autocast" if device.type == "cuda" else "fp32"
    print(f"\n(c) achieved FLOP/s of the {args.schemes[0]} core's training step ({precision})")
    print(f"fp32 matmul peak              {rates[torch.float32] / 1e9:10.1f} GFLOP/s")
    if device.type == "cuda":
        print(f"bf16 matmul peak              {peak / 1e9:10.1f} GFLOP/s")
    print(
        f"core training step            {achieved / 1e9:10.1f} GFLOP/s  "
        f"({100 * achieved / peak:.1f}% of the {precision.split()[0]} peak)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cpu", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--quick", action="store_true", help="fewer sizes, shorter timing")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--segment", type=int, default=128)
    parser.add_argument("--train-memory", type=int, default=128)
    parser.add_argument(
        "--schemes",
        nargs="+",
        default=["relative", "rotary", "learned", "none"],
        choices=["relative", "rotary", "learned", "none"],
        help="positional schemes timed in (b); the first is the reference row and used in (c)",
    )
    parser.add_argument(
        "--compile", action="store_true", help="build the cores with compile=True (slow start)"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = resolve_device(args.device)
    args.memory_lengths = [16, 64, 256] if args.quick else [16, 64, 256, 1024]
    args.min_time = 0.2 if args.quick else 1.0
    name = (
        torch.cuda.get_device_name() if device.type == "cuda" else f"CPU, {args.threads} thread(s)"
    )
    print(f"rlformer core benchmark on {name}, torch {torch.__version__}")
    bench_incremental(args, device)
    bench_training(args, device)


if __name__ == "__main__":
    main()
