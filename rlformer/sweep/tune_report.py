"""What ``rlformer tune`` leaves behind: ``best.yaml`` and its evidence, read from the folder.

Each trial's final metric is the last value its run logged for the tune's ``metric``; a
configuration's score is the mean of its seeds' final metrics. The best configuration is chosen
among those whose every seed ran its whole budget (a trial stopped early by ASHA was judged on
less training), and only when none did among all. ``best.yaml`` is the best trial's resolved
config with the base's ``run`` name, seed and root: ``rlformer train best.yaml`` trains it.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rlformer.config import dump_config, train_config_model
from rlformer.runs.directory import read_metrics


@dataclass
class TrialRow:
    """One trial as found on disk."""

    name: str
    config_key: str
    values: dict[str, Any]
    seed: int
    status: str  # finished, stopped early, unfinished, failed
    final: float | None
    iterations: int
    env_steps: int
    config: dict[str, Any]
    curve: list[tuple[int, float]] = field(default_factory=list)


@dataclass
class TuneResults:
    """Every trial of a tune folder and the configuration chosen."""

    directory: Path
    name: str
    metric: str
    mode: str
    budget: int
    base: dict[str, Any]
    trials: list[TrialRow]
    best_key: str | None

    def score(self, key: str) -> float:
        finals = [t.final for t in self.trials if t.config_key == key and t.final is not None]
        return float(sum(finals) / len(finals)) if finals else math.nan

    @property
    def best_trials(self) -> list[TrialRow]:
        return [t for t in self.trials if t.config_key == self.best_key]


def load_tune_results(directory: str | Path, errored: list[str] | None = None) -> TuneResults:
    """Read ``tune.json``, the trials and their metrics; ``errored`` trials are kept in
    ``tune.json`` so that a later ``tune report`` says which failed."""
    directory = Path(directory)
    index_path = directory / "tune.json"
    if not index_path.is_file():
        raise FileNotFoundError(f"{directory}: not a tune folder (no tune.json)")
    index = json.loads(index_path.read_text())
    if errored is not None:
        index["errored"] = sorted(errored)
        index_path.write_text(json.dumps(index, indent=1))
    spec, failed = index["spec"], set(index.get("errored", []))
    metric, scheduled = spec["metric"], spec["scheduler"]["type"] != "none"
    trials = [
        _trial_row(directory, entry, metric, failed, scheduled) for entry in _entries(directory)
    ]
    results = TuneResults(
        directory,
        index["name"],
        metric,
        spec["mode"],
        spec["budget"],
        index["base"],
        trials,
        None,
    )
    results.best_key = _best(results)
    return results


def _entries(directory: Path) -> list[dict[str, Any]]:
    """(name, config key, values, seed, config) per trial, from sweep.json or trial.json."""
    sweep_index = directory / "sweep.json"
    if sweep_index.is_file():
        return [{**e, "key": e["variant"]} for e in json.loads(sweep_index.read_text())["trials"]]
    entries = []
    for path in sorted((directory / "trials").glob("*/trial.json")):
        entry = json.loads(path.read_text())
        entries.append({**entry, "key": entry["name"]})
    return entries


def _trial_row(
    directory: Path, entry: dict[str, Any], metric: str, failed: set[str], scheduled: bool
) -> TrialRow:
    folder = directory / "trials" / entry["name"]
    runs = sorted(p for p in folder.glob("run-*") if (p / "metrics.jsonl").is_file())
    rows = read_metrics(runs[-1]) if runs else []
    iteration_rows = [r for r in rows if not any(k.startswith("eval/") for k in r)]
    curve = [(int(r["step"]), float(r[metric])) for r in rows if _finite(r.get(metric))]
    if (folder / "done.json").is_file():
        status = "finished"
    elif entry["name"] in failed:
        status = "failed"
    else:
        status = "stopped early" if scheduled else "unfinished"
    return TrialRow(
        entry["name"],
        entry["key"],
        entry["values"],
        int(entry["seed"]),
        status,
        curve[-1][1] if curve else None,
        len(iteration_rows),
        int(iteration_rows[-1]["step"]) if iteration_rows else 0,
        entry["config"],
        curve,
    )


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _best(results: TuneResults) -> str | None:
    keys = list(dict.fromkeys(t.config_key for t in results.trials))
    scored = [k for k in keys if not math.isnan(results.score(k))]
    complete = [
        k
        for k in scored
        if all(t.status == "finished" for t in results.trials if t.config_key == k)
    ]
    pool = complete or scored
    if not pool:
        return None
    sign = 1.0 if results.mode == "max" else -1.0
    return max(pool, key=lambda k: sign * results.score(k))


def best_config(results: TuneResults) -> str:
    """``best.yaml``'s text: the best trial's config in the base's run name, seed and root."""
    trial = results.best_trials[0]
    config = json.loads(json.dumps(trial.config))
    config["run"].update({k: results.base["run"][k] for k in ("name", "seed", "root")})
    cfg = train_config_model().model_validate(config)
    header = (
        f"# rlformer tune {results.name}: the best of {len(_keys(results))} configurations by "
        f"{results.metric} ({results.mode}; {results.score(trial.config_key):.4g}, mean of "
        f"{len(results.best_trials)} seed(s) after {results.budget} env steps)\n"
        f"# values: {json.dumps(trial.values)}\n"
        f"# evidence beside this file: trials.md, trials.csv, curves.png\n"
    )
    return header + dump_config(cfg)


def _keys(results: TuneResults) -> list[str]:
    return list(dict.fromkeys(t.config_key for t in results.trials))


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().rstrip(".").strip()


def format_table(results: TuneResults) -> str:
    """A Markdown table of every trial, best configuration first, then by score."""
    keys = sorted({k for t in results.trials for k in t.values})
    sign = -1.0 if results.mode == "max" else 1.0
    order = sorted(
        results.trials,
        key=lambda t: (
            t.config_key != results.best_key,
            math.inf if t.final is None else sign * t.final,
            t.name,
        ),
    )
    lines = [
        f"| trial | {' | '.join(keys)} | seed | final {results.metric} | iterations | "
        "env steps | status |",
        "| --- | " + "--- | " * len(keys) + "---: | ---: | ---: | ---: | --- |",
    ]
    for t in order:
        final = "-" if t.final is None else f"{t.final:.4g}"
        mark = " (best)" if t.config_key == results.best_key else ""
        cells = " | ".join(_show(t.values.get(k, "")) for k in keys)
        lines.append(
            f"| {t.name}{mark} | {cells} | {t.seed} | {final} | {t.iterations} | "
            f"{t.env_steps} | {t.status} |"
        )
    return "\n".join(lines)


def write_csv(results: TuneResults, path: str | Path) -> None:
    keys = sorted({k for t in results.trials for k in t.values})
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            ["trial", *keys, "seed", "final", "iterations", "env_steps", "status", "best"]
        )
        for t in results.trials:
            writer.writerow(
                [
                    t.name,
                    *(json.dumps(t.values.get(k)) for k in keys),
                    t.seed,
                    "" if t.final is None else repr(t.final),
                    t.iterations,
                    t.env_steps,
                    t.status,
                    t.config_key == results.best_key,
                ]
            )


def plot_curves(results: TuneResults, path: str | Path) -> Path:
    """The metric over env steps, one line per trial; the best configuration's in colour."""
    from rlformer.evaluation.plots import _pyplot

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 5))
    for t in results.trials:
        if not t.curve or t.config_key == results.best_key:
            continue
        steps, values = zip(*t.curve, strict=True)
        style = "-" if t.status == "finished" else ":"
        ax.plot(steps, values, style, color="0.6", linewidth=0.9, alpha=0.8)
    for t in results.best_trials:
        if t.curve:
            steps, values = zip(*t.curve, strict=True)
            ax.plot(steps, values, color="tab:red", linewidth=2.2, label=f"best: {t.name}")
    ax.plot([], [], color="0.6", label="finished")
    ax.plot([], [], ":", color="0.6", label="stopped early / unfinished")
    ax.set_xlabel("env steps")
    ax.set_ylabel(results.metric)
    ax.set_title(f"tune {results.name}: {len(results.trials)} trials")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_outputs(results: TuneResults) -> list[Path]:
    """best.yaml (when a trial has a value), trials.csv, trials.md and curves.png."""
    d = results.directory
    written = []
    if results.best_key is not None:
        (d / "best.yaml").write_text(best_config(results))
        written.append(d / "best.yaml")
    write_csv(results, d / "trials.csv")
    (d / "trials.md").write_text(format_table(results) + "\n")
    written += [d / "trials.csv", d / "trials.md", plot_curves(results, d / "curves.png")]
    return written


def summary(results: TuneResults) -> str:
    """A few lines: counts, the best configuration and its values, where the files are."""
    counts: dict[str, int] = {}
    for t in results.trials:
        counts[t.status] = counts.get(t.status, 0) + 1
    lines = [
        f"tune {results.name} ({results.directory}): {len(results.trials)} trials: "
        + ", ".join(f"{n} {status}" for status, n in counts.items())
    ]
    if results.best_key is None:
        lines.append(f"no trial has logged {results.metric} yet")
        return "\n".join(lines)
    best = results.best_trials
    lines.append(
        f"best: {results.best_key}: {results.metric} {results.score(results.best_key):.4g} "
        f"(mode {results.mode}, {len(best)} seed(s))"
    )
    for key, value in best[0].values.items():
        lines.append(f"  {key}: {_show(value)}")
    lines.append(f"config: {results.directory / 'best.yaml'}")
    lines.append(f"evidence: {results.directory / 'trials.md'}, {results.directory / 'curves.png'}")
    return "\n".join(lines)
