"""Defaults on fully observed Gymnasium tasks: rlformer given only the env id against SB3 PPO.

A new user's first run is ``rlformer train --set env.id=X --set ppo.total_steps=N``; the user
comparing libraries runs ``PPO("MlpPolicy", X).learn(N)``. This script does both, at the same
env-step budget and seeds, and scores every agent on the same evaluation episodes (greedy
actions, seeds disjoint from training), as ``memory_suite.py`` does for the memory tasks:

- ``rlformer``: the defaults (GTrXL torso), with the family preset where one applies (the
  ``mujoco`` preset on Hopper-v5; none on the others);
- ``rlformer_no_preset``: the plain defaults, also where a preset applies (``preset=null``);
- ``rlformer_mlp``: the defaults with the memoryless torso (``model.torso=mlp``);
- ``rlformer_raw_rewards``: the defaults before reward normalisation was switched on;
- ``rlformer_norm_obs``: the defaults plus running observation normalisation, which is off by
  default (SB3 users turn it on for MuJoCo with ``VecNormalize``);
- ``sb3_ppo``: stable-baselines3 PPO with its own defaults (one env, 2,048-step rollouts).

    .venv/bin/python benchmarks/defaults.py --seeds 3    # rows: benchmarks/results/defaults/
    .venv/bin/python benchmarks/defaults.py --report-only

Rows are appended as they finish, so a killed run continues where it stopped.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from memory_suite import (
    Result,
    TrainingLoopClock,
    _done,
    agent_rows,
    sb3_eval_policy,
    training_curve,
)

from rlformer.config import load_config
from rlformer.evaluation.runner import run_policy_episodes
from rlformer.runs.algorithm import FINAL_EVAL_SEED_OFFSET
from rlformer.runs.training import train

TASKS: dict[str, tuple[str, int]] = {  # name: (env id, env steps)
    "cartpole": ("CartPole-v1", 100_000),
    "acrobot": ("Acrobot-v1", 100_000),
    "pendulum": ("Pendulum-v1", 100_000),
    "lunarlander": ("LunarLander-v3", 500_000),
    "hopper": ("Hopper-v5", 500_000),
    "halfcheetah": ("HalfCheetah-v5", 500_000),
    "walker2d": ("Walker2d-v5", 500_000),
}
RLFORMER_AGENTS: dict[str, tuple[str, ...]] = {
    "rlformer": (),
    "rlformer_no_preset": ("preset=null",),
    "rlformer_mlp": ("model.torso=mlp",),
    "rlformer_raw_rewards": ("model.normalize_reward=false",),
    "rlformer_norm_obs": ("model.normalize_obs=true",),
}
AGENTS = (*RLFORMER_AGENTS, "sb3_ppo")


def run_rlformer(task: str, agent: str, seed: int, steps: int, episodes: int, root: Path) -> Result:
    env_id = TASKS[task][0]
    cfg = load_config(
        None,
        [
            f"env.id={env_id}",
            f"ppo.total_steps={steps}",
            *RLFORMER_AGENTS[agent],
            f"run.seed={seed}",
            f"run.root={root}",
            "run.progress=false",
            f"eval.episodes={episodes}",
        ],
    )
    clock = TrainingLoopClock()
    result = train(cfg, on_iteration=clock.tick)
    assert result.evaluation is not None
    curve = training_curve(result.run_dir)
    score = result.evaluation["return_mean"]
    return Result(task, agent, seed, result.env_steps, clock.seconds, score, None, curve)


def run_sb3_ppo(task: str, seed: int, steps: int, episodes: int) -> Result:
    from stable_baselines3 import PPO

    env_id = TASKS[task][0]
    model = PPO("MlpPolicy", env_id, seed=seed, device="cpu")
    torch.set_num_threads(1)
    started = time.perf_counter()
    model.learn(total_timesteps=steps)
    seconds = time.perf_counter() - started
    cfg = load_config(None, [f"env.id={env_id}"])  # the evaluation's env and episode seeds
    env = model.get_env()
    policy = sb3_eval_policy(model, env, env.observation_space)
    results = run_policy_episodes(
        policy, cfg.env, episodes, cfg.eval.num_envs, seed + FINAL_EVAL_SEED_OFFSET
    )
    score = float(np.mean(results.returns))
    return Result(task, "sb3_ppo", seed, model.num_timesteps, seconds, score, None, [])


def report(results: list[Result]) -> None:
    """Per task: one row per agent with the score's mean (95% CI), per seed, and throughput."""
    for task in dict.fromkeys(r.task for r in results):
        rows = [r for r in results if r.task == task]
        print(f"\n{task} ({TASKS[task][0]}, {rows[0].env_steps:,} env steps)")
        print(
            f"  {'agent':22s} {'seeds':>5s} {'mean [95% CI]':>30s} {'per seed':>28s} "
            f"{'steps/s':>8s} {'vs SB3':>7s}"
        )
        for row in agent_rows(rows, AGENTS, "sb3_ppo"):
            s = row.scores
            seeds = ", ".join(f"{r.score:.1f}" for r in row.results)
            print(
                f"  {row.agent:22s} {len(row.results):5d} "
                f"{s.mean:9.1f} [{s.mean_ci[0]:9.1f}, {s.mean_ci[1]:9.1f}] {seeds:>28s} "
                f"{row.steps_per_s:8.0f} {row.ratio}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["cartpole", "acrobot", "pendulum"])
    parser.add_argument("--agents", nargs="+", default=list(AGENTS), choices=list(AGENTS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--steps", type=int, default=None, help="Override every task's budget.")
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/defaults/results.jsonl")
    )
    parser.add_argument("--root", type=Path, default=Path("runs/defaults"))
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    unknown = sorted(set(args.tasks) - set(TASKS))
    if unknown:
        parser.error(f"unknown task(s) {', '.join(unknown)}; choose from {', '.join(TASKS)}")
    torch.set_num_threads(1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    finished = _done(args.out)
    if not args.report_only:
        seen = {(r.task, r.agent, r.seed) for r in finished}
        for task in args.tasks:
            steps = args.steps or TASKS[task][1]
            for seed in range(args.seeds):
                for agent in args.agents:
                    if (task, agent, seed) in seen:
                        continue
                    if agent == "sb3_ppo":
                        result = run_sb3_ppo(task, seed, steps, args.episodes)
                    else:
                        result = run_rlformer(task, agent, seed, steps, args.episodes, args.root)
                    with args.out.open("a") as handle:
                        handle.write(json.dumps(asdict(result)) + "\n")
                    finished.append(result)
                    print(
                        f"{task} {agent} seed {seed}: score {result.score:.1f}, "
                        f"{result.steps_per_s:.0f} steps/s",
                        flush=True,
                    )
    report([r for r in finished if r.task in args.tasks])


if __name__ == "__main__":
    main()
