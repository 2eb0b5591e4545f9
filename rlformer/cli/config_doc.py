"""``rlformer config-doc``: every config key with its default and description."""

from __future__ import annotations

import typer


def config_doc() -> None:
    """List every config key with its default and description."""
    from rlformer.config import reference_lines

    for line in reference_lines():
        typer.echo(line)
