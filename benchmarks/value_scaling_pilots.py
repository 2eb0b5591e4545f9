"""Pilots of ``model.value_scaling``: which choice learns across reward scales and densities.

Each run is what a new user types (the env id, ``preset: auto``) plus one
``model.value_scaling`` choice and a seed, on four kinds of reward:

- ``pendulum``: dense, small per-step rewards (POPGym NoisyPositionOnlyPendulumEasy);
- ``tmaze100``: sparse, one reward at the end (the passive T-Maze, corridor 100; at corridor 50
  the plain defaults already succeed every time in 200k steps);
- ``countrecall``: a card game (POPGym CountRecallEasy);
- ``breakout``: MinAtar Breakout, +1 per brick (with ``model.cnn=minatar``, which the env's
  10x10 frames ask for).

One JSONL row per finished run: task, choice, seed, env steps, the training return (mean of the
last 10% of the episodes finished while training, actions sampled), the final evaluation's
mean return and the command. Rows already in the file are skipped, so a killed script
continues where it stopped (the run in progress starts again). Every (task, choice) gets seed 0
before any gets seed 1.

    .venv/bin/python benchmarks/value_scaling_pilots.py   # rows: benchmarks/results/value_scaling/
    .venv/bin/python benchmarks/value_scaling_pilots.py --report-only --markdown
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from memory_suite import CODE_VERSION, TrainingLoopClock

from rlformer.algos.ppo.learner import PPOLearner
from rlformer.config import load_config
from rlformer.runs.training import train


@dataclass(frozen=True)
class Task:
    env_id: str
    steps: int
    extra: tuple[str, ...] = ()


TASKS: dict[str, Task] = {
    "pendulum": Task("popgym-NoisyPositionOnlyPendulumEasy-v0", 300_000),
    "tmaze100": Task("rlformer/TMaze-v0", 200_000, ("env.kwargs.length=100",)),
    "countrecall": Task("popgym-CountRecallEasy-v0", 200_000),
    # 1,700 env steps/s measured on one core: 150k steps is about 90 s of training.
    "breakout": Task(
        "MinAtar/Breakout-v1",
        150_000,
        ("env.imports=[minatar.gym:register_envs]", "model.cnn=minatar"),
    ),
}
CHOICES = ("none", "return_std", "percentile", "symlog", "symlog_percentile", "popart")
EVAL_EPISODES = 20


@dataclass
class Row:
    task: str
    choice: str
    seed: int
    steps: int
    train_return: float  # mean of the last 10% of training episodes
    train_episodes: int
    eval_return: float | None
    seconds: float
    command: str
    commit: str | None
    budget: int = 0  # ppo.total_steps asked for (steps: what ran, whole iterations)


class EpisodeRecorder:
    """The returns of every episode the learner's fragments finished, in order."""

    def __init__(self) -> None:
        self.returns: list[float] = []
        self._update = PPOLearner.update

    def __enter__(self) -> EpisodeRecorder:
        recorder, update = self, self._update

        def recording(learner: PPOLearner, fragment):  # type: ignore[no-untyped-def]
            recorder.returns.extend(float(r) for r in fragment.episode_returns)
            return update(learner, fragment)

        PPOLearner.update = recording  # type: ignore[method-assign]
        return self

    def __exit__(self, *_: object) -> None:
        PPOLearner.update = self._update  # type: ignore[method-assign]


def overrides(task: str, choice: str, seed: int, steps: int) -> list[str]:
    spec = TASKS[task]
    return [
        f"env.id={spec.env_id}",
        *spec.extra,
        f"model.value_scaling={choice}",
        f"run.seed={seed}",
        f"ppo.total_steps={steps}",
    ]


def run_one(task: str, choice: str, seed: int, steps: int, root: Path) -> Row:
    user = overrides(task, choice, seed, steps)
    command = "rlformer train " + " ".join(f"--set '{item}'" for item in user)
    cfg = load_config(
        None,
        [
            *user,
            f"run.root={root}",
            f"run.name={task}-{choice}-s{seed}",
            "run.progress=false",
            f"eval.episodes={EVAL_EPISODES}",
        ],
    )
    clock = TrainingLoopClock()
    with EpisodeRecorder() as episodes:
        result = train(cfg, on_iteration=clock.tick)
    returns = episodes.returns
    last = returns[-max(1, len(returns) // 10) :]
    evaluation = None if result.evaluation is None else float(result.evaluation["return_mean"])
    return Row(
        task,
        choice,
        seed,
        int(result.env_steps),
        float(np.mean(last)) if last else float("nan"),
        len(returns),
        evaluation,
        clock.seconds,
        command,
        CODE_VERSION,
        steps,
    )


def read_rows(out: Path) -> list[Row]:
    if not out.exists():
        return []
    rows = [Row(**json.loads(line)) for line in out.read_text().splitlines() if line.strip()]
    for row in rows:  # the first rows were written before the budget was
        if not row.budget and row.task in TASKS:
            row.budget = TASKS[row.task].steps
    return rows


def report(rows: list[Row]) -> None:
    """Per task and choice: the mean over seeds, then each seed's (training; evaluation)."""
    for task in dict.fromkeys(r.task for r in rows):
        print(f"\n{task} ({TASKS[task].env_id if task in TASKS else 'no longer run'})")
        for choice in CHOICES:
            mine = sorted((r for r in rows if r.task == task and r.choice == choice), key=_seed)
            if not mine:
                continue
            train_mean = statistics.mean(r.train_return for r in mine)
            evals = [r.eval_return for r in mine if r.eval_return is not None]
            eval_mean = statistics.mean(evals) if evals else float("nan")
            per_seed = ", ".join(
                f"s{r.seed}: {r.train_return:.3f} / {r.eval_return:.3f}" for r in mine
            )
            print(
                f"  {choice:18s} train {train_mean:8.3f}  eval {eval_mean:8.3f}  "
                f"({per_seed}; {mine[0].steps:,} steps)"
            )


def markdown(rows: list[Row]) -> None:
    """The docs' table: one line per task and choice, the mean over seeds of the training and
    the evaluation return, each seed's beside it."""
    print(
        "| task | env steps | `model.value_scaling` | training return | per seed "
        "| evaluation | per seed |"
    )
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: |")
    for task in TASKS:
        for choice in CHOICES:
            runs = sorted((r for r in rows if (r.task, r.choice) == (task, choice)), key=_seed)
            if not runs:
                print(f"| {task} | | `{choice}` | not run | | | |")
                continue
            evals = [r.eval_return for r in runs if r.eval_return is not None]
            print(
                f"| {task} | {runs[0].steps:,} | `{choice}` "
                f"| {statistics.mean(r.train_return for r in runs):.3f} "
                f"| {' / '.join(f'{r.train_return:.3f}' for r in runs)} "
                f"| {statistics.mean(evals) if evals else float('nan'):.3f} "
                f"| {' / '.join(f'{e:.3f}' for e in evals)} |"
            )


def _seed(row: Row) -> int:
    return row.seed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--choices", nargs="+", default=list(CHOICES), choices=list(CHOICES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--steps", type=int, default=None, help="Override every task's budget.")
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/value_scaling/pilots.jsonl")
    )
    parser.add_argument("--root", type=Path, default=Path("runs/value_scaling_pilots"))
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--markdown", action="store_true", help="Print the docs' table.")
    args = parser.parse_args()
    torch.set_num_threads(1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows = read_rows(args.out)
    if not args.report_only:
        for seed in args.seeds:  # seed 0 of every (task, choice) before any seed 1
            for task in args.tasks:
                steps = args.steps or TASKS[task].steps
                for choice in args.choices:
                    if any(
                        (r.task, r.choice, r.seed, r.budget) == (task, choice, seed, steps)
                        for r in rows
                    ):
                        continue
                    row = run_one(task, choice, seed, steps, args.root)
                    with args.out.open("a") as handle:
                        handle.write(json.dumps(asdict(row)) + "\n")
                    rows.append(row)
                    print(
                        f"{task} {choice} seed {seed}: train {row.train_return:.3f}, "
                        f"eval {row.eval_return}, {row.seconds:.0f} s",
                        flush=True,
                    )
    report(rows)
    if args.markdown:
        markdown(rows)


if __name__ == "__main__":
    main()
