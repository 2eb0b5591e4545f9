"""``rlformer eval`` (agents on their env, another env or a suite) and ``rlformer plot``
(learning curves)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import numpy as np
import typer

from rlformer.cli.errors import check_writable, fail, user_errors
from rlformer.cli.options import TrustCheckpoint

if TYPE_CHECKING:
    from rlformer.evaluation.report import EvaluationReport
    from rlformer.policies import Policy


def evaluate(
    agents: Annotated[
        list[str],
        typer.Argument(
            help="Run directories, checkpoint files, `rlformer export` directories or "
            "sb3:PATH.zip models (several: one table)."
        ),
    ],
    env: Annotated[
        str | None, typer.Option(help="Env id to evaluate on (default: each agent's training env).")
    ] = None,
    suite: Annotated[
        Path | None,
        typer.Option(help="Evaluate on every task of a suite file (configs/eval/*.yaml)."),
    ] = None,
    episodes: Annotated[
        int | None, typer.Option(min=1, help="Episodes per seed (default 20, or the suite's).")
    ] = None,
    seeds: Annotated[
        int | None,
        typer.Option(
            min=1, help="Independent seeds; seed s seeds env slot i with 1000*s+i (default 1)."
        ),
    ] = None,
    num_envs: Annotated[int, typer.Option(min=1, help="Vector envs stepped together.")] = 8,
    stochastic: Annotated[
        bool,
        typer.Option(
            "--stochastic",
            help="Sample actions instead of the mode (Decision Transformers: online DTs and "
            "discrete-action DTs).",
        ),
    ] = False,
    target_return: Annotated[
        list[str] | None,
        typer.Option(
            help="Return-conditioned agents: targets as a list (3600 1800, or 3600,1800) or a "
            "range START:STOP:COUNT (0:3600:10); may be repeated. Negative targets: use the "
            "comma form (-300,-900). Default: the targets of the agent's config."
        ),
    ] = None,
    act_context: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Decision Transformers: condition each action on the last N steps (at most "
            "the training context; default: the agent's dt.act_context, else its context).",
        ),
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write all statistics and episodes as JSON.")
    ] = None,
    csv_out: Annotated[
        Path | None, typer.Option("--csv", help="Also write one row per episode as CSV.")
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(help="Return-conditioned agents: PNG of achieved vs target return."),
    ] = None,
    device: Annotated[
        str,
        typer.Option(
            help="Where rlformer models act: auto, cpu or cuda (envs step on the CPU either way; "
            "SB3 models and ONNX exports act on the CPU)."
        ),
    ] = "cpu",
    trust_checkpoint: TrustCheckpoint = False,
) -> None:
    """Evaluate agents: mean, std, median, IQM with bootstrap 95% CIs, D4RL score, success.

    Memory is reset at every episode start. Agents are evaluated on --env, on every task of
    --suite whose spaces they fit, or on the env they were trained on.
    """
    from rlformer.policies import load_policy

    if env is not None and suite is not None:
        fail("give either --env or --suite, not both")
    agents, targets = _eval_targets(agents, target_return)
    for out in (json_out, csv_out, plot):
        if out is not None:  # fail now, not after a long evaluation
            check_writable(out)
    try:
        loaded = [load_policy(name, trust=trust_checkpoint, device=device) for name in agents]
        if targets is not None and not any(p.info.return_conditioned for p in loaded):
            fail("--target-return conditions Decision Transformers; none of the agents is one")
        if act_context is not None:
            _set_act_context(loaded, act_context)
        if stochastic:
            _check_can_sample(loaded)
        reports, skipped, title = _run_evaluations(
            loaded, env, suite, episodes, seeds, num_envs, not stochastic, targets
        )
        if plot is not None and not any(r.target_return is not None for r in reports):
            fail("--plot draws achieved vs target return: it needs a Decision Transformer")
    except user_errors() as err:
        fail(str(err))
    from rlformer.evaluation.report import print_reports

    print_reports(reports, title)
    for report in reports:  # teams: each agent's own return too
        agents = sorted({k for row in report.episodes for k in row if k.startswith("return/")})
        if agents:
            means = [np.mean([r[k] for r in report.episodes if k in r]) for k in agents]
            listed = ", ".join(f"{k[7:]} {m:.2f}" for k, m in zip(agents, means, strict=True))
            typer.echo(f"{report.agent}: mean return per agent: {listed}")
    for line in skipped:
        typer.echo(f"skipped {line}", err=True)
    _write_eval_outputs(reports, loaded, json_out, csv_out, plot)


def _eval_targets(
    agents: list[str], target_return: list[str] | None
) -> tuple[list[str], list[float] | None]:
    """The agents and the parsed ``--target-return`` values (None when not given).

    Negative targets after ``--target-return`` reach typer as extra agent names: they are taken
    back from the agent list here.
    """
    from rlformer.evaluation.report import parse_target_returns

    if not target_return:
        return agents, None
    agents, more_targets = _split_targets_from_agents(agents)
    try:
        targets = parse_target_returns(",".join([*target_return, *more_targets]))
    except ValueError as err:
        fail(str(err))
    if not agents:
        fail("no agent given: name a run directory, checkpoint or sb3:PATH.zip")
    return agents, targets


def _run_evaluations(
    loaded: list[Policy],
    env: str | None,
    suite: Path | None,
    episodes: int | None,
    seeds: int | None,
    num_envs: int,
    deterministic: bool,
    targets: list[float] | None,
) -> tuple[list[EvaluationReport], list[str], str]:
    """Every agent on ``suite``'s tasks, on ``env``, or on its own training env: the reports,
    the suite tasks skipped (with why) and the table's title."""
    from rlformer.evaluation.report import evaluate_suite, evaluate_task
    from rlformer.evaluation.suites import load_suite
    from rlformer.rollout.env_factory import EnvError

    teams = [p.info.name for p in loaded if hasattr(p, "evaluate_own_task")]
    if suite is not None and teams:
        raise EnvError(f"{teams[0]} is a team: it plays its own task, not a --suite")
    if suite is not None:
        chosen = load_suite(suite)
        reports, skipped = evaluate_suite(
            loaded, chosen, num_envs, deterministic, targets, episodes, seeds
        )
        return reports, skipped, f"suite {chosen.name}"
    reports = []
    for policy in loaded:
        own_task = getattr(policy, "evaluate_own_task", None)
        if own_task is not None:  # a multi-agent team: its groups are its own task's
            if env is not None:
                raise EnvError(f"{policy.info.name} is a team: it plays its own task, not --env")
            reports += own_task(episodes or 20, seeds or 1, num_envs, deterministic)
            continue
        env_cfg = _eval_env(policy, env)
        reports += evaluate_task(
            policy, env_cfg, episodes or 20, seeds or 1, num_envs, deterministic, targets
        )
    return reports, [], "rlformer eval"


def _write_eval_outputs(
    reports: list[EvaluationReport],
    loaded: list[Policy],
    json_out: Path | None,
    csv_out: Path | None,
    plot: Path | None,
) -> None:
    """The JSON, CSV and return-sweep PNG that ``rlformer eval`` was asked for."""
    from rlformer.evaluation.plots import plot_return_sweep
    from rlformer.evaluation.report import write_csv, write_json

    if json_out is not None:
        ranges = {p.info.name: p.info.dataset_returns for p in loaded if p.info.dataset_returns}
        write_json(reports, json_out, dataset_returns=ranges)
    if csv_out is not None:
        write_csv(reports, csv_out)
    if plot is not None:
        conditioned = [r for r in reports if r.target_return is not None]
        ranges = [p.info.dataset_returns for p in loaded if p.info.dataset_returns]
        plot_return_sweep(conditioned, plot, ranges[0] if len(ranges) == 1 else None)
        typer.echo(f"wrote {plot}")


def _set_act_context(policies: list[Policy], steps: int) -> None:
    """``--act-context``: every policy with an acting context (a Decision Transformer) acts on
    its last ``steps`` steps, or the command fails before evaluating anything."""
    chosen = [p for p in policies if hasattr(p, "set_act_context")]
    if not chosen:
        fail("--act-context is for Decision Transformers; none of the agents is one")
    for policy in chosen:
        try:
            policy.set_act_context(steps)  # type: ignore[attr-defined]
        except ValueError as err:
            fail(f"--act-context: {err}")


def _check_can_sample(policies: list[Policy]) -> None:
    """``--stochastic``: fail before evaluating anything if a policy has nothing to sample."""
    for policy in policies:
        if (problem := policy.info.sampling_problem) is not None:
            fail(f"--stochastic: {policy.info.name}: {problem}; evaluate it without --stochastic")


def _split_targets_from_agents(args: list[str]) -> tuple[list[str], list[str]]:
    """``--target-return 3600 1800`` gives the option one value and leaves 1800 among the
    agents (an option takes one value on the command line); numbers and ranges there that
    name no file are targets too."""
    agents, targets = [], []
    for arg in args:
        is_target = re.fullmatch(r"[-+.\d:eE]+", arg) is not None and not Path(arg).exists()
        (targets if is_target else agents).append(arg)
    return agents, targets


def _eval_env(policy: Policy, env_id: str | None):  # noqa: ANN202 - EnvConfig
    """--env if given (registered kwargs), else the env the policy was trained on."""
    from rlformer.config import EnvConfig
    from rlformer.rollout.env_factory import EnvError

    if env_id is not None:
        # Another task for a trained agent keeps the agent's imports and wrappers: they made
        # the observations it was trained on.
        training = policy.info.training_env
        if training is None:
            return EnvConfig(id=env_id)
        return EnvConfig(id=env_id, imports=training.imports, wrappers=training.wrappers)
    if policy.info.training_env is None:
        raise EnvError(f"{policy.info.name}: give --env ENV_ID or --suite FILE to evaluate it")
    return policy.info.training_env


def plot(
    runs: Annotated[list[Path], typer.Argument(help="Run directories to draw, one line each.")],
    metric: Annotated[
        list[str] | None,
        typer.Option(help="Metric to draw (repeat for more panels); default: the main one."),
    ] = None,
    out: Annotated[Path, typer.Option(help="Output PNG.")] = Path("learning_curves.png"),
    smooth: Annotated[
        int, typer.Option(min=1, help="Trailing moving average over this many logged rows.")
    ] = 1,
) -> None:
    """Learning curves from run directories' metrics.jsonl as a PNG."""
    from rlformer.evaluation.plots import plot_learning_curves

    try:
        path = plot_learning_curves(runs, out, metric, smooth)
    except (FileNotFoundError, ValueError) as err:
        fail(str(err))
    typer.echo(f"wrote {path}")
