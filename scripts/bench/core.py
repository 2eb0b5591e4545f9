"""Attention-core benchmark: incremental inference, training throughput, achieved FLOP/s.

Run (CPU, one thread, as our rollout workers run):
    .venv/bin/python scripts/bench/core.py
    .venv/bin/python scripts/bench/core.py --quick           # smaller, for a smoke run
    .venv/bin/python scripts/bench/core.py --device cuda      # the same code on a GPU

Prints three tables, each measured side by side in this one process:
  (a) step() (one token against cached memory) vs recomputing the whole window, per memory length M;
  (b) training tokens/s (forward + backward) of the core vs the same maths without the fused SDPA
      kernel (explicit matmul + softmax) vs torch.nn.TransformerEncoder of equal size;
  (c) achieved FLOP/s of the core's training step vs this device's measured fp32 matmul peak.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import time
from collections.abc import Callable, Iterator

import torch
from torch import nn

from rlformer.core import CoreConfig, MemoryCore
from rlformer.core import attention as attention_module
from rlformer.core.device import resolve_device


def timed(
    fn: Callable[[], object], device: torch.device, min_time: float, warmup: int = 3
) -> float:
    """Median seconds per call over repeated timing windows."""
    for _ in range(warmup):
        fn()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    samples = []
    calls = 1
    deadline = time.perf_counter() + min_time
    while time.perf_counter() < deadline or len(samples) < 5:
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        elapsed = (time.perf_counter() - start) / calls
        samples.append(elapsed)
        if elapsed * calls < 0.01:
            calls *= 2
    samples.sort()
    return samples[len(samples) // 2]


@contextlib.contextmanager
def naive_attention() -> Iterator[None]:
    """Swap the fused SDPA kernel for explicit matmul + masked softmax (same maths)."""

    def explicit(q, k, v, attn_mask=None, dropout_p=0.0):  # noqa: ANN001, ANN202
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


def bench_incremental(args: argparse.Namespace, device: torch.device) -> None:
    print("\n(a) one-step inference: step() with cached memory vs recomputing the window")
    print(f"{'M':>6} {'step ms':>10} {'recompute ms':>14} {'speed-up':>10}")
    for mem_len in args.memory_lengths:
        cfg = CoreConfig(
            n_layers=args.layers,
            d_model=args.d_model,
            n_heads=args.heads,
            d_ff=4 * args.d_model,
            memory_length=mem_len,
        )
        core = MemoryCore(cfg).to(device).eval()
        batch = args.batch
        x_window = torch.randn(batch, mem_len + 1, args.d_model, device=device)
        with torch.no_grad():
            memory = core(x_window[:, :-1]).memory
            token = x_window[:, -1]
            step = timed(lambda c=core, t=token, m=memory: c.step(t, m), device, args.min_time)
            full = timed(lambda c=core, x=x_window: c(x), device, args.min_time)
        print(f"{mem_len:>6} {1e3 * step:>10.3f} {1e3 * full:>14.3f} {full / step:>9.1f}x")


def training_flops(cfg: CoreConfig, batch: int, seg_len: int) -> float:
    """Multiply-adds x 2 of one forward + backward (backward ~ 2x forward) of the core."""
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


def matmul_peak(device: torch.device, min_time: float, dtype: torch.dtype = torch.float32) -> float:
    size = 1024 if device.type == "cpu" else 8192
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    seconds = timed(lambda: a @ b, device, min_time)
    return 2 * size**3 / seconds


def bench_training(args: argparse.Namespace, device: torch.device) -> None:
    cfg = CoreConfig(
        n_layers=args.layers,
        d_model=args.d_model,
        n_heads=args.heads,
        d_ff=4 * args.d_model,
        memory_length=args.train_memory,
    )
    batch, seg = args.batch, args.segment
    tokens = batch * seg
    core = MemoryCore(cfg).to(device).train()
    x = torch.randn(batch, seg, args.d_model, device=device)
    memory = core(x).memory

    def core_step() -> None:
        out = core(x, memory)
        out.output.square().mean().backward()

    encoder_layer = nn.TransformerEncoderLayer(
        args.d_model, args.heads, 4 * args.d_model, dropout=0.0, batch_first=True, norm_first=True
    )
    encoder = nn.TransformerEncoder(encoder_layer, args.layers, enable_nested_tensor=False).to(
        device
    )
    causal = nn.Transformer.generate_square_subsequent_mask(seg, device=device)

    def encoder_step() -> None:
        out = encoder(x, mask=causal, is_causal=True)
        out.square().mean().backward()

    fused = timed(core_step, device, args.min_time)
    with naive_attention():
        naive = timed(core_step, device, args.min_time)
    torch_encoder = timed(encoder_step, device, args.min_time)
    print(
        f"\n(b) training tokens/s (forward + backward), B={batch} T={seg} M={cfg.memory_length}, "
        f"{args.layers} layers, d={args.d_model}"
    )
    print(f"{'implementation':<44} {'tokens/s':>12} {'rlformer / it':>14}")
    rows = [
        ("rlformer core (GTrXL, relative, SDPA)", fused),
        ("same maths, explicit matmul + softmax", naive),
        ("torch.nn.TransformerEncoder (no memory)", torch_encoder),
    ]
    for name, seconds in rows:
        print(f"{name:<44} {tokens / seconds:>12,.0f} {seconds / fused:>13.2f}x")

    flops = training_flops(cfg, batch, seg)
    peak = matmul_peak(device, args.min_time)
    achieved = flops / fused
    precision = "bf16 autocast" if device.type == "cuda" else "fp32"
    print(f"\n(c) achieved FLOP/s of the core's training step (core runs {precision})")
    print(f"fp32 matmul peak              {peak / 1e9:10.1f} GFLOP/s")
    if device.type == "cuda":
        bf16_peak = matmul_peak(device, args.min_time, torch.bfloat16)
        print(f"bf16 matmul peak              {bf16_peak / 1e9:10.1f} GFLOP/s")
        peak = bf16_peak
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
