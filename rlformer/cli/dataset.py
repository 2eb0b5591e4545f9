"""``rlformer dataset``: inspect offline datasets."""

from __future__ import annotations

from typing import Annotated

import typer

from rlformer.cli.errors import fail, user_errors

dataset_app = typer.Typer(help="Inspect offline datasets.", no_args_is_help=True)


@dataset_app.command("info")
def dataset_info(
    path: Annotated[str, typer.Argument(help="d4rl:FILE, minari:ID or an rlformer recording.")],
) -> None:
    """Print episodes, transitions, return statistics, spaces and D4RL-normalised returns."""
    from rlformer.data import load_dataset
    from rlformer.data.inspect import format_summary, summarize_dataset

    try:
        dataset = load_dataset(path)
    except user_errors() as err:
        fail(str(err))
    typer.echo(format_summary(summarize_dataset(dataset)))
