"""``rlformer`` command line: wiring only — each command calls one library function.

Errors the user can fix (bad config, unknown env id, missing or incompatible checkpoint, bad
dataset) are printed as ``error: ...`` lines and exit with status 2, without a traceback
(:mod:`rlformer.cli.errors`). Each command group lives in a module of its own; this one puts
them together into :data:`app`, and :func:`main` runs it.
"""

from __future__ import annotations

import os
import sys

import typer

from rlformer.cli import collect, config_doc, dataset, evaluate, export, serve, sweep, train

app = typer.Typer(
    name="rlformer",
    help="Reinforcement-learning agents with Transformer memory (GTrXL-PPO, Decision Transformer).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(dataset.dataset_app, name="dataset")
app.add_typer(sweep.sweep_app, name="sweep")
app.command()(train.train)
app.command("eval")(evaluate.evaluate)
app.command()(evaluate.plot)
app.command()(collect.collect)
app.command("export")(export.export)
app.command("serve")(serve.serve_command)
app.add_typer(sweep.tune_app, name="tune")
app.command("config-doc")(config_doc.config_doc)


def add_working_directory_to_path() -> None:
    """Let ``env.id: module:EnvId``, ``env.imports`` and wrappers find modules in the folder
    the command runs from, as ``python -m`` would.

    A console script puts its own folder first on ``sys.path``, not the working directory.
    The directory is appended (an installed package of the same name still wins) and also
    added to ``PYTHONPATH``, which processes started from here inherit: an embedded Ray's
    workers, Tune trials, subprocess evaluations.
    """
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)
    entries = [e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e]
    if cwd not in entries:
        os.environ["PYTHONPATH"] = os.pathsep.join([*entries, cwd])


def main() -> None:
    """Console entry point."""
    add_working_directory_to_path()
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
