"""Evaluate agents on tasks over seeds and report robust statistics (terminal table, JSON, CSV).

One row per (agent, task[, target return]): mean, std, median and IQM with bootstrap 95% CIs,
the D4RL-normalised score where D4RL has reference returns for the task, and the success rate
where the env reports ``is_success``.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from rlformer.config import EnvConfig
from rlformer.data.references import normalized_score, reference_for
from rlformer.evaluation.runner import EpisodeResults, run_policy_episodes
from rlformer.evaluation.space_match import check_fits, space_mismatch
from rlformer.evaluation.statistics import ScoreSummary, summarize_scores
from rlformer.evaluation.suites import Suite
from rlformer.policies.base import Policy
from rlformer.rollout.env_factory import EnvError


@dataclass
class EvaluationReport:
    """Statistics of one agent on one task (and one target return for return-conditioned agents)."""

    agent: str
    task: str
    env_id: str
    deterministic: bool
    summary: ScoreSummary
    episodes: list[dict[str, float]]  # seed, episode, return, length[, success, normalized]
    target_return: float | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "agent": self.agent,
            "task": self.task,
            "env": self.env_id,
            "target_return": self.target_return,
            "deterministic": self.deterministic,
            **self.summary.as_dict(),
            "episodes_detail": self.episodes,
        }


def seed_offset(seed: int) -> int:
    """Env seed of slot 0 for evaluation seed ``seed`` (slot i gets ``seed_offset(seed) + i``)."""
    return 1000 * seed


def d4rl_normalizer(env_id: str) -> Callable[[float], float] | None:
    """Return -> D4RL-normalised score for tasks D4RL has reference returns for."""
    if reference_for(env_id) is None:
        return None
    return lambda episode_return: float(normalized_score(episode_return, env_id))  # type: ignore[arg-type]


def evaluate_task(
    policy: Policy,
    env_cfg: EnvConfig,
    episodes: int,
    seeds: int,
    num_envs: int = 8,
    deterministic: bool = True,
    targets: list[float] | None = None,
    label: str | None = None,
) -> list[EvaluationReport]:
    """``episodes`` episodes per seed on one task; one report per target return for a
    return-conditioned policy.

    Memory is reset at every episode start. A return-conditioned policy plays each target's
    episodes in parallel, one env each (env i seeded ``seed + i``), as its training run
    evaluated it; ``deterministic=False`` samples actions where the policy has a distribution
    and is a ValueError otherwise.
    """
    check_fits(policy, env_cfg)
    label = label or env_cfg.id
    normalizer = d4rl_normalizer(env_cfg.id)
    info = policy.info
    if not deterministic and info.sampling_problem is not None:
        raise ValueError(f"cannot sample actions: {info.sampling_problem}")
    if not info.return_conditioned:
        chosen: list[float | None] = [None]
    else:
        chosen = list(targets or info.default_targets)
        if not chosen:
            raise EnvError(f"{info.name}: give target returns (--target-return) to evaluate it")
    reports = []
    for target in chosen:
        slots = episodes if info.return_conditioned else max(1, min(num_envs, episodes))
        parts = [
            run_policy_episodes(
                policy, env_cfg, episodes, slots, seed_offset(s), deterministic, target
            )
            for s in range(seeds)
        ]
        reports.append(_report(info.name, label, env_cfg, deterministic, parts, normalizer, target))
    return reports


def _report(
    name: str,
    label: str,
    env_cfg: EnvConfig,
    deterministic: bool,
    parts: list[EpisodeResults],
    normalizer: Callable[[float], float] | None,
    target: float | None,
) -> EvaluationReport:
    rows: list[dict[str, float]] = []
    merged = EpisodeResults()
    for seed, part in enumerate(parts):
        for i, (ret, length) in enumerate(zip(part.returns, part.lengths, strict=True)):
            row: dict[str, float] = {"seed": seed, "episode": i, "return": ret, "length": length}
            if part.successes and part.successes[i] is not None:
                row["success"] = part.successes[i]
            if normalizer is not None:
                row["normalized"] = normalizer(ret)
            rows.append(row)
        merged.returns += part.returns
        merged.lengths += part.lengths
        merged.successes += part.successes
    summary = summarize_scores(merged.returns, merged.success_values(), normalizer)
    return EvaluationReport(
        name, label, env_cfg.id, deterministic, summary, rows, target_return=target
    )


def evaluate_suite(
    policies: list[Policy],
    suite: Suite,
    num_envs: int = 8,
    deterministic: bool = True,
    targets: list[float] | None = None,
    episodes: int | None = None,
    seeds: int | None = None,
) -> tuple[list[EvaluationReport], list[str]]:
    """Every agent on every suite task its spaces fit; also returns why pairs were skipped.

    A MuJoCo suite mixes observation sizes, so a Hopper agent is evaluated on Hopper only;
    an agent that fits no task at all is an error rather than an empty table.
    """
    reports: list[EvaluationReport] = []
    skipped: list[str] = []
    for policy in policies:
        name = policy.info.name
        fitted = 0
        for task in suite.tasks:
            env_cfg = task.env_config(policy.info.training_env)
            reason = space_mismatch(policy, env_cfg)
            if reason is not None:
                skipped.append(f"{name} on {task.name}: {reason}")
                continue
            fitted += 1
            reports += evaluate_task(
                policy,
                env_cfg,
                episodes or suite.episodes,
                seeds or suite.seeds,
                num_envs,
                deterministic,
                targets or task.target_returns,
                label=task.name,
            )
        if fitted == 0:
            raise EnvError(
                f"{name} fits no task of suite {suite.name!r} "
                f"(its observation or action space differs from all of them)"
            )
    return reports, skipped


def parse_target_returns(text: str) -> list[float]:
    """``"3600,1800"`` or a range ``"START:STOP:COUNT"`` (inclusive, evenly spaced), or both.

    >>> parse_target_returns("0:100:5,150")
    [0.0, 25.0, 50.0, 75.0, 100.0, 150.0]
    """
    targets: list[float] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            if ":" in part:
                start, stop, count = part.split(":")
                if int(count) < 2:
                    raise ValueError
                targets += [float(x) for x in np.linspace(float(start), float(stop), int(count))]
            else:
                targets.append(float(part))
        except ValueError:
            raise ValueError(
                f"target returns {text!r}: expected numbers like 3600,1800 or a range "
                f"START:STOP:COUNT like 0:3600:10 (COUNT >= 2), got {part!r}"
            ) from None
    if not targets:
        raise ValueError(f"target returns {text!r}: no numbers given")
    return targets


def print_reports(reports: list[EvaluationReport], title: str = "rlformer eval") -> None:
    """One table; agent, target, D4RL-score and success columns appear only when they vary."""
    show_agent = len({r.agent for r in reports}) > 1
    show_target = any(r.target_return is not None for r in reports)
    show_normalized = any(r.summary.normalized_mean is not None for r in reports)
    show_success = any(r.summary.success_rate is not None for r in reports)
    table = Table(title=title)
    columns = (
        (["agent"] if show_agent else [])
        + ["task"]
        + (["target"] if show_target else [])
        + ["episodes", "mean", "std", "median", "IQM", "mean 95% CI", "IQM 95% CI"]
        + (["D4RL score [95% CI]"] if show_normalized else [])
        + (["success"] if show_success else [])
    )
    for column in columns:
        table.add_column(column, justify="left" if column in ("agent", "task") else "right")
    for r in reports:
        s = r.summary
        cells = (
            ([r.agent] if show_agent else [])
            + [r.task]
            + ([_number(r.target_return)] if show_target else [])
            + [
                str(s.episodes),
                f"{s.mean:.2f}",
                f"{s.std:.2f}",
                f"{s.median:.2f}",
                f"{s.iqm:.2f}",
                f"[{s.mean_ci[0]:.2f}, {s.mean_ci[1]:.2f}]",
                f"[{s.iqm_ci[0]:.2f}, {s.iqm_ci[1]:.2f}]",
            ]
        )
        if show_normalized:
            cells.append(
                "-"
                if s.normalized_mean is None or s.normalized_mean_ci is None
                else f"{s.normalized_mean:.1f} [{s.normalized_mean_ci[0]:.1f}, "
                f"{s.normalized_mean_ci[1]:.1f}]"
            )
        if show_success:
            cells.append("-" if s.success_rate is None else f"{100 * s.success_rate:.1f}%")
        table.add_row(*cells)
    Console(width=max(120, Console().width)).print(table)


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def write_json(reports: list[EvaluationReport], path: Path, **extra: object) -> None:
    """``{"reports": [...], **extra}``: each report's statistics plus its episodes."""
    payload = {"reports": [r.as_dict() for r in reports], **extra}
    path.write_text(json.dumps(payload, indent=2))


def write_csv(reports: list[EvaluationReport], path: Path) -> None:
    """One row per episode, with the agent, task and target it belongs to."""
    fields = [
        "agent",
        "task",
        "env",
        "target_return",
        "seed",
        "episode",
        "return",
        "length",
        "success",
        "normalized",
    ]
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        for r in reports:
            for row in r.episodes:
                writer.writerow(
                    {
                        "agent": r.agent,
                        "task": r.task,
                        "env": r.env_id,
                        "target_return": r.target_return,
                        **row,
                    }
                )
