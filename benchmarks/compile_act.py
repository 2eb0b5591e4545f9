"""The workers' policy step compiled (``rollout.compile_act``) against eager, fragment by fragment.

Run:
    .venv/bin/python benchmarks/compile_act.py                       # three POPGym tasks
    .venv/bin/python benchmarks/compile_act.py --tasks popgym_minesweeper --rounds 20

Per task config (``configs/memory/<name>.yaml``, its preset's rollout shape), two rollout workers
with the same seed and weights, one compiled and one eager, sample fragments in turns: each round
times one fragment of each, and the table reports the medians and the per-round ratios, so that
load from elsewhere hits both alike. The compiled worker's first fragments, which build its
graphs, are timed apart ("graph building") and left out of the rounds.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from rlformer.algos.ppo.algorithm import build_model
from rlformer.config import load_config
from rlformer.rollout.worker import RolloutWorker

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "memory"
DEFAULT_TASKS = ("popgym_position_only_pendulum", "popgym_minesweeper", "popgym_autoencode")
WARMUP_FRAGMENTS = 4  # episode starts, carried memory and final-observation rows all seen


def _timed_fragment(worker: RolloutWorker) -> float:
    start = time.perf_counter()
    worker.sample()
    return time.perf_counter() - start


def bench_task(name: str, rounds: int) -> None:
    cfg = load_config(CONFIGS / f"{name}.yaml", [])
    weights = build_model(cfg).state_dict()
    rollout = cfg.rollout
    workers = {
        flag: RolloutWorker(
            cfg.env,
            cfg.model,
            rollout.envs_per_worker,
            rollout.fragment_length,
            cfg.run.seed,
            compile_act=flag,
        )
        for flag in (False, True)
    }
    for worker in workers.values():
        worker.set_weights(weights, 0)
    building = sum(_timed_fragment(workers[True]) for _ in range(WARMUP_FRAGMENTS))
    for _ in range(WARMUP_FRAGMENTS):
        workers[False].sample()
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(rounds):
        for flag in (True, False):
            times[flag].append(_timed_fragment(workers[flag]))
    for worker in workers.values():
        worker.close()
    ratios = sorted(e / c for c, e in zip(times[True], times[False], strict=True))
    shape = f"{rollout.envs_per_worker} x {rollout.fragment_length}"
    print(
        f"{name} ({shape}): compiled {1e3 * statistics.median(times[True]):.0f} ms, "
        f"eager {1e3 * statistics.median(times[False]):.0f} ms per fragment; eager / compiled "
        f"median {statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f}x over "
        f"{rounds} rounds); graph building and {WARMUP_FRAGMENTS} fragments {building:.1f} s",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", nargs="+", default=list(DEFAULT_TASKS))
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)
    for name in args.tasks:
        bench_task(name, args.rounds)


if __name__ == "__main__":
    main()
