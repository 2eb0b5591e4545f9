"""GTrXL-PPO vs stable-baselines3 PPO (MLP) vs sb3-contrib RecurrentPPO (LSTM), same env steps.

Run:
    .venv/bin/python benchmarks/ppo_memory.py                  # T-Maze lengths + POMDP tasks
    .venv/bin/python benchmarks/ppo_memory.py --quick          # a short smoke run
    .venv/bin/python benchmarks/ppo_memory.py --tasks tmaze-100 --steps 300000

For every task, the three agents train in this one process, one after another, with the same
number of vector envs, rollout length, learning rate, epochs and minibatches, then each is
evaluated for 100 deterministic episodes. Printed per task: success rate (T-Maze) or mean return,
wall-clock seconds, env-steps/s including updates, and the throughput ratio to RecurrentPPO.
Results are also written as JSON (``--out``).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import rlformer_envs  # noqa: F401  (registers rlformer/*)
import torch

from rlformer.config import load_config
from rlformer.runs.training import train


@dataclass
class Task:
    """One benchmark task: env, budget and the rlformer core size that covers its memory."""

    name: str
    env_id: str
    env_kwargs: dict[str, Any]
    steps: int
    memory_length: int
    n_layers: int = 1
    metric: str = "success_rate"


def tasks(quick: bool) -> dict[str, Task]:
    scale = 0.2 if quick else 1.0

    def s(n: int) -> int:
        return int(n * scale)

    # One attention layer whose window M covers the corridor: memory is detached between
    # fragments, so a cue relayed through a lower layer's memory would receive no gradient.
    return {
        "tmaze-10": Task("tmaze-10", "rlformer/TMaze-v0", {"length": 10}, s(60_000), 16),
        "tmaze-50": Task("tmaze-50", "rlformer/TMaze-v0", {"length": 50}, s(150_000), 64),
        "tmaze-100": Task("tmaze-100", "rlformer/TMaze-v0", {"length": 100}, s(300_000), 128),
        "tmaze-250": Task("tmaze-250", "rlformer/TMaze-v0", {"length": 250}, s(600_000), 256),
        "cartpole-novel": Task(
            "cartpole-novel", "rlformer/CartPoleNoVel-v0", {}, s(150_000), 16, metric="return"
        ),
        "pendulum-novel": Task(
            "pendulum-novel", "rlformer/PendulumNoVel-v0", {}, s(300_000), 16, metric="return"
        ),
    }


@dataclass
class Result:
    agent: str
    task: str
    env_steps: int
    seconds: float
    success_rate: float | None
    return_mean: float

    @property
    def steps_per_s(self) -> float:
        return self.env_steps / self.seconds


NUM_ENVS, FRAGMENT, LR, EPOCHS, MINIBATCHES = 16, 64, 5e-4, 4, 4


def run_rlformer(task: Task, seed: int, root: Path) -> Result:
    overrides = [
        "preset=null",  # the shared settings below, not the tuned per-task presets
        f"env.id={task.env_id}",
        f"env.kwargs={json.dumps(task.env_kwargs)}",
        f"run.root={root}",
        f"run.name=bench-{task.name}",
        f"run.seed={seed}",
        "run.progress=false",
        "run.checkpoint_every=1000",
        f"rollout.envs_per_worker={NUM_ENVS}",
        f"rollout.fragment_length={FRAGMENT}",
        f"model.core.n_layers={task.n_layers}",
        "model.core.d_model=32",
        "model.core.n_heads=2",
        "model.core.d_ff=64",
        f"model.core.memory_length={task.memory_length}",
        f"ppo.total_steps={task.steps}",
        f"ppo.learning_rate={LR}",
        f"ppo.update_epochs={EPOCHS}",
        f"ppo.num_minibatches={MINIBATCHES}",
        "model.normalize_reward=false",  # as its figures were measured (the default since is on)
        "eval.episodes=100",
    ]
    if task.env_id == "rlformer/PendulumNoVel-v0":
        overrides += ["ppo.gamma=0.9", "ppo.ent_coef=0.0", "ppo.learning_rate=1e-3"]
    cfg = load_config(None, overrides)
    start = time.perf_counter()
    result = train(cfg)
    seconds = time.perf_counter() - start
    assert result.evaluation is not None
    return Result(
        "rlformer GTrXL-PPO",
        task.name,
        result.env_steps,
        seconds,
        result.evaluation.get("success_rate"),
        result.evaluation["return_mean"],
    )


def run_sb3(task: Task, seed: int, recurrent: bool) -> Result:
    from sb3_contrib import RecurrentPPO
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    venv = make_vec_env(task.env_id, n_envs=NUM_ENVS, env_kwargs=task.env_kwargs, seed=seed)
    common = dict(
        n_steps=FRAGMENT,
        batch_size=NUM_ENVS * FRAGMENT // MINIBATCHES,
        n_epochs=EPOCHS,
        learning_rate=lambda progress: LR * progress,
        seed=seed,
        device="cpu",
        verbose=0,
        ent_coef=0.01,
        gamma=0.99,
    )
    if task.env_id == "rlformer/PendulumNoVel-v0":
        common.update(gamma=0.9, ent_coef=0.0, learning_rate=lambda progress: 1e-3 * progress)
    if recurrent:
        model = RecurrentPPO("MlpLstmPolicy", venv, **common)
        name = "sb3-contrib RecurrentPPO (LSTM)"
    else:
        model = PPO("MlpPolicy", venv, **common)
        name = "stable-baselines3 PPO (MLP)"
    start = time.perf_counter()
    model.learn(task.steps)
    seconds = time.perf_counter() - start
    returns, successes = evaluate_sb3(model, task, seed + 1_000_000, recurrent)
    return Result(
        name,
        task.name,
        int(model.num_timesteps),
        seconds,
        float(np.mean(successes)) if successes else None,
        float(np.mean(returns)),
    )


def evaluate_sb3(
    model: Any, task: Task, seed: int, recurrent: bool
) -> tuple[list[float], list[float]]:
    """100 deterministic episodes, memory reset per episode, success read from final infos."""
    from stable_baselines3.common.env_util import make_vec_env

    venv = make_vec_env(task.env_id, n_envs=10, env_kwargs=task.env_kwargs, seed=seed)
    obs = venv.reset()
    state, starts = None, np.ones(10, dtype=bool)
    returns, successes, running = [], [], np.zeros(10)
    while len(returns) < 100:
        action, state = model.predict(obs, state=state, episode_start=starts, deterministic=True)
        obs, reward, done, infos = venv.step(action)
        running += reward
        for i in np.flatnonzero(done):
            returns.append(float(running[i]))
            if "is_success" in infos[i]:
                successes.append(float(infos[i]["is_success"]))
            running[i] = 0.0
        starts = done
    return returns[:100], successes[:100]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", nargs="*", default=None, help="subset of task names")
    parser.add_argument("--steps", type=int, default=None, help="override every task's budget")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--agents", nargs="*", default=["rlformer", "ppo", "recurrent"])
    parser.add_argument("--out", type=Path, default=Path("runs/bench_ppo_memory.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    available = tasks(args.quick)
    chosen = args.tasks or list(available)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    results: list[Result] = []
    for name in chosen:
        task = available[name]
        if args.steps:
            task.steps = args.steps
        runners = {
            "rlformer": lambda t=task: run_rlformer(t, args.seed, args.out.parent),
            "ppo": lambda t=task: run_sb3(t, args.seed, recurrent=False),
            "recurrent": lambda t=task: run_sb3(t, args.seed, recurrent=True),
        }
        row = [runners[a]() for a in args.agents]
        results += row
        print_task(task, row)
        args.out.write_text(
            json.dumps([asdict(r) | {"steps_per_s": r.steps_per_s} for r in results], indent=2)
        )


def print_task(task: Task, rows: list[Result]) -> None:
    lstm = next((r for r in rows if "Recurrent" in r.agent), None)
    metric = "success" if task.metric == "success_rate" else "return"
    print(f"\n{task.name}: {task.env_id} {task.env_kwargs}, {task.steps} env steps")
    print(f"{'agent':<34} {metric:>9} {'seconds':>9} {'steps/s':>9} {'vs LSTM':>8}")
    for r in rows:
        score = r.success_rate if task.metric == "success_rate" else r.return_mean
        ratio = f"{r.steps_per_s / lstm.steps_per_s:.2f}x" if lstm else "-"
        print(f"{r.agent:<34} {score:>9.2f} {r.seconds:>9.1f} {r.steps_per_s:>9.0f} {ratio:>8}")


if __name__ == "__main__":
    main()
