"""Why an agent scores what it scores on POPGym CountRecall: its answers against the true counts.

CountRecallEasy deals the 52 cards of one deck (two colours); at every step the agent names how
many cards of the queried colour it has been dealt so far (0-26) and earns +1/51 for the exact
count, -1/51 otherwise. A return of -0.75 is 12.5% exact answers. Where those answers are right
tells the mechanism apart: an agent that counts keeps its accuracy as the counts grow, one that
estimates (a fraction of the cards seen, scaled by a guess of the episode's length) is exact
only while counts are small, and one that only keeps time answers the same at a given step
whatever the cards were.

For each run directory (or checkpoint) it plays ``--episodes`` greedy episodes and prints
exact-answer rates and mean absolute errors by true count, how often the agent gives its usual
answer for that step (1.0: a clock, not a counter), and, as a reference computed from the same
episodes, the exact rate of the best answer that knows only the step number (the most frequent
true count at that step, fitted on those episodes).

    .venv/bin/python benchmarks/count_recall_probe.py RUN_DIR [RUN_DIR ...] --episodes 100
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import torch

from rlformer.policies.registry import load_policy
from rlformer.rollout.env_factory import env_from_config

BUCKETS = ((0, 2), (3, 5), (6, 8), (9, 12), (13, 17), (18, 26))


def play(spec: str, episodes: int, seed: int) -> list[tuple[int, int, int]]:
    """``(step, true count, answer)`` for every step of ``episodes`` greedy episodes."""
    policy = load_policy(spec)
    if policy.info.training_env is None:
        raise SystemExit(f"{spec}: the policy does not name its training env")
    env = env_from_config(policy.info.training_env)
    game = env.unwrapped
    records = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        if not hasattr(game, "counts") or not hasattr(game, "query"):  # set by reset()
            raise SystemExit(f"{spec}: trained on {policy.info.training_env.id}, not CountRecall")
        state = policy.initial_state(1)
        start, done, step = True, False, 0
        while not done:
            truth = int(game.counts[game.query])  # what this step's answer is scored against
            batch = obs[None] if isinstance(obs, np.ndarray) else _batched(obs)
            action, state = policy.act(batch, state, np.array([start]), deterministic=True)
            answer = int(np.asarray(action).reshape(-1)[0])
            obs, _, terminated, truncated, _ = env.step(answer)
            records.append((step, truth, answer))
            start, done, step = False, terminated or truncated, step + 1
    env.close()
    return records


def _batched(obs: object) -> object:
    """A Tuple/Dict observation with a batch axis of one on every leaf."""
    if isinstance(obs, dict):
        return {key: _batched(value) for key, value in obs.items()}
    if isinstance(obs, tuple):
        return tuple(_batched(value) for value in obs)
    return np.asarray(obs)[None]


def summarise(records: list[tuple[int, int, int]]) -> dict[str, object]:
    """Exact rates and mean absolute errors per true-count bucket, and the step-only reference."""
    by_step: dict[int, Counter[int]] = defaultdict(Counter)
    for step, truth, _ in records:
        by_step[step][truth] += 1
    step_guess = {step: counts.most_common(1)[0][0] for step, counts in by_step.items()}
    rows = []
    for low, high in BUCKETS:
        inside = [(s, t, a) for s, t, a in records if low <= t <= high]
        if not inside:
            continue
        rows.append(
            {
                "counts": f"{low}-{high}",
                "steps": len(inside),
                "exact": float(np.mean([a == t for _, t, a in inside])),
                "abs_error": float(np.mean([abs(a - t) for _, t, a in inside])),
                "step_only_exact": float(np.mean([step_guess[s] == t for s, t, _ in inside])),
            }
        )
    exact = float(np.mean([a == t for _, t, a in records]))
    reference = float(np.mean([step_guess[s] == t for s, t, _ in records]))
    return {
        "exact": exact,
        "step_only_exact": reference,
        "clock_like": clock_likeness(records),
        "buckets": rows,
    }


def clock_likeness(records: list[tuple[int, int, int]]) -> float:
    """Share of answers equal to the agent's own most frequent answer at that step: 1.0 means
    it answers by the step number alone, whatever the cards were."""
    answers: dict[int, Counter[int]] = defaultdict(Counter)
    for step, _, answer in records:
        answers[step][answer] += 1
    modal = sum(counts.most_common(1)[0][1] for counts in answers.values())
    return modal / len(records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="run directories or checkpoints")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=10_000)
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = {}
    for spec in args.runs:
        summary = summarise(play(spec, args.episodes, args.seed))
        results[spec] = summary
        print(
            f"\n{spec}: exact {summary['exact']:.3f}, answers by step alone "
            f"{summary['clock_like']:.3f} (best step-only answer: exact "
            f"{summary['step_only_exact']:.3f})"
        )
        print("| true count | steps | exact | mean abs. error | step-only exact |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for row in summary["buckets"]:
            print(
                f"| {row['counts']} | {row['steps']} | {row['exact']:.3f} | "
                f"{row['abs_error']:.2f} | {row['step_only_exact']:.3f} |"
            )
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
