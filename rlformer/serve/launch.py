"""Start the serving application: Ray (embedded or a cluster), Serve's HTTP proxy, the app."""

from __future__ import annotations

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
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    serve.start(http_options={"host": host, "port": port})
    serve.run(build_app(policy, options), name=name, route_prefix=route_prefix)


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
