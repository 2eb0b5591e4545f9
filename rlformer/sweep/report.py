"""``rlformer sweep report DIR``: final scores over seeds per variant and task, curves, files.

Each trial's final score is the last value its run logged for the sweep's ``score`` metric
(``eval/...`` metrics are logged once, by the final evaluation). Per (task, variant) the seeds'
scores are summarised with :func:`rlformer.evaluation.statistics.summarize_scores`: mean, IQM
and percentile-bootstrap 95% CIs over seeds (with 3 seeds a CI says little; it is shown so that
nobody reads a difference into overlapping intervals).
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlformer.evaluation.statistics import summarize_scores
from rlformer.runs.directory import read_metrics


@dataclass
class TrialResult:
    """One trial as found on disk."""

    name: str
    task: str
    variant: str
    seed: int
    done: bool
    score: float | None
    curve: list[tuple[int, float]] = field(default_factory=list)  # (env step, metric)


@dataclass
class SweepResults:
    """Every trial of a sweep folder, with what the report compares."""

    directory: Path
    name: str
    metric: str
    score_metric: str
    trials: list[TrialResult]


@dataclass
class VariantRow:
    """One line of the report: a variant on a task, over its seeds."""

    task: str
    variant: str
    seeds: int
    missing: int
    mean: float
    std: float
    iqm: float
    mean_ci: tuple[float, float]
    iqm_ci: tuple[float, float]
    scores: list[float]


def load_sweep_results(directory: str | Path, score: str | None = None) -> SweepResults:
    """Read ``sweep.json`` and each trial's run directory (unstarted trials have no score)."""
    directory = Path(directory)
    index_path = directory / "sweep.json"
    if not index_path.is_file():
        raise FileNotFoundError(f"{directory}: not a sweep folder (no sweep.json)")
    index = json.loads(index_path.read_text())
    metric, score_metric = index["metric"], score or index["score"]
    logged: dict[str, list[dict[str, float]]] = {}
    for entry in index["trials"]:
        folder = Path(entry["config"]["run"]["root"])
        runs = sorted(p for p in folder.glob("run-*") if (p / "metrics.jsonl").is_file())
        logged[entry["name"]] = read_metrics(runs[-1]) if runs else []
    rollout_twin = score_metric.replace("eval/", "rollout/", 1)
    if not any(metric in r for rows in logged.values() for r in rows) and any(
        rollout_twin in r for rows in logged.values() for r in rows
    ):
        metric = rollout_twin  # e.g. no success rate on POPGym: draw the return instead
    trials = []
    for entry in index["trials"]:
        folder = Path(entry["config"]["run"]["root"])
        rows = logged[entry["name"]]
        curve = [(int(r["step"]), float(r[metric])) for r in rows if metric in r]
        scores = [float(r[score_metric]) for r in rows if score_metric in r]
        trials.append(
            TrialResult(
                entry["name"],
                entry["task"],
                entry["variant"],
                int(entry["seed"]),
                (folder / "done.json").is_file(),
                scores[-1] if scores else None,
                curve,
            )
        )
    if not any(t.score is not None for t in trials):
        raise ValueError(
            f"{directory}: no trial has logged {score_metric!r} yet "
            "(not started, or pick another metric with --metric)"
        )
    return SweepResults(directory, index["name"], metric, score_metric, trials)


def summarize(results: SweepResults) -> list[VariantRow]:
    """One row per (task, variant) in sweep order; statistics over the seeds with a score."""
    groups: dict[tuple[str, str], list[TrialResult]] = {}
    for trial in results.trials:
        groups.setdefault((trial.task, trial.variant), []).append(trial)
    rows = []
    for (task, variant), trials in groups.items():
        scores = [t.score for t in sorted(trials, key=lambda t: t.seed) if t.score is not None]
        if not scores:
            nan = math.nan
            rows.append(
                VariantRow(task, variant, 0, len(trials), nan, nan, nan, (nan, nan), (nan, nan), [])
            )
            continue
        s = summarize_scores(scores)
        rows.append(
            VariantRow(
                task,
                variant,
                len(scores),
                len(trials) - len(scores),
                s.mean,
                s.std,
                s.iqm,
                s.mean_ci,
                s.iqm_ci,
                scores,
            )
        )
    return rows


def format_table(rows: list[VariantRow], results: SweepResults) -> str:
    """A Markdown table (pastes into docs) headed by what was compared."""
    lines = [
        f"sweep {results.name} ({results.directory}): final {results.score_metric} over seeds; "
        "95% CIs: percentile bootstrap",
        "",
        "| task | variant | seeds | mean | 95% CI | IQM | 95% CI | per seed |",
        "| --- | --- | ---: | ---: | --- | ---: | --- | --- |",
    ]
    for r in rows:
        seeds = f"{r.seeds}" + (f" (+{r.missing} missing)" if r.missing else "")
        per_seed = ", ".join(f"{x:.3g}" for x in r.scores)
        lines.append(
            f"| {r.task} | {r.variant} | {seeds} | {r.mean:.3f} | {_ci(r.mean_ci)} | "
            f"{r.iqm:.3f} | {_ci(r.iqm_ci)} | {per_seed} |"
        )
    return "\n".join(lines)


def _ci(ci: tuple[float, float]) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def _row_dict(row: VariantRow) -> dict[str, Any]:
    return {
        "task": row.task,
        "variant": row.variant,
        "seeds": row.seeds,
        "missing": row.missing,
        "mean": row.mean,
        "std": row.std,
        "iqm": row.iqm,
        "mean_ci_low": row.mean_ci[0],
        "mean_ci_high": row.mean_ci[1],
        "iqm_ci_low": row.iqm_ci[0],
        "iqm_ci_high": row.iqm_ci[1],
        "scores": row.scores,
    }


def write_json(rows: list[VariantRow], results: SweepResults, path: str | Path) -> None:
    """The table plus every trial's score."""
    data = {
        "sweep": results.name,
        "directory": str(results.directory),
        "score": results.score_metric,
        "rows": [_row_dict(r) for r in rows],
        "trials": [
            {
                "name": t.name,
                "task": t.task,
                "variant": t.variant,
                "seed": t.seed,
                "done": t.done,
                "score": t.score,
            }
            for t in results.trials
        ],
    }
    Path(path).write_text(json.dumps(data, indent=2))


def write_csv(rows: list[VariantRow], path: str | Path) -> None:
    """One CSV row per (task, variant); per-seed scores joined with spaces."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(_row_dict(rows[0])))
        writer.writeheader()
        for row in rows:
            data = _row_dict(row)
            data["scores"] = " ".join(repr(x) for x in row.scores)
            writer.writerow(data)


def plot_sweep(results: SweepResults, rows: list[VariantRow], path: str | Path) -> Path:
    """Per task: final score per variant (mean, 95% CI, seeds as dots) and learning curves."""
    from rlformer.evaluation.plots import _pyplot

    plt = _pyplot()
    tasks = list(dict.fromkeys(r.task for r in rows))
    fig, axes = plt.subplots(
        len(tasks),
        2,
        figsize=(13, 4.2 * len(tasks)),
        squeeze=False,
        gridspec_kw={"width_ratios": [1, 1.3]},
    )
    colors = plt.get_cmap("tab10")
    for i, task in enumerate(tasks):
        bars, curves = axes[i]
        task_rows = [r for r in rows if r.task == task]
        for j, row in enumerate(task_rows):
            color = colors(j % 10)
            if row.seeds:
                low, high = row.mean_ci
                bars.errorbar(
                    [j],
                    [row.mean],
                    yerr=[[row.mean - low], [high - row.mean]],
                    fmt="o",
                    color=color,
                    capsize=4,
                    markersize=7,
                )
                bars.scatter([j] * len(row.scores), row.scores, color=color, alpha=0.35, s=14)
            trials = [t for t in results.trials if t.task == task and t.variant == row.variant]
            step, mean, low_c, high_c = _mean_curve([t.curve for t in trials if t.curve])
            if step.size:
                curves.plot(step, mean, color=color, label=row.variant)
                curves.fill_between(step, low_c, high_c, color=color, alpha=0.15)
        bars.set_xticks(range(len(task_rows)))
        bars.set_xticklabels([r.variant for r in task_rows], rotation=30, ha="right", fontsize=8)
        bars.set_ylabel(f"final {results.score_metric}")
        bars.set_title(f"{task}: mean over seeds, 95% bootstrap CI")
        bars.grid(alpha=0.3)
        curves.set_xlabel("env steps")
        curves.set_ylabel(results.metric)
        curves.set_title(f"{task}: mean over seeds (band: min-max)")
        curves.grid(alpha=0.3)
        curves.legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _mean_curve(
    curves: list[list[tuple[int, float]]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Mean, min and max over seeds at the steps all seeds logged (seeds share a step grid)."""
    if not curves:
        empty = np.array([])
        return empty, empty, empty, empty
    common = sorted(set.intersection(*(set(s for s, _ in c) for c in curves)))
    values = np.array([[dict(c)[s] for s in common] for c in curves])
    return np.array(common), values.mean(0), values.min(0), values.max(0)
