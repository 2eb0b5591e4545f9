"""Memory beyond the context window: Decision Transformer with and without carried memory.

Data where the return is decided by information older than K steps: passive T-Maze episodes
of a behaviour policy that walks the corridor and, at the junction, turns towards the cue shown
at step 0 with probability ``--p-correct`` (default 0.75; return 1) or the other way (return 0).
Conditioned on return 1, a DT must recall the cue at the junction, ``length`` steps after it was
shown. With context K < length a plain DT cannot see it (its best is chance, 50%); a DT that
carries the core's memory across consecutive K-step windows (``dt.memory_segments``) can.

Run (CPU, about 6 minutes with the defaults: corridor 12, K = 5, 2 seeds):
    .venv/bin/python benchmarks/dt_memory.py
    .venv/bin/python benchmarks/dt_memory.py --length 30 --context 10 --steps 5000
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from rlformer.config import load_config
from rlformer.data.d4rl_format import write_d4rl
from rlformer.data.synthetic import tmaze_walks
from rlformer.runs.training import train


def record_corridor_walks(
    length: int, episodes: int, seed: int, path: Path, p_correct: float
) -> float:
    """Write the T-Maze walks to ``path``; returns the share of episodes with return 1."""
    walks = tmaze_walks(length, episodes, seed, p_correct)
    write_d4rl(path, walks, {"env_id": "rlformer/TMaze-v0", "env_kwargs": {"length": length}})
    return float(np.mean([e.rewards.sum() for e in walks]))


def train_and_evaluate(
    args: argparse.Namespace, data: Path, segments: int, seed: int, root: Path
) -> tuple[float, float]:
    """Success rate at target return 1 and training seconds of one DT run."""
    # Memory must hold the whole corridor: 3 tokens (return, state, action) per step.
    memory_tokens = 3 * (args.length + 2) if segments else 3 * args.context
    overrides = [
        "algo=dt",
        "env.id=rlformer/TMaze-v0",
        f"env.kwargs.length={args.length}",
        f"dt.dataset={data}",
        f"dt.context={args.context}",
        "dt.return_scale=1.0",
        f"dt.batch_size={args.batch}",
        f"dt.learning_rate={args.lr}",
        "dt.warmup_steps=200",
        f"dt.train_steps={args.steps}",
        f"dt.log_every={args.steps}",
        f"dt.memory_segments={segments}",
        "dt.core.n_layers=2",
        "dt.core.d_model=64",
        "dt.core.d_ff=128",
        "dt.core.dropout=0.0",
        f"dt.core.memory_length={memory_tokens}",
        "dt.target_returns=[1.0]",
        f"eval.episodes={args.eval_episodes}",
        f"run.seed={seed}",
        f"run.root={root}",
        "run.progress=false",
    ]
    cfg = load_config(None, overrides)
    start = time.perf_counter()
    result = train(cfg)
    seconds = time.perf_counter() - start
    return float(result.evaluation["target_1/success_rate"]), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--length", type=int, default=12, help="T-Maze corridor length")
    parser.add_argument("--context", type=int, default=5, help="K, steps per window")
    parser.add_argument("--episodes", type=int, default=1000, help="episodes in the dataset")
    parser.add_argument("--steps", type=int, default=2000, help="gradient steps per run")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument(
        "--p-correct", type=float, default=0.75, help="share of data episodes that turn right"
    )
    parser.add_argument("--only", choices=["plain", "memory"], help="run one of the two models")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--eval-episodes", type=int, default=100)
    args = parser.parse_args()
    torch.set_num_threads(1)
    segments = -(-(args.length + 2) // args.context)  # windows covering a whole episode
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "tmaze_walks.hdf5"
        share = record_corridor_walks(args.length, args.episodes, 0, data, args.p_correct)
        print(
            f"T-Maze length {args.length}, context K={args.context}; dataset: {args.episodes} "
            f"episodes, {100 * share:.0f}% with return 1; {args.steps} gradient steps per run"
        )
        print(f"{'model':<34} {'seed':>4} {'success @ target 1':>20} {'train s':>9}")
        results: dict[str, list[float]] = {}
        models = {
            "plain": ("plain DT", 0),
            "memory": (f"DT + memory ({segments} windows)", segments),
        }
        for key, (name, n_segments) in models.items():
            if args.only not in (None, key):
                continue
            for seed in range(args.seeds):
                success, seconds = train_and_evaluate(args, data, n_segments, seed, Path(tmp))
                results.setdefault(name, []).append(success)
                print(f"{name:<34} {seed:>4} {100 * success:>19.1f}% {seconds:>9.0f}")
        for name, values in results.items():
            print(f"{name:<34} mean {100 * np.mean(values):>18.1f}%")


if __name__ == "__main__":
    main()
