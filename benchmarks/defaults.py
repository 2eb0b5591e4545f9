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
- ``sb3_ppo``: stable-baselines3 PPO with its own defaults (one env, 2,048-step rollouts);
- ``sb3_ppo_zoo``: SB3 PPO with rl-baselines3-zoo's tuned entry for the task
  (:data:`ZOO_PPO`), what a user who wants the best SB3 PPO starts from, at the zoo's budget.

    .venv/bin/python benchmarks/defaults.py --seeds 3    # rows: benchmarks/results/defaults/
    .venv/bin/python benchmarks/defaults.py --tasks lunarlander hopper --agents sb3_ppo_zoo \
        --steps 1000000 --episodes 100 --shard 0/2   # and 1/2: one job per core
    .venv/bin/python benchmarks/defaults.py --report-only

Rows are appended as they finish, so a killed run continues where it stopped. ``--shard i/n``
takes every n-th run (task, seed, agent) from the i-th, so jobs on separate cores share no run.
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
AGENTS = (*RLFORMER_AGENTS, "sb3_ppo", "sb3_ppo_zoo")

# rl-baselines3-zoo's hyperparams/ppo.yml (DLR-RM/rl-baselines3-zoo 00128b5) for the ids these
# tasks had there (LunarLander-v2, Hopper-v3): both are entries for 1M env steps. ``normalize``
# is VecNormalize of observations and rewards, with the agent's gamma, as the zoo wraps it.
ZOO_PPO: dict[str, dict] = {
    "lunarlander": {
        "n_envs": 16,
        "n_steps": 1024,
        "batch_size": 64,
        "gae_lambda": 0.98,
        "gamma": 0.999,
        "n_epochs": 4,
        "ent_coef": 0.01,
    },
    "hopper": {
        "normalize": True,
        "n_envs": 1,
        "batch_size": 32,
        "n_steps": 512,
        "gamma": 0.999,
        "learning_rate": 9.80828e-05,
        "ent_coef": 0.00229519,
        "clip_range": 0.2,
        "n_epochs": 5,
        "gae_lambda": 0.99,
        "max_grad_norm": 0.7,
        "vf_coef": 0.835671,
        "policy_kwargs": {
            "log_std_init": -2,
            "ortho_init": False,
            "activation_fn": "relu",
            "net_arch": {"pi": [256, 256], "vf": [256, 256]},
        },
    },
}


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
    return Result(
        task, agent, seed, result.env_steps, clock.seconds, score, None, curve, budget=steps
    )


def sb3_ppo(task: str, seed: int, zoo: bool) -> tuple[object, dict]:
    """SB3's PPO on ``task``: its defaults, or (``zoo``) the zoo's entry; with the entry."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    env_id = TASKS[task][0]
    if not zoo:
        return PPO("MlpPolicy", env_id, seed=seed, device="cpu"), {}
    if task not in ZOO_PPO:
        raise SystemExit(f"sb3_ppo_zoo: no rl-baselines3-zoo entry here for {task}")
    entry = dict(ZOO_PPO[task])
    normalize, n_envs = entry.pop("normalize", False), entry.pop("n_envs")
    venv = make_vec_env(env_id, n_envs=n_envs, seed=seed)
    if normalize:
        venv = VecNormalize(venv, gamma=entry["gamma"])
    policy_kwargs = dict(entry.pop("policy_kwargs", {}))
    if policy_kwargs.get("activation_fn") == "relu":
        policy_kwargs["activation_fn"] = torch.nn.ReLU
    model = PPO(
        "MlpPolicy", venv, seed=seed, device="cpu", policy_kwargs=policy_kwargs or None, **entry
    )
    return model, ZOO_PPO[task]


def run_sb3_ppo(task: str, seed: int, steps: int, episodes: int, zoo: bool = False) -> Result:
    env_id = TASKS[task][0]
    model, entry = sb3_ppo(task, seed, zoo)
    torch.set_num_threads(1)
    started = time.perf_counter()
    model.learn(total_timesteps=steps)
    seconds = time.perf_counter() - started
    cfg = load_config(None, [f"env.id={env_id}"])  # the evaluation's env and episode seeds
    env = model.get_env()
    if hasattr(env, "training"):
        env.training = False  # VecNormalize: the evaluation reads its statistics, frozen
    policy = sb3_eval_policy(model, env, env.observation_space)
    results = run_policy_episodes(
        policy, cfg.env, episodes, cfg.eval.num_envs, seed + FINAL_EVAL_SEED_OFFSET
    )
    score = float(np.mean(results.returns))
    agent = "sb3_ppo_zoo" if zoo else "sb3_ppo"
    steps_done = model.num_timesteps
    return Result(
        task, agent, seed, steps_done, seconds, score, None, [], sb3_setup=entry, budget=steps
    )


def budget(row: Result) -> int:
    """The env-step budget a row was asked for (rows without one ran the task's own)."""
    return row.budget if row.budget is not None else TASKS[row.task][1]


def report(results: list[Result]) -> None:
    """Per task and budget: one row per agent with the score's mean (95% CI), per seed, and
    throughput."""
    for task, steps in dict.fromkeys((r.task, budget(r)) for r in results):
        rows = [r for r in results if (r.task, budget(r)) == (task, steps)]
        print(f"\n{task} ({TASKS[task][0]}, {steps:,} env steps)")
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
    parser.add_argument("--shard", default="0/1", help="i/n: every n-th run from the i-th.")
    args = parser.parse_args()
    unknown = sorted(set(args.tasks) - set(TASKS))
    if unknown:
        parser.error(f"unknown task(s) {', '.join(unknown)}; choose from {', '.join(TASKS)}")
    torch.set_num_threads(1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    finished = _done(args.out)
    if not args.report_only:
        seen = {(r.task, r.agent, r.seed, budget(r)) for r in finished}
        index, count = (int(x) for x in args.shard.split("/"))
        runs = [(t, s, a) for t in args.tasks for s in range(args.seeds) for a in args.agents]
        for task, seed, agent in runs[index::count]:
            steps = args.steps or TASKS[task][1]
            if (task, agent, seed, steps) in seen:
                continue
            if agent.startswith("sb3_ppo"):
                zoo = agent == "sb3_ppo_zoo"
                result = run_sb3_ppo(task, seed, steps, args.episodes, zoo)
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
