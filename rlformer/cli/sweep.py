"""``rlformer sweep`` (seeds x variants x tasks) and ``rlformer tune`` (hyperparameter search),
both on Ray Tune, each with its ``report``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperGroup

from rlformer.cli.errors import RUN_FAILED_EXIT, check_writable, fail, user_errors
from rlformer.cli.options import DryRunTrials, RayAddress


class _SweepGroup(TyperGroup):
    """``rlformer sweep FILE`` means ``rlformer sweep run FILE``; ``report`` stays a command."""

    def parse_args(self, ctx, args):  # noqa: ANN001, ANN201 - click's signature
        if args and not args[0].startswith("-") and args[0] not in self.commands:
            args = ["run", *args]
        return super().parse_args(ctx, args)


sweep_app = typer.Typer(
    cls=_SweepGroup,
    help="Seeds x variants x tasks as Ray Tune trials: `rlformer sweep FILE` runs (or resumes) "
    "a sweep, `rlformer sweep report DIR` summarises one.",
    no_args_is_help=True,
)
tune_app = typer.Typer(
    cls=_SweepGroup,
    help="Hyperparameter search on Ray Tune: `rlformer tune FILE` searches (or resumes) and "
    "writes best.yaml with its evidence, `rlformer tune report DIR` prints it again.",
    no_args_is_help=True,
)


@sweep_app.command("run")
def sweep_run(
    file: Annotated[Path, typer.Argument(help="Sweep file (configs/sweeps/*.yaml).")],
    address: RayAddress = None,
    dir_: Annotated[
        Path | None,
        typer.Option("--dir", help="Sweep folder (default: the file's `dir`, else sweeps/NAME)."),
    ] = None,
    dry_run: DryRunTrials = False,
) -> None:
    """Run a sweep file's trials on Ray Tune (same command again: continue a killed sweep).

    Each trial is an ordinary run directory under DIR/trials/; Tune's state lives in DIR/tune/.
    Exit status 1 when a trial failed (the others still ran), 130 when interrupted (Ctrl-C).
    """
    from rlformer.sweep.spec import load_sweep

    try:
        sweep = load_sweep(file, dir_)
        if dry_run:
            from rlformer.sweep.runner import check_sweep

            check_sweep(sweep)
            for trial in sweep.trials:
                typer.echo(trial.name)
            typer.echo(f"ok: {len(sweep.trials)} trials, folder {sweep.directory}")
            return
        from rlformer.sweep.runner import run_sweep

        outcome = run_sweep(sweep, address)
    except user_errors() as err:
        fail(str(err))
    # Without a scheduler nothing stops a trial early: an unfinished one was interrupted.
    label = "stopped early" if sweep.spec.scheduler is not None else "unfinished"
    typer.echo(
        f"sweep {outcome.directory}: {len(outcome.finished)} finished, "
        f"{len(outcome.stopped_early)} {label}, {len(outcome.errored)} failed"
    )
    if outcome.stopped_early and sweep.spec.scheduler is None:
        typer.echo("run the same command again to continue the unfinished trials", err=True)
    for name, error in outcome.errored.items():
        typer.echo(f"failed: {name}: {error}", err=True)
    typer.echo(f"report: rlformer sweep report {outcome.directory}")
    if outcome.errored:
        raise typer.Exit(RUN_FAILED_EXIT)
    if outcome.stopped_early and sweep.spec.scheduler is None:
        raise typer.Exit(130)  # interrupted (Tune ends the run on SIGINT and saves its state)


@sweep_app.command("report")
def sweep_report(
    directory: Annotated[Path, typer.Argument(help="A sweep folder (holds sweep.json).")],
    metric: Annotated[
        str | None, typer.Option(help="Final score to compare (default: the sweep's `score`).")
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write the table as JSON.")
    ] = None,
    csv_out: Annotated[Path | None, typer.Option("--csv", help="Write the table as CSV.")] = None,
    plot: Annotated[
        Path | None,
        typer.Option(help="PNG: final scores per variant (95% CIs) and learning curves."),
    ] = None,
) -> None:
    """One table across variants and tasks: mean, IQM and bootstrap 95% CIs over seeds."""
    from rlformer.sweep.report import (
        format_table,
        load_sweep_results,
        plot_sweep,
        summarize,
        write_csv,
        write_json,
    )

    for out in (json_out, csv_out, plot):
        if out is not None:
            check_writable(out)
    try:
        results = load_sweep_results(directory, metric)
    except (ValueError, FileNotFoundError) as err:
        fail(str(err))
    rows = summarize(results)
    typer.echo(format_table(rows, results))
    if json_out is not None:
        write_json(rows, results, json_out)
        typer.echo(f"wrote {json_out}")
    if csv_out is not None:
        write_csv(rows, csv_out)
        typer.echo(f"wrote {csv_out}")
    if plot is not None:
        plot_sweep(results, rows, plot)
        typer.echo(f"wrote {plot}")


@tune_app.command("run")
def tune_run(
    file: Annotated[Path, typer.Argument(help="Tune file (configs/tune/*.yaml).")],
    address: RayAddress = None,
    dir_: Annotated[
        Path | None,
        typer.Option("--dir", help="Tune folder (default: the file's `dir`, else tune/NAME)."),
    ] = None,
    dry_run: DryRunTrials = False,
) -> None:
    """Search a tune file's space on Ray Tune; write best.yaml, trials.md/.csv, curves.png.

    Each trial is an ordinary run directory under DIR/trials/; the same command again continues
    a killed tune. Exit status 1 when a trial failed (the others still ran).
    """
    from rlformer.sweep.tune_spec import load_tune

    try:
        tune = load_tune(file, dir_)
        if dry_run:
            from rlformer.sweep.tuner import check_tune

            check_tune(tune)
            if tune.sweep is not None:
                for trial in tune.sweep.trials:
                    typer.echo(trial.name)
            count = len(tune.sweep.trials) if tune.sweep is not None else tune.spec.num_samples
            typer.echo(
                f"ok: {count} trials ({tune.spec.search} search, "
                f"{tune.spec.scheduler.type}), folder {tune.directory}"
            )
            return
        from rlformer.sweep.tuner import run_tune

        outcome = run_tune(tune, address)
    except user_errors() as err:
        fail(str(err))
    _tune_report(outcome.directory, list(outcome.errored))
    for name, error in outcome.errored.items():
        typer.echo(f"failed: {name}: {error}", err=True)
    if outcome.errored:
        raise typer.Exit(RUN_FAILED_EXIT)


@tune_app.command("report")
def tune_report(
    directory: Annotated[Path, typer.Argument(help="A tune folder (holds tune.json).")],
) -> None:
    """Rewrite best.yaml, trials.md/.csv and curves.png from a tune folder; print the summary."""
    _tune_report(directory, None)


def _tune_report(directory: Path, errored: list[str] | None) -> None:
    from rlformer.sweep.tune_report import load_tune_results, summary, write_outputs

    try:
        results = load_tune_results(directory, errored)
    except (ValueError, FileNotFoundError) as err:
        fail(str(err))
    write_outputs(results)
    typer.echo((directory / "trials.md").read_text().rstrip())
    typer.echo(summary(results))
