"""Evaluate a checkpoint over seeds and report robust statistics (terminal table, JSON, CSV)."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from rlformer.config import EnvConfig
from rlformer.evaluation.runner import EpisodeResults, PolicyActions, run_source_episodes
from rlformer.evaluation.statistics import ScoreSummary, summarize_scores


@dataclass
class EvaluationReport:
    """Everything one ``rlformer eval`` produced for one task."""

    checkpoint: str
    env_id: str
    deterministic: bool
    summary: ScoreSummary
    episodes: list[dict[str, float]]  # seed, episode, return, length, success (if reported)


def evaluate_agent(
    checkpoint: str | Path,
    env_id: str | None,
    episodes: int,
    seeds: int,
    num_envs: int = 8,
    deterministic: bool = True,
) -> EvaluationReport:
    """Run ``episodes`` episodes for each of ``seeds`` seeds and summarise all of them.

    ``checkpoint`` is an rlformer run directory / checkpoint, or ``sb3:PATH.zip`` for a
    stable-baselines3 model (then ``env_id`` is required), so baselines land in the same table.
    """
    text = str(checkpoint)
    if text.startswith("sb3:"):
        if env_id is None:
            from rlformer.rollout.env_factory import EnvError

            raise EnvError(f"{text}: give --env ENV_ID to evaluate a stable-baselines3 model")
        from rlformer.data.policies import SB3Policy

        env_cfg = EnvConfig(id=env_id)

        def make_source(slots: int, seed: int) -> SB3Policy:
            return SB3Policy(text.removeprefix("sb3:"), deterministic=deterministic)
    else:
        from rlformer.training import load_agent

        model, cfg, _ = load_agent(checkpoint)
        env_cfg = (
            cfg.env if env_id is None else cfg.env.model_copy(update={"id": env_id, "kwargs": {}})
        )

        def make_source(slots: int, seed: int) -> PolicyActions:  # type: ignore[misc]
            return PolicyActions(model, slots, deterministic, seed)

    rows: list[dict[str, float]] = []
    merged = EpisodeResults()
    for seed in range(seeds):
        slots = max(1, min(num_envs, episodes))
        part = run_source_episodes(
            make_source(slots, 1000 * seed), env_cfg, episodes, slots, seed=1000 * seed
        )
        for i, (ret, length) in enumerate(zip(part.returns, part.lengths, strict=True)):
            row = {"seed": seed, "episode": i, "return": ret, "length": length}
            if part.successes:
                row["success"] = part.successes[i]
            rows.append(row)
        merged.returns += part.returns
        merged.lengths += part.lengths
        merged.successes += part.successes
    summary = summarize_scores(merged.returns, merged.successes or None)
    return EvaluationReport(text, env_cfg.id, deterministic, summary, rows)


def evaluate_return_conditioned(
    checkpoint: str | Path, env_id: str | None, targets: list[float] | None, episodes: int
) -> list[EvaluationReport]:
    """One report per target return for a Decision Transformer checkpoint."""
    from rlformer.dt_training import load_dt_policy
    from rlformer.evaluation.dt_runner import run_return_conditioned
    from rlformer.runs import load_checkpoint

    policy, cfg = load_dt_policy(load_checkpoint(checkpoint))
    env_cfg = cfg.env if env_id is None else cfg.env.model_copy(update={"id": env_id, "kwargs": {}})
    reports = []
    for target in targets or cfg.dt.target_returns:
        result = run_return_conditioned(policy, env_cfg, target, episodes)
        rows = [
            {"seed": 0, "episode": i, "return": r, "length": n}
            for i, (r, n) in enumerate(zip(result.returns, result.lengths, strict=True))
        ]
        summary = summarize_scores(result.returns, result.successes or None)
        reports.append(
            EvaluationReport(
                str(checkpoint), f"{env_cfg.id} target {target:g}", True, summary, rows
            )
        )
    return reports


def print_summary(report: EvaluationReport) -> None:
    s = report.summary
    table = Table(title=f"{report.env_id} ({s.episodes} episodes)")
    for column in ("mean", "std", "median", "IQM", "mean 95% CI", "IQM 95% CI", "success"):
        table.add_column(column, justify="right")
    success = "-" if s.success_rate is None else f"{100 * s.success_rate:.1f}%"
    table.add_row(
        f"{s.mean:.2f}",
        f"{s.std:.2f}",
        f"{s.median:.2f}",
        f"{s.iqm:.2f}",
        f"[{s.mean_ci[0]:.2f}, {s.mean_ci[1]:.2f}]",
        f"[{s.iqm_ci[0]:.2f}, {s.iqm_ci[1]:.2f}]",
        success,
    )
    Console().print(table)


def write_json(report: EvaluationReport, path: Path) -> None:
    payload = {
        "checkpoint": report.checkpoint,
        "env": report.env_id,
        "deterministic": report.deterministic,
        **report.summary.as_dict(),
        "episodes_detail": report.episodes,
    }
    path.write_text(json.dumps(payload, indent=2))


def write_csv(report: EvaluationReport, path: Path) -> None:
    fields = ["env", "seed", "episode", "return", "length", "success"]
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        for row in report.episodes:
            writer.writerow({"env": report.env_id, **row})
