"""The chance floor of a task: mean episode return of uniformly random actions, with a 95% CI.

Scores "at chance" need the chance level measured, not assumed: on POPGym's Battleship and
Concentration uniformly random play scores well above what a greedy policy that has learned
nothing scores (it repeats the same shot or the same two cards).

    .venv/bin/python scripts/bench/random_play.py popgym-BattleshipEasy-v0 --imports popgym
"""

from __future__ import annotations

import argparse
import importlib

import gymnasium as gym
import numpy as np


def random_returns(env_id: str, episodes: int, seed: int) -> np.ndarray:
    """Returns of ``episodes`` episodes of ``action_space.sample()``, episode i seeded
    ``seed + i`` (env and action sampler)."""
    env = gym.make(env_id)
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
    parser.add_argument("--imports", nargs="*", default=[], help="modules that register ids")
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1000)
    args = parser.parse_args()
    for module in args.imports:
        importlib.import_module(module)
    print("| env | random play, mean [95% CI] | episodes |")
    print("| --- | ---: | ---: |")
    for env_id in args.env_ids:
        returns = random_returns(env_id, args.episodes, args.seed)
        half = 1.96 * returns.std(ddof=1) / np.sqrt(len(returns))
        mean = returns.mean()
        print(f"| {env_id} | {mean:.3f} [{mean - half:.3f}, {mean + half:.3f}] | {len(returns)} |")


if __name__ == "__main__":
    main()
