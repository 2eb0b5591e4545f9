"""Reference scores for POPGym HigherLowerEasy: the best rule without memory and card counting.

Plays the real env (no learning) so the memory suite's HigherLower numbers have a yardstick:
a policy below the memoryless rule has not even learned the part of the task that needs no
memory.

    .venv/bin/python benchmarks/higher_lower_bounds.py --episodes 2000

``--eval-seeds 0 1 2`` also plays the memoryless rule on exactly the episodes the memory suite
scores every agent on (training seed + ``FINAL_EVAL_SEED_OFFSET``, the config's evaluation envs):
the deck alone moves a 100-episode score by about 0.015, so a paired yardstick is the fair one.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from popgym.envs.higher_lower import HigherLowerEasy

from rlformer.config import load_config
from rlformer.evaluation.runner import run_policy_episodes
from rlformer.policies import PolicyInfo
from rlformer.runs.algorithm import FINAL_EVAL_SEED_OFFSET

CONFIG = Path(__file__).resolve().parents[1] / "configs/memory/popgym_higher_lower.yaml"

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


class RankRule:
    """The memoryless rule as a policy: guess "higher" up to the middle rank (no state)."""

    info = PolicyInfo("rank rule", "rule")
    observation_space = action_space = None

    def initial_state(self, n: int, target_return: float | None = None) -> None:
        return None

    def act(self, obs: tuple[np.ndarray, np.ndarray], state: None, *args, **kwargs) -> tuple:  # noqa: ANN002, ANN003
        cards = obs[0]  # PreviousAction's observation: (card, previous action)
        return np.where(cards <= RANKS // 2, GUESS_HIGHER, GUESS_LOWER), None


def rule_on_suite_episodes(training_seed: int, episodes: int) -> float:
    """Mean return of the rule on the memory suite's evaluation episodes of one training seed."""
    cfg = load_config(CONFIG, [])
    seed = training_seed + FINAL_EVAL_SEED_OFFSET
    results = run_policy_episodes(RankRule(), cfg.env, episodes, cfg.eval.num_envs, seed)
    return float(np.mean(results.returns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--eval-seeds", type=int, nargs="*", default=[], help="training seeds of the suite's runs"
    )
    parser.add_argument("--eval-episodes", type=int, default=100)
    args = parser.parse_args()
    print(f"memoryless rank rule: {play(args.episodes, False, args.seed):.3f}")
    print(f"card counting:        {play(args.episodes, True, args.seed):.3f}")
    for seed in args.eval_seeds:
        score = rule_on_suite_episodes(seed, args.eval_episodes)
        print(f"memoryless rule, the suite's evaluation episodes of seed {seed}: {score:.4f}")


if __name__ == "__main__":
    main()
