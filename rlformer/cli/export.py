"""``rlformer export``: a trained policy's act step as an ONNX or torch.export graph."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rlformer.cli.errors import fail, user_errors
from rlformer.cli.options import TrustCheckpoint


def export(
    policy: Annotated[str, typer.Argument(help="Run directory or checkpoint file to export.")],
    out: Annotated[Path, typer.Option(help="Directory to write the graph and policy.json to.")],
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="onnx (policy.onnx, runs with onnxruntime alone) or torch-export (policy.pt2).",
        ),
    ] = "onnx",
    trust_checkpoint: TrustCheckpoint = False,
) -> None:
    """Export a trained policy's act step (PPO actor or Decision Transformer) for deployment.

    The graph holds normalisation, episode resets and the env's action format; policy.json
    describes its inputs, state and sampling. `rlformer eval DIR` evaluates the export.
    """
    from rlformer.export.writer import ExportError, export_policy
    from rlformer.extras import MissingExtra, require
    from rlformer.policies import load_policy

    try:
        require("export", "rlformer export")
        loaded = load_policy(policy, trust=trust_checkpoint)
        several = getattr(loaded, "export_to", None)  # a team: one graph per policy group
        written = several(out, fmt) if several is not None else export_policy(loaded, out, fmt)
    except (*user_errors(), ExportError, MissingExtra) as err:
        fail(str(err))
    typer.echo(f"wrote {written}")
