"""The final weights against ``checkpoints/best.pt`` of the same PPO runs, on the same episodes.

A run trained with ``eval.every`` keeps the weights of its best evaluation during training in
``best.pt``, chosen on episodes of their own. This plays best.pt on exactly the episodes the run's
final evaluation played (``run.seed + FINAL_EVAL_SEED_OFFSET``, ``eval.episodes``, the config's
evaluation envs and action mode), so the two numbers per run differ only in the weights:

    .venv/bin/python benchmarks/best_checkpoint.py runs/cartpole-*

Prints one line per run and the mean over runs of both, with bootstrap 95% CIs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rlformer.algos.ppo.algorithm import load_agent
from rlformer.algos.ppo.evaluation import run_episodes
from rlformer.evaluation.statistics import summarize_scores
from rlformer.runs.algorithm import FINAL_EVAL_SEED_OFFSET


def best_on_final_episodes(run_dir: Path) -> tuple[float, float]:
    """(final evaluation's mean return from eval.json, best.pt's on the same episodes)."""
    final = json.loads((run_dir / "eval.json").read_text())["return_mean"]
    model, cfg, _ = load_agent(run_dir / "checkpoints" / "best.pt")
    results = run_episodes(
        model,
        cfg.env,
        cfg.eval.episodes,
        cfg.eval.num_envs,
        deterministic=cfg.eval.deterministic,
        seed=cfg.run.seed + FINAL_EVAL_SEED_OFFSET,
    )
    return final, results.summary()["return_mean"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories (with eval.every)")
    args = parser.parse_args()
    finals, bests = [], []
    for run_dir in args.runs:
        final, best = best_on_final_episodes(run_dir)
        finals.append(final)
        bests.append(best)
        print(f"{run_dir.name}: final {final:.1f}, best.pt {best:.1f}")
    for name, scores in (("final weights", finals), ("best.pt", bests)):
        summary = summarize_scores(scores)
        print(
            f"{name}: mean {summary.mean:.1f} [{summary.mean_ci[0]:.1f}, "
            f"{summary.mean_ci[1]:.1f}], IQM {summary.iqm:.1f} over {len(scores)} runs"
        )


if __name__ == "__main__":
    main()
