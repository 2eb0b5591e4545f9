"""The chance floor of a task: mean episode return of uniformly random actions, with a 95% CI.

Scores "at chance" need the chance level measured, not assumed: on POPGym's Battleship and
Concentration uniformly random play scores well above what a greedy policy that has learned
nothing scores (it repeats the same shot or the same two cards).

    .venv/bin/python benchmarks/random_play.py popgym-BattleshipEasy-v0 --imports popgym
    .venv/bin/python benchmarks/random_play.py MinAtar/Breakout-v1 \
        --imports minatar.gym:register_envs --kwargs '{"use_minimal_action_set": false}'

``--imports`` takes what ``env.imports`` takes (modules, or ``module:function`` entries that are
called once) and ``--kwargs`` the env's ``gym.make`` keyword arguments, so the floor is measured
on the env a config trains on.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import gymnasium as gym
import numpy as np

from rlformer.rollout.env_factory import import_env_modules


def random_returns(
    env_id: str, episodes: int, seed: int, kwargs: dict[str, Any] | None = None
) -> np.ndarray:
    """Returns of ``episodes`` episodes of ``action_space.sample()``, episode i seeded
    ``seed + i`` (env and action sampler)."""
    env = gym.make(env_id, **(kwargs or {}))
    returns = np.zeros(episodes)
    for episode in range(episodes):
        env.reset(seed=seed + episode)
        env.action_space.seed(seed + episode)
        done = False
        while not done:
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            returns[episode] += float(reward)
            done = terminated or truncated
    env.close()
    return returns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("env_ids", nargs="+")
    parser.add_argument(
        "--imports", nargs="*", default=[], help="env.imports entries that register the ids"
    )
    parser.add_argument("--kwargs", default="{}", help="gym.make keyword arguments (JSON)")
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1000)
    args = parser.parse_args()
    import_env_modules(args.imports)
    kwargs = json.loads(args.kwargs)
    print("| env | random play, mean [95% CI] | episodes |")
    print("| --- | ---: | ---: |")
    for env_id in args.env_ids:
        returns = random_returns(env_id, args.episodes, args.seed, kwargs)
        half = 1.96 * returns.std(ddof=1) / np.sqrt(len(returns))
        mean = returns.mean()
        print(f"| {env_id} | {mean:.3f} [{mean - half:.3f}, {mean + half:.3f}] | {len(returns)} |")


if __name__ == "__main__":
    main()
