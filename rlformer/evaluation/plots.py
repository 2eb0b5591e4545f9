"""PNG plots: achieved vs target return for return-conditioned agents, and learning curves.

Matplotlib runs on its file-only Agg backend, so plotting works on headless machines and in CI.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rlformer.runs.directory import read_metrics

if TYPE_CHECKING:
    from rlformer.evaluation.report import EvaluationReport

# Tried in order when no metric is named: the first one a run logged is plotted.
DEFAULT_CURVE_METRICS = ("rollout/return_mean", "loss/action", "loss/total")


def _pyplot():  # noqa: ANN202 - matplotlib.pyplot module
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_return_sweep(
    reports: Sequence[EvaluationReport],
    path: str | Path,
    dataset_returns: dict[str, float] | None = None,
) -> Path:
    """Achieved mean return (95% CI bars) and IQM against the target, one line per agent/task.

    The diagonal is a perfectly obedient policy; the shaded band is the range of episode returns
    in the training data, which return-conditioned policies are known not to exceed by much.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    groups: dict[tuple[str, str], list[EvaluationReport]] = {}
    for report in reports:
        if report.target_return is None:
            raise ValueError(f"{report.agent} on {report.task} has no target return to plot")
        groups.setdefault((report.agent, report.task), []).append(report)
    all_targets = sorted(r.target_return for r in reports if r.target_return is not None)
    if dataset_returns is not None:
        low, high = dataset_returns["min"], dataset_returns["max"]
        ax.axhspan(low, high, color="tab:gray", alpha=0.15, label="dataset returns (min-max)")
        ax.axhline(high, color="tab:gray", linestyle=":", linewidth=1)
    ax.plot(all_targets, all_targets, "k--", linewidth=1, label="achieved = target")
    for (agent, task), group in groups.items():
        group = sorted(group, key=lambda r: r.target_return)  # type: ignore[arg-type,return-value]
        x = np.array([r.target_return for r in group], dtype=float)
        mean = np.array([r.summary.mean for r in group])
        ci = np.array([r.summary.mean_ci for r in group]).T
        name = task if len(groups) == 1 else f"{Path(agent).name} / {task}"
        bars = ax.errorbar(
            x, mean, yerr=[mean - ci[0], ci[1] - mean], marker="o", capsize=3, label=f"{name} mean"
        )
        iqm = [r.summary.iqm for r in group]
        ax.plot(x, iqm, "x", color=bars[0].get_color(), label=f"{name} IQM")
    ax.set_xlabel("target return")
    ax.set_ylabel("achieved return")
    ax.set_title("Return-conditioned evaluation (95% bootstrap CI)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return _save(fig, path)


def plot_learning_curves(
    run_dirs: Sequence[str | Path],
    path: str | Path,
    metrics: Sequence[str] | None = None,
    smooth: int = 1,
) -> Path:
    """One panel per metric, one line per run, against the step each row was logged at.

    ``smooth`` > 1 applies a trailing moving average over that many logged rows.
    """
    for run_dir in run_dirs:
        if not (Path(run_dir) / "metrics.jsonl").is_file():
            raise FileNotFoundError(f"{run_dir}: no metrics.jsonl (give an rlformer run directory)")
    runs = {Path(d): read_metrics(d) for d in run_dirs}
    logged = set().union(*(set(row) for rows in runs.values() for row in rows)) - {"step"}
    if not metrics:
        chosen = [m for m in DEFAULT_CURVE_METRICS if m in logged][:1]
        if not chosen:
            raise ValueError(f"no default metric logged; choose --metric from {sorted(logged)}")
        metrics = chosen
    unknown = [m for m in metrics if m not in logged]
    if unknown:
        raise ValueError(f"metric(s) {unknown} not logged; these are: {sorted(logged)}")
    plt = _pyplot()
    fig, axes = plt.subplots(
        len(metrics), 1, figsize=(6.4, 3.2 * len(metrics)), squeeze=False, sharex=True
    )
    for ax, metric in zip(axes[:, 0], metrics, strict=True):
        for run_dir, rows in runs.items():
            points = [(row["step"], row[metric]) for row in rows if metric in row]
            if not points:
                continue
            steps, values = (np.array(v, dtype=float) for v in zip(*points, strict=True))
            ax.plot(steps, moving_average(values, smooth), label=run_dir.name)
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    axes[-1, 0].set_xlabel("step (env steps for PPO, gradient steps for DT)")
    return _save(fig, path)


def moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over up to ``window`` values (the first points average what exists)."""
    if window <= 1:
        return values
    cumulative = np.cumsum(np.insert(values, 0, 0.0))
    index = np.arange(1, values.size + 1)
    start = np.maximum(index - window, 0)
    return (cumulative[index] - cumulative[start]) / (index - start)


def _save(fig, path: str | Path) -> Path:  # noqa: ANN001 - matplotlib Figure
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path
