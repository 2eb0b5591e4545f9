"""Start the serving application: Ray (embedded or a cluster), Serve's HTTP proxy, the app."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from rlformer.policies.base import Policy
from rlformer.serve.deployments import ServeOptions, build_app
from rlformer.serve.stepper import row_ops

APP_NAME = "rlformer"


def load_servable(spec: str | Path, trust: bool = False) -> Policy:
    """The policy to serve, loaded here so that a bad path or kind fails before Ray starts.

    The loaded object (not the path) is shipped to the replicas, so cluster nodes need no
    copy of the checkpoint.
    """
    from rlformer.policies import load_policy

    policy = load_policy(spec, trust=trust)
    row_ops(policy)  # refuses a policy whose state cannot be batched per session
    return policy


def start(
    policy: Policy,
    options: ServeOptions,
    host: str = "127.0.0.1",
    port: int = 8000,
    address: str | None = None,
    route_prefix: str = "/",
    name: str = APP_NAME,
) -> None:
    """Run the app under ``route_prefix`` (Ray started here unless already initialised)."""
    import ray
    from ray import serve

    if not ray.is_initialized():
        _init_ray(address)
    serve.start(http_options={"host": host, "port": port})
    serve.run(build_app(policy, options), name=name, route_prefix=route_prefix)


class ClusterError(ConnectionError):
    """The Ray cluster named by ``--address`` cannot be joined; the message says what to do."""


def _init_ray(address: str | None) -> None:
    """Embedded Ray, or the cluster at ``address`` with a one-line reason when it refuses.

    Ray's ``ray start --head`` turns on token authentication whenever a token exists, but a
    driver given an explicit address never sends its token unless ``RAY_AUTH_MODE=token``
    says so, so that a token never leaks to an address typed by mistake: the usual failure.
    """
    import ray
    from ray.exceptions import AuthenticationError

    try:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    except ConnectionError as err:
        if address is None:
            raise
        token = (
            "RAY_AUTH_MODE=token, with the cluster's token in ~/.ray/auth_token, "
            "RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH"
        )
        if any(isinstance(e, AuthenticationError) for e in _causes(err)):
            raise ClusterError(
                f"the Ray cluster at {address} requires its authentication token: set {token}"
            ) from None
        hint = ""
        if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
            hint = (
                "; if it uses token authentication (`ray start` turns it on when a token "
                f"exists), set {token}"
            )
        raise ClusterError(f"cannot join the Ray cluster at {address} ({err}){hint}") from None


def _causes(err: BaseException) -> list[BaseException]:
    """``err`` and what caused it, outermost first (bounded: causes may form a cycle)."""
    chain: list[BaseException] = []
    current: BaseException | None = err
    while current is not None and len(chain) < 16:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def serve_forever(policy: Policy, options: ServeOptions, **kwargs: object) -> None:
    """:func:`start`, then block until Ctrl-C or SIGTERM; Serve is shut down on the way out
    (and an embedded Ray with the process)."""
    from ray import serve

    start(policy, options, **kwargs)  # type: ignore[arg-type]
    # after ray.init, which installs its own handler: service managers stop with SIGTERM
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        serve.shutdown()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
