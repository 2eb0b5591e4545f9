"""``rlformer`` command line: wiring only — each command calls one library function.

Errors the user can fix (bad config, unknown env id, missing or incompatible checkpoint, bad
dataset) are printed as ``error: ...`` lines and exit with status 2, without a traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer

app = typer.Typer(
    name="rlformer",
    help="Reinforcement-learning agents with Transformer memory (GTrXL-PPO, Decision Transformer).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
dataset_app = typer.Typer(help="Inspect offline datasets.", no_args_is_help=True)
app.add_typer(dataset_app, name="dataset")

USER_ERROR_EXIT = 2


def fail(message: str) -> NoReturn:
    """Print ``error: message`` (each line) to stderr and exit with status 2."""
    for line in str(message).splitlines() or [""]:
        typer.echo(f"error: {line}", err=True)
    raise typer.Exit(USER_ERROR_EXIT)


def _user_errors() -> tuple[type[Exception], ...]:
    from rlformer.config import ConfigError
    from rlformer.data.errors import DatasetError
    from rlformer.rollout.env_factory import EnvError
    from rlformer.runs import CheckpointError

    return (ConfigError, EnvError, CheckpointError, DatasetError)


@app.command()
def train(
    config: Annotated[
        Path | None,
        typer.Argument(
            help="YAML config (see configs/); omitted: all defaults. Not with --resume."
        ),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set", help="Override a config field: --set ppo.learning_rate=1e-3 (repeatable)."
        ),
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option(help="Continue the run in this directory from its latest checkpoint."),
    ] = None,
) -> None:
    """Train an agent from a YAML config; writes a run directory with metrics and checkpoints."""
    from rlformer.config import load_config
    from rlformer.training import resume as resume_run
    from rlformer.training import train as train_run

    if config is not None and resume is not None:
        fail("give either CONFIG (a new run) or --resume RUN_DIR (continue a run), not both")
    try:
        if resume is not None:
            result = resume_run(resume, set_ or [])
        else:
            result = train_run(load_config(config, set_ or []))
    except _user_errors() as err:
        fail(str(err))
    typer.echo(f"run directory: {result.run_dir}")
    if result.evaluation is not None:
        typer.echo(json.dumps(result.evaluation))


@app.command("eval")
def evaluate(
    checkpoint: Annotated[
        str,
        typer.Argument(help="Run directory, checkpoint file, or sb3:PATH.zip (needs --env)."),
    ],
    env: Annotated[
        str | None, typer.Option(help="Env id to evaluate on (default: the training env).")
    ] = None,
    episodes: Annotated[int, typer.Option(min=1, help="Episodes per seed.")] = 20,
    seeds: Annotated[
        int, typer.Option(min=1, help="Independent seeds (seed s seeds env slot i with 1000*s+i).")
    ] = 1,
    num_envs: Annotated[int, typer.Option(min=1, help="Vector envs stepped together.")] = 8,
    stochastic: Annotated[bool, typer.Option(help="Sample actions instead of the mode.")] = False,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write the summary and episodes as JSON.")
    ] = None,
    csv_out: Annotated[
        Path | None, typer.Option("--csv", help="Also write one row per episode as CSV.")
    ] = None,
    target_return: Annotated[
        str | None,
        typer.Option(help="Decision Transformers: target returns, comma-separated (3600,1800)."),
    ] = None,
) -> None:
    """Evaluate a trained agent: mean, std, median, IQM with bootstrap 95% CIs, success rate.

    For a Decision Transformer, each --target-return is evaluated in turn (default: the
    targets of its config).
    """
    from rlformer.evaluation.report import (
        evaluate_agent,
        evaluate_return_conditioned,
        print_summary,
        write_csv,
        write_json,
    )
    from rlformer.runs import load_checkpoint

    try:
        is_sb3 = str(checkpoint).startswith("sb3:")
        kind = "sb3" if is_sb3 else load_checkpoint(checkpoint).get("kind", "ppo")
        if kind == "dt":
            targets = None
            if target_return:
                try:
                    targets = [float(x) for x in target_return.split(",") if x.strip()]
                except ValueError:
                    fail(f"--target-return {target_return!r}: expected numbers like 3600,1800")
            reports = evaluate_return_conditioned(checkpoint, env, targets, episodes * seeds)
            for report in reports:
                print_summary(report)
            if json_out is not None:
                json_out.write_text(
                    "[" + ",".join(json.dumps(r.summary.as_dict()) for r in reports) + "]"
                )
            return
        report = evaluate_agent(checkpoint, env, episodes, seeds, num_envs, not stochastic)
    except _user_errors() as err:
        fail(str(err))
    print_summary(report)
    if json_out is not None:
        write_json(report, json_out)
    if csv_out is not None:
        write_csv(report, csv_out)


@app.command()
def collect(
    policy: Annotated[
        str, typer.Option(help="random | RUN_DIR (an rlformer run or checkpoint) | sb3:PATH.zip")
    ] = "random",
    env: Annotated[str, typer.Option(help="Gymnasium env id.")] = "CartPole-v1",
    steps: Annotated[int, typer.Option(min=1, help="Transitions to record.")] = 10_000,
    out: Annotated[Path, typer.Option(help="Output HDF5 file (D4RL layout).")] = Path(
        "dataset.hdf5"
    ),
    seed: Annotated[int, typer.Option(min=0, help="Seed for envs and action noise.")] = 0,
    num_envs: Annotated[int, typer.Option(min=1, help="Vector envs stepped together.")] = 8,
    noise: Annotated[
        float,
        typer.Option(min=0.0, help="Gaussian action noise (x half the action range) or epsilon."),
    ] = 0.0,
    random_fraction: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Share of steps with a uniformly random action.")
    ] = 0.0,
    stochastic: Annotated[
        bool, typer.Option(help="Sample a trained policy's actions instead of taking the mode.")
    ] = False,
) -> None:
    """Record an offline dataset from a policy, in the D4RL HDF5 layout with metadata.

    --noise and --random-fraction turn one trained policy into medium- or replay-like data.
    """
    from rlformer.data.inspect import format_summary, summarize_dataset
    from rlformer.data.recorder import collect_dataset

    try:
        dataset = collect_dataset(
            policy,
            env,
            steps,
            out,
            seed=seed,
            num_envs=num_envs,
            noise=noise,
            random_fraction=random_fraction,
            deterministic=not stochastic,
        )
    except _user_errors() as err:
        fail(str(err))
    typer.echo(f"wrote {out}")
    typer.echo(format_summary(summarize_dataset(dataset)))


@dataset_app.command("info")
def dataset_info(
    path: Annotated[str, typer.Argument(help="d4rl:FILE, minari:ID or an rlformer recording.")],
) -> None:
    """Print episodes, transitions, return statistics, spaces and D4RL-normalised returns."""
    from rlformer.data import load_dataset
    from rlformer.data.inspect import format_summary, summarize_dataset

    try:
        dataset = load_dataset(path)
    except _user_errors() as err:
        fail(str(err))
    typer.echo(format_summary(summarize_dataset(dataset)))


@app.command("config-doc")
def config_doc() -> None:
    """List every config key with its default and description."""
    from rlformer.config import describe_fields

    for path, default, description in describe_fields():
        typer.echo(f"{path:32s} {default:14s} {description}")


def main() -> None:
    """Console entry point."""
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
