"""How a command fails: the exit statuses, the ``error: ...`` lines, and which exceptions are
errors the user can fix (printed without a traceback)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import typer

USER_ERROR_EXIT = 2
RUN_FAILED_EXIT = 1


def fail(message: str, code: int = USER_ERROR_EXIT) -> NoReturn:
    """Print ``error: message`` (each line) to stderr and exit with ``code`` (2: bad input)."""
    for line in str(message).splitlines() or [""]:
        typer.echo(f"error: {line}", err=True)
    raise typer.Exit(code)


def user_errors() -> tuple[type[Exception], ...]:
    """The exceptions a command reports as ``error: ...`` with exit status 2 (read from
    torch-free modules: a command refusing bad input never loads torch for it)."""
    from rlformer.config import ConfigError
    from rlformer.data.errors import DatasetError
    from rlformer.extras import MissingExtra
    from rlformer.policies.errors import PolicyError
    from rlformer.rollout.env_factory import EnvError
    from rlformer.rollout.env_guard import EnvCrash, EnvDataError
    from rlformer.runs.errors import CheckpointError

    return (
        ConfigError,
        MissingExtra,
        EnvError,
        CheckpointError,
        DatasetError,
        PolicyError,
        EnvCrash,
        EnvDataError,
    )


def check_writable(path: Path) -> None:
    """Create the output's folder and make sure a file can be written there."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        fail(f"cannot write {path}: {err.strerror or err}")
    if path.is_dir() or not os.access(path.parent, os.W_OK):
        fail(f"cannot write {path}: not a writable file path")
