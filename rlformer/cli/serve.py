"""``rlformer serve``: a policy over HTTP/JSON on Ray Serve."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rlformer.cli.errors import fail, user_errors
from rlformer.cli.options import TrustCheckpoint


def serve_command(
    policy: Annotated[
        str, typer.Argument(help="Run directory, checkpoint file or export directory to serve.")
    ],
    port: Annotated[int, typer.Option(min=1, max=65535, help="HTTP port.")] = 8000,
    host: Annotated[str, typer.Option(help="Address to listen on (0.0.0.0: all).")] = "127.0.0.1",
    replicas: Annotated[
        int, typer.Option(min=1, help="Policy replicas; a session always reaches the same one.")
    ] = 1,
    max_batch: Annotated[
        int, typer.Option(min=1, help="Most sessions' steps batched into one forward pass.")
    ] = 64,
    session_ttl: Annotated[
        float, typer.Option(min=0.001, help="Seconds an idle session is kept.")
    ] = 600.0,
    max_sessions: Annotated[
        int, typer.Option(min=1, help="Sessions per replica; beyond, the least recently used go.")
    ] = 10_000,
    address: Annotated[
        str | None,
        typer.Option(
            help="Ray cluster to join, HOST:PORT (default: a Ray of its own, whatever "
            "RAY_ADDRESS says); one with token authentication also needs RAY_AUTH_MODE=token."
        ),
    ] = None,
    name: Annotated[
        str,
        typer.Option(help="Serve application name; on a cluster, one no other server holds."),
    ] = "rlformer",
    route_prefix: Annotated[
        str,
        typer.Option(help="URL path the routes hang under (on a cluster: one not taken)."),
    ] = "/",
    stateless: Annotated[
        bool,
        typer.Option(
            "--stateless",
            help="Keep no sessions: POST /v1/act carries the sealed state of the previous answer, "
            "and any replica answers.",
        ),
    ] = False,
    state_key_file: Annotated[
        Path | None,
        typer.Option(
            help="With --stateless: file of at least 32 bytes that signs the state blobs "
            "(default: a random key per start, so blobs die with the server)."
        ),
    ] = None,
    trust_checkpoint: TrustCheckpoint = False,
) -> None:
    """Serve a policy over HTTP/JSON with Ray Serve, each client session's memory on the server.

    POST /v1/sessions/ID/act, DELETE /v1/sessions/ID, GET /v1/health, GET /v1/policy (with
    --stateless: POST /v1/act instead of the sessions); a multi-agent run is served one session
    per episode, each step answering every agent; see docs/guides/serving.md.
    The URL is printed once the server answers. Ctrl-C stops it (on a cluster: deletes only
    this server's application).
    """
    from rlformer.extras import MissingExtra, require

    try:
        require("serve", "rlformer serve")
    except MissingExtra as err:
        fail(str(err))
    from rlformer.serve import ServeOptions, load_servable, serve_forever
    from rlformer.serve.batched_steps import UnservablePolicy
    from rlformer.serve.launch import ServeStartError, normalize_route_prefix
    from rlformer.serve.state_blob import read_state_key

    if state_key_file is not None and not stateless:
        fail("--state-key-file signs the state blobs of --stateless; add --stateless")
    try:
        key = "" if state_key_file is None else read_state_key(state_key_file)
    except (OSError, ValueError) as err:
        fail(f"--state-key-file: {err}")
    try:
        loaded = load_servable(policy, trust=trust_checkpoint, stateless=stateless)
    except (*user_errors(), UnservablePolicy) as err:
        fail(str(err))
    options = ServeOptions(
        replicas=replicas,
        max_batch=max_batch,
        session_ttl_s=session_ttl,
        max_sessions=max_sessions,
        stateless=stateless,
        state_key=key,
    )
    try:
        where = {"host": host, "port": port, "address": address}
        where |= {"name": name, "route_prefix": normalize_route_prefix(route_prefix)}
        serve_forever(
            loaded,
            options,
            announce=lambda url: typer.echo(f"serving {policy} at {url} (Ctrl-C stops)"),
            **where,
        )
    except ServeStartError as err:
        fail(str(err))
