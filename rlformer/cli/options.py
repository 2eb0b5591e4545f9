"""Options that several commands take, spelled and explained the same way in each."""

from __future__ import annotations

from typing import Annotated

import typer

TRUST_HELP = (
    "Also load checkpoints that need unpickling (written by an older rlformer, or env states "
    "from another user or machine). Unpickling can run code: only for files you trust."
)
# Flags take one form (no --no- twin): the default is always off, and a twin column would
# squeeze every command's help.
TrustCheckpoint = Annotated[bool, typer.Option("--trust-checkpoint", help=TRUST_HELP)]
RayAddress = Annotated[
    str | None,
    typer.Option(help="Join a running Ray cluster ('auto' or host:port); default: embedded."),
]
DryRunTrials = Annotated[
    bool, typer.Option("--dry-run", help="Validate the file and list the trials, then stop.")
]
