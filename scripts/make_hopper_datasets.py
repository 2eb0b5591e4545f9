"""Make D4RL-style Hopper-v5 datasets: expert, medium and medium-replay, from one SAC run.

Run (full recipe, the D4RL sizes):
    .venv/bin/python scripts/make_hopper_datasets.py --out-dir data/hopper
Smoke run (minutes; tiny, useless data, but every step is exercised):
    .venv/bin/python scripts/make_hopper_datasets.py --out-dir /tmp/hopper --quick

What it does, following how D4RL built its MuJoCo datasets (Fu et al. 2020, section 5):

1. Trains a stable-baselines3 SAC agent on Hopper-v5 (RL Zoo's MuJoCo settings: SB3 defaults with
   10k random warm-up steps) for ``--expert-steps`` steps, evaluating it every ``--eval-every``.
2. The first time an evaluation reaches ``--medium-score`` on D4RL's normalised scale (0 =
   random, 100 = D4RL's expert; 33 is about a third of expert return, D4RL's "medium"), the
   policy is saved as ``sac_medium.zip`` and everything in the replay buffer so far — every
   transition the agent saw while learning up to that level — becomes
   ``hopper-medium-replay.hdf5``.
3. The final policy is ``sac_expert.zip``.
4. ``hopper-expert.hdf5`` and ``hopper-medium.hdf5`` are recorded from those policies with
   ``rlformer collect``'s recorder (``--dataset-steps`` each, sampled SAC actions, 8 envs).

Every file is in the D4RL layout with rlformer metadata and loads with
``rlformer dataset info FILE``; models already present in ``--out-dir`` are reused, so a killed
run can be continued by running the same command again after training finished.

Time on the 2-core development machine (AMD EPYC, torch 1 thread, shared with other work):
estimated from a short measured run, not from a full run — see the "Offline data" section of
docs/benchmarks/dt.md for the measured rates and the estimate.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import rlformer
from rlformer.data import load_dataset
from rlformer.data.d4rl_format import episodes_from_arrays, write_d4rl
from rlformer.data.inspect import format_summary, summarize_dataset
from rlformer.data.recorder import collect_dataset
from rlformer.data.references import normalized_score

ENV_ID = "Hopper-v5"


@dataclass
class Recipe:
    """Sizes of one run (the defaults are D4RL's)."""

    out_dir: Path
    expert_steps: int = 1_000_000
    learning_starts: int = 10_000
    eval_every: int = 10_000
    eval_episodes: int = 5
    medium_score: float = 33.0
    dataset_steps: int = 1_000_000
    seed: int = 0
    device: str = "auto"
    medium_only: bool = False  # stop SAC at the medium level; no expert policy or data


def replay_buffer_dataset(model: Any, path: Path, metadata: dict[str, Any]) -> int:
    """Write the SAC replay buffer (one env) in the D4RL layout; returns transitions written.

    SB3 stores ``dones`` (terminated or truncated) and ``timeouts`` (truncated) per step, and
    actions rescaled to [-1, 1], which are mapped back to the env's range here.
    """
    buffer = model.replay_buffer
    n = buffer.buffer_size if buffer.full else buffer.pos
    if n == 0:
        raise RuntimeError("the replay buffer is empty")
    obs = buffer.observations[:n, 0]  # [n, 11]
    timeouts = buffer.timeouts[:n, 0].astype(bool)
    terminals = buffer.dones[:n, 0].astype(bool) & ~timeouts
    episodes = episodes_from_arrays(
        observations=obs,
        actions=model.policy.unscale_action(buffer.actions[:n, 0]).astype(np.float32),
        rewards=buffer.rewards[:n, 0],
        terminals=terminals,
        timeouts=timeouts,
        next_observations=buffer.next_observations[:n, 0],
    )
    metadata = {**metadata, "episode_returns": [e.episode_return for e in episodes]}
    write_d4rl(path, episodes, metadata)
    return n


def _make_medium_callback(
    recipe: Recipe, log: list[dict[str, float]], timing: dict[str, float]
) -> Any:
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.evaluation import evaluate_policy

    class MediumCheckpoint(BaseCallback):
        """Evaluates every ``eval_every`` steps; saves policy + replay data at medium level."""

        def __init__(self) -> None:
            super().__init__()
            self.eval_env = gym.make(ENV_ID)
            self.eval_env.reset(seed=recipe.seed + 10_000)
            self.medium_saved = (recipe.out_dir / "sac_medium.zip").exists()

        def _on_step(self) -> bool:
            if self.num_timesteps == recipe.learning_starts:
                timing["learning_started"] = time.perf_counter()
                timing["learning_started_cpu"] = time.process_time()
            if self.num_timesteps % recipe.eval_every:
                return True
            mean, _ = evaluate_policy(
                self.model, self.eval_env, n_eval_episodes=recipe.eval_episodes, warn=False
            )
            score = normalized_score(float(mean), ENV_ID)
            assert score is not None
            log.append({"steps": self.num_timesteps, "return": float(mean), "score": score})
            print(f"step {self.num_timesteps}: return {mean:.1f} (D4RL score {score:.1f})")
            if not self.medium_saved and score >= recipe.medium_score:
                self.model.save(recipe.out_dir / "sac_medium.zip")
                n = replay_buffer_dataset(
                    self.model,
                    recipe.out_dir / "hopper-medium-replay.hdf5",
                    _metadata(recipe, "sac replay buffer up to medium", self.num_timesteps),
                )
                print(f"medium level reached: saved sac_medium.zip and {n} replay transitions")
                self.medium_saved = True
                return not recipe.medium_only  # False ends SAC's training here
            return True

    return MediumCheckpoint()


def _metadata(recipe: Recipe, policy: str, train_steps: int) -> dict[str, Any]:
    return {
        "env_id": ENV_ID,
        "policy": policy,
        "seed": recipe.seed,
        "sac_train_steps": train_steps,
        "rlformer_version": rlformer.__version__,
        "recipe": "scripts/make_hopper_datasets.py",
    }


def train(recipe: Recipe) -> dict[str, float]:
    """Train SAC to expert level, saving the medium policy and replay data on the way."""
    from stable_baselines3 import SAC

    log: list[dict[str, float]] = []
    model = SAC(
        "MlpPolicy",
        gym.make(ENV_ID),
        learning_starts=recipe.learning_starts,
        seed=recipe.seed,
        device=recipe.device,
        verbose=0,
    )
    timing: dict[str, float] = {}
    started, started_cpu = time.perf_counter(), time.process_time()
    model.learn(recipe.expert_steps, callback=_make_medium_callback(recipe, log, timing))
    ended, ended_cpu = time.perf_counter(), time.process_time()
    trained_steps = int(model.num_timesteps)
    if not recipe.medium_only:
        model.save(recipe.out_dir / "sac_expert.zip")
    if not (recipe.out_dir / "sac_medium.zip").exists():
        # Never reached the medium level: keep the whole run's buffer, and say so.
        print(f"warning: no evaluation reached D4RL score {recipe.medium_score}; medium = expert")
        model.save(recipe.out_dir / "sac_medium.zip")
        replay_buffer_dataset(
            model,
            recipe.out_dir / "hopper-medium-replay.hdf5",
            _metadata(
                recipe, "sac replay buffer (medium level never reached)", recipe.expert_steps
            ),
        )
    (recipe.out_dir / "sac_evaluations.json").write_text(json.dumps(log, indent=1))
    learning_steps = trained_steps - recipe.learning_starts
    learning = ended - timing.get("learning_started", started)
    learning_cpu = ended_cpu - timing.get("learning_started_cpu", started_cpu)
    return {
        "train_s": ended - started,
        "warmup_s": timing.get("learning_started", ended) - started,
        # Env steps with one gradient step each, evaluations included: what the full run costs.
        # Per CPU second as well, which does not depend on other work sharing the machine.
        "learning_steps_per_s": learning_steps / learning,
        "learning_steps_per_cpu_s": learning_steps / learning_cpu,
    }


def record(recipe: Recipe, level: str) -> float:
    """Record ``hopper-<level>.hdf5`` from ``sac_<level>.zip``; returns seconds taken."""
    started = time.perf_counter()
    collect_dataset(
        f"sb3:{recipe.out_dir / f'sac_{level}.zip'}",
        ENV_ID,
        recipe.dataset_steps,
        recipe.out_dir / f"hopper-{level}.hdf5",
        seed=recipe.seed + (1 if level == "expert" else 2),
        num_envs=8,
        deterministic=False,
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=Path("data/hopper"))
    parser.add_argument("--expert-steps", type=int, default=Recipe.expert_steps)
    parser.add_argument("--learning-starts", type=int, default=Recipe.learning_starts)
    parser.add_argument("--eval-every", type=int, default=Recipe.eval_every)
    parser.add_argument("--eval-episodes", type=int, default=Recipe.eval_episodes)
    parser.add_argument("--medium-score", type=float, default=Recipe.medium_score)
    parser.add_argument("--dataset-steps", type=int, default=Recipe.dataset_steps)
    parser.add_argument("--seed", type=int, default=Recipe.seed)
    parser.add_argument("--device", default=Recipe.device, help="SAC device: auto | cpu | cuda")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    parser.add_argument(
        "--medium-only",
        action="store_true",
        help="stop SAC at the medium level and write only hopper-medium and medium-replay",
    )
    args = parser.parse_args()
    if args.quick:
        args.expert_steps, args.learning_starts, args.eval_every = 3_000, 1_000, 1_000
        args.eval_episodes, args.dataset_steps, args.medium_score = 2, 2_000, 0.0
    recipe = Recipe(
        args.out_dir,
        args.expert_steps,
        args.learning_starts,
        args.eval_every,
        args.eval_episodes,
        args.medium_score,
        args.dataset_steps,
        args.seed,
        args.device,
        args.medium_only,
    )
    torch.set_num_threads(1)
    recipe.out_dir.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    levels = ("medium",) if recipe.medium_only else ("expert", "medium")
    if (recipe.out_dir / f"sac_{levels[0]}.zip").exists():
        print(f"sac_{levels[0]}.zip exists: reusing the trained policies")
    else:
        timings |= train(recipe)
    for level in levels:
        timings[f"record_{level}_s"] = record(recipe, level)
    for name in (*levels, "medium-replay"):
        dataset = load_dataset(recipe.out_dir / f"hopper-{name}.hdf5")
        print("\n" + format_summary(summarize_dataset(dataset)))
    print("\n" + json.dumps(timings, indent=1))
    (recipe.out_dir / "timings.json").write_text(json.dumps(timings, indent=1))


if __name__ == "__main__":
    main()
