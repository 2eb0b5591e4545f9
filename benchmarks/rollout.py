"""Rollout throughput: local vs Ray (1 and 2 workers) vs stable-baselines3 SubprocVecEnv.

Run:
    .venv/bin/python benchmarks/rollout.py            # CartPole-v1 and Hopper-v5
    .venv/bin/python benchmarks/rollout.py --quick

Every row collects the same number of env steps per round (16 envs x one fragment) with a policy
choosing an action on every step, all in this one run. SB3's row drives a ``SubprocVecEnv`` of 16
env processes with an SB3 PPO ``MlpPolicy`` (``policy.predict`` each step). rlformer is measured
with an MLP policy (SB3's default size, to compare the collection machinery) and with the GTrXL
policy (what training actually runs).

Rows are interleaved: each round times one fragment of every row, and the table reports the
median over rounds, so load from other processes hits all rows alike instead of whichever row
happened to run during it. All collectors are built (and warmed up with one fragment) before
the first round; one embedded Ray serves every Ray row.

"overhead" is the time per ``collect()`` spent outside the workers' own sampling: weight
broadcast through the object store, scheduling and fragment transfer for Ray; copying weights
and merging for the local backend.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import rlformer_envs  # noqa: F401
import torch

from rlformer.algos.ppo.algorithm import build_model
from rlformer.config import load_config
from rlformer.rollout.collector import Collector, make_collector

TOTAL_ENVS = 16


@dataclass
class Row:
    """One collector under test: ``run()`` times one round and returns (seconds, overhead)."""

    label: str
    run: Callable[[], tuple[float, float]]
    close: Callable[[], None]
    seconds: list[float] = field(default_factory=list)
    overheads: list[float] = field(default_factory=list)


def rlformer_row(
    env_id: str, backend: str, workers: int, fragment: int, torso: str
) -> tuple[Row, Collector]:
    envs = TOTAL_ENVS // workers
    cfg = load_config(
        None,
        [
            f"env.id={env_id}",
            f"rollout.backend={backend}",
            f"rollout.num_workers={workers}",
            f"rollout.envs_per_worker={envs}",
            f"rollout.fragment_length={fragment}",
            f"model.torso={torso}",
            "model.core.n_layers=1",
            "model.core.d_model=32",
            "model.core.n_heads=2",
            "model.core.d_ff=64",
            "model.core.memory_length=32",
            "ppo.num_minibatches=1",
            "rollout.worker_cpus=0.5",
        ],
    )
    model = build_model(cfg)
    collector = make_collector(cfg)
    version = [0]
    collector.collect(model.state_dict(), 0)  # warm-up: actor start, first weights

    def run() -> tuple[float, float]:
        version[0] += 1
        start = time.perf_counter()
        batch = collector.collect(model.state_dict(), version[0])
        elapsed = time.perf_counter() - start
        # sample_seconds is the slowest worker's sampling time: with parallel Ray workers, or a
        # single local worker, the rest of the call is pure collection overhead.
        return elapsed, max(elapsed - batch.sample_seconds, 0.0)

    label = f"rlformer {backend} {workers}x{envs} envs, {torso} policy"
    return Row(label, run, collector.close), collector


def sb3_row(env_id: str, fragment: int) -> Row:
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv

    venv = make_vec_env(env_id, n_envs=TOTAL_ENVS, vec_env_cls=SubprocVecEnv)
    model = PPO("MlpPolicy", venv, n_steps=fragment, device="cpu", verbose=0)
    obs = [venv.reset()]

    def run() -> tuple[float, float]:
        start = time.perf_counter()
        for _ in range(fragment):
            action, _ = model.predict(obs[0])
            obs[0], *_ = venv.step(action)
        return time.perf_counter() - start, float("nan")

    run()  # warm-up
    return Row(f"SB3 SubprocVecEnv, {TOTAL_ENVS} envs, PPO MlpPolicy", run, venv.close)


def bench_env(env_id: str, fragment: int, rounds: int) -> None:
    rows = [sb3_row(env_id, fragment)]
    for torso in ("mlp", "gtrxl"):
        for backend, workers in (("local", 1), ("ray", 1), ("ray", 2)):
            rows.append(rlformer_row(env_id, backend, workers, fragment, torso)[0])
    try:
        for _ in range(rounds):
            for row in rows:
                seconds, overhead = row.run()
                row.seconds.append(seconds)
                row.overheads.append(overhead)
    finally:
        for row in rows:
            row.close()
    steps = fragment * TOTAL_ENVS
    rate = {row.label: steps / statistics.median(row.seconds) for row in rows}
    sb3 = rate[rows[0].label]
    print(f"\n{env_id}: median of {rounds} rounds, {fragment} steps x {TOTAL_ENVS} envs per round")
    print(f"{'collector':<46} {'steps/s':>9} {'vs SB3':>7} {'overhead ms/fragment':>21}")
    for row in rows:
        overhead = statistics.median(row.overheads)
        shown = "-" if np.isnan(overhead) else f"{1e3 * overhead:.1f}"
        print(f"{row.label:<46} {rate[row.label]:>9.0f} {rate[row.label] / sb3:>6.2f}x {shown:>21}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="3 rounds instead of 15")
    parser.add_argument("--envs", nargs="*", default=["CartPole-v1", "Hopper-v5"])
    parser.add_argument("--fragment", type=int, default=128, help="steps per env per round")
    args = parser.parse_args()
    torch.set_num_threads(1)
    import ray

    # Six Ray actors exist at once (3 per policy) but only one row runs at a time, so logical
    # CPUs may exceed the physical ones without the measured rows ever competing.
    ray.init(num_cpus=8, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        for env_id in args.envs:
            bench_env(env_id, args.fragment, 3 if args.quick else 15)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
