"""Reference scores for POPGym HigherLowerEasy: the best rule without memory and card counting.

Plays the real env (no learning) so the memory suite's HigherLower numbers have a yardstick:
a policy below the memoryless rule has not even learned the part of the task that needs no
memory.

    .venv/bin/python scripts/bench/higher_lower_bounds.py --episodes 2000
"""

from __future__ import annotations

import argparse

import numpy as np
from popgym.envs.higher_lower import HigherLowerEasy

RANKS = 13
GUESS_HIGHER, GUESS_LOWER = 0, 1


def play(episodes: int, count_cards: bool, seed: int) -> float:
    """Mean episode return of the rank rule (``count_cards=False``) or of card counting."""
    env = HigherLowerEasy()
    returns = []
    for episode in range(episodes):
        card, _ = env.reset(seed=seed + episode)
        left = np.full(RANKS, 4 * env.num_decks)  # cards of each rank still in the deck
        left[card] -= 1
        total, done = 0.0, False
        while not done:
            if count_cards:
                higher = left[card + 1 :].sum() >= left[:card].sum()
            else:
                higher = card <= RANKS // 2
            action = GUESS_HIGHER if higher else GUESS_LOWER
            card, reward, terminated, truncated, _ = env.step(action)
            left[card] -= 1
            total += reward
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"memoryless rank rule: {play(args.episodes, False, args.seed):.3f}")
    print(f"card counting:        {play(args.episodes, True, args.seed):.3f}")


if __name__ == "__main__":
    main()
