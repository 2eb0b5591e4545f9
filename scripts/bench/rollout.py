"""Rollout throughput: local vs Ray (1 and 2 workers) vs stable-baselines3 SubprocVecEnv.

Run:
    .venv/bin/python scripts/bench/rollout.py            # CartPole-v1 and Hopper-v5
    .venv/bin/python scripts/bench/rollout.py --quick

Each row collects the same number of env steps with a policy in the loop (action selection on
every step) in this one process, and prints env-steps/s and the ratio to SB3's SubprocVecEnv
driven by an SB3 PPO MlpPolicy. For rlformer, both an MLP policy (same network size as SB3's
default, to compare collection machinery) and the GTrXL policy are measured. "overhead" is the
time per fragment spent outside the workers' own sampling: weight broadcast through the object
store, scheduling and fragment transfer (for the local backend: merging fragments).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import rlformer_envs  # noqa: F401
import torch

from rlformer.config import load_config
from rlformer.rollout.collector import make_collector
from rlformer.training import build_model


def rlformer_rate(
    env_id: str, backend: str, workers: int, envs: int, fragment: int, torso: str, iterations: int
) -> tuple[float, float]:
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
    try:
        collector.collect(model.state_dict(), 0)  # warm-up: actor start, first weights
        start = time.perf_counter()
        overheads = []
        for version in range(1, iterations + 1):
            t0 = time.perf_counter()
            batch = collector.collect(model.state_dict(), version)
            elapsed = time.perf_counter() - t0
            overheads.append(max(elapsed - batch.sample_seconds, 0.0))
        seconds = time.perf_counter() - start
    finally:
        collector.close()
    steps = iterations * workers * envs * fragment
    # In-process workers have no transfer overhead worth reporting.
    overhead = 1e3 * float(np.mean(overheads)) if backend == "ray" else float("nan")
    return steps / seconds, overhead


def sb3_rate(env_id: str, total_envs: int, fragment: int, iterations: int) -> float:
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv

    venv = make_vec_env(env_id, n_envs=total_envs, vec_env_cls=SubprocVecEnv)
    model = PPO("MlpPolicy", venv, n_steps=fragment, device="cpu", verbose=0)
    obs = venv.reset()
    for _ in range(fragment):  # warm-up
        obs, *_ = venv.step(model.predict(obs)[0])
    start = time.perf_counter()
    for _ in range(iterations * fragment):
        action, _ = model.predict(obs)
        obs, *_ = venv.step(action)
    seconds = time.perf_counter() - start
    venv.close()
    return iterations * fragment * total_envs / seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--envs", nargs="*", default=["CartPole-v1", "Hopper-v5"])
    args = parser.parse_args()
    torch.set_num_threads(1)
    iterations = 3 if args.quick else 10
    envs_per_worker, fragment = 8, 128
    for env_id in args.envs:
        sb3 = sb3_rate(env_id, 2 * envs_per_worker, fragment, iterations)
        rows = [("SB3 SubprocVecEnv, 16 envs, PPO MlpPolicy", sb3, float("nan"))]
        for torso in ("mlp", "gtrxl"):
            for backend, workers in (("local", 1), ("ray", 1), ("ray", 2)):
                envs = envs_per_worker * (2 if workers == 1 else 1)
                rate, overhead = rlformer_rate(
                    env_id, backend, workers, envs, fragment, torso, iterations
                )
                label = f"rlformer {backend} {workers}x{envs} envs, {torso} policy"
                rows.append((label, rate, overhead))
        print(f"\n{env_id}: {iterations} fragments of {fragment} steps x 16 envs per row")
        print(f"{'collector':<46} {'steps/s':>9} {'vs SB3':>7} {'overhead ms/fragment':>21}")
        for label, rate, overhead in rows:
            shown = "-" if np.isnan(overhead) else f"{overhead:.1f}"
            print(f"{label:<46} {rate:>9.0f} {rate / sb3:>6.2f}x {shown:>21}")


if __name__ == "__main__":
    main()
