"""``rlformer train``: a new run from a config, a resumed run, or a dry run's checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from rlformer.cli.errors import RUN_FAILED_EXIT, fail, user_errors
from rlformer.cli.options import TrustCheckpoint


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
        typer.Option(help="Continue this run directory from its newest readable checkpoint."),
    ] = None,
    trust_checkpoint: TrustCheckpoint = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Check the config, the env, the model and the run folder, then stop (no run).",
        ),
    ] = False,
) -> None:
    """Train an agent from a YAML config; writes a run directory with metrics and checkpoints.

    SIGINT (Ctrl-C) or SIGTERM finishes the current iteration, writes a checkpoint and exits
    (130 / 143) saying how to resume; a second signal stops at once.
    """
    from rlformer.config import load_config
    from rlformer.runs.errors import RunFailed
    from rlformer.runs.signals import Interrupted

    if config is not None and resume is not None:
        fail("give either CONFIG (a new run) or --resume RUN_DIR (continue a run), not both")
    try:
        if dry_run and resume is not None:
            fail("--dry-run checks a new run's config; it does not combine with --resume")
        if resume is not None:
            from rlformer.runs.training import resume as resume_run

            result = resume_run(resume, set_ or [], trust=trust_checkpoint)
        else:
            cfg = load_config(config, set_ or [])  # a config error stops here, before torch loads
            if cfg.preset is not None:
                typer.echo(
                    f"preset {cfg.preset}: its settings under the config's own "
                    "(rlformer/config/presets.py; preset: null for none)"
                )
            from rlformer.runs.training import check_config
            from rlformer.runs.training import train as train_run

            if dry_run:
                typer.echo(check_config(cfg))
                return
            result = train_run(cfg)
    except user_errors() as err:
        fail(str(err))
    except RunFailed as err:
        fail(str(err), RUN_FAILED_EXIT)
    except Interrupted as err:
        typer.echo(f"interrupted: {err}", err=True)
        raise typer.Exit(err.exit_code) from None
    typer.echo(f"run directory: {result.run_dir}")
    if result.evaluation is not None:
        typer.echo(json.dumps(result.evaluation))
