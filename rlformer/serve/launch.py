"""Start the serving application: Ray (embedded or a cluster), Serve's HTTP proxy, the app.

Two ways to run, and what each may touch:

- **Embedded** (no ``--address``): a Ray of its own, always (``address="local"``, never the
  cluster that ``RAY_ADDRESS`` or a ``ray start`` on this machine points to). The port is
  checked before anything starts, since Serve's proxy binds with ``SO_REUSEPORT`` and would
  otherwise share a port with another server, each getting part of the traffic.
- **On a cluster** (``--address``): the app joins the cluster's Serve instance, under its own
  name and route. One proxy port serves a whole cluster, so a ``--port`` other than the one it
  listens on is refused; so are a name or a route another application holds. On the way out
  only this app is deleted: Serve, and everyone else's applications, stay up.

The startup line is printed once the app answers ``/v1/health`` with this server's own id, so
the URL it gives is one that reaches this server.
"""

from __future__ import annotations

import os
import signal
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rlformer.serve.deployments import ServeOptions, build_app
from rlformer.serve.steps import check_servable

APP_NAME = "rlformer"
READY_TIMEOUT_S = 180.0
# Serve's controller kills an HTTP proxy that is not ready 5 s after it was started, and starts
# another; on a busy machine a proxy's process can take longer to start, and ``serve.start``,
# which waits on the first proxy, then fails. Processes of an embedded Ray read this from the
# environment of the process that starts it.
PROXY_READY_ENV = "RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S"
PROXY_READY_TIMEOUT_S = "60"


def load_servable(spec: str | Path, trust: bool = False, stateless: bool = False) -> Any:
    """The policy (or multi-agent team) to serve, loaded here so that a bad path or kind, or a
    servable that cannot be served as asked, fails before Ray starts.

    The loaded object (not the path) is shipped to the replicas, so cluster nodes need no
    copy of the checkpoint or export.
    """
    from rlformer.policies import load_policy

    policy = load_policy(spec, trust=trust)
    check_servable(policy, stateless)  # e.g. a state that cannot be batched per session
    return policy


class ServeStartError(RuntimeError):
    """The server cannot start as asked; the one-line message says why and what to change."""


class ClusterError(ServeStartError, ConnectionError):
    """The Ray cluster named by ``--address`` cannot be joined; the message says what to do."""


@dataclass(frozen=True)
class Endpoint:
    """Where an application listens: the proxy's host and port, and its route prefix."""

    host: str
    port: int
    route_prefix: str = "/"
    cluster_host: str | None = None  # the Ray address's host, when the app runs on a cluster

    @property
    def url(self) -> str:
        """The base URL of the app's ``/v1/`` routes."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{self.route_prefix.rstrip('/')}/v1/"

    @property
    def reachable_url(self) -> str:
        """:attr:`url` as this machine calls it: a proxy listening on every interface is
        reached at the cluster's host, or at loopback when it runs here."""
        if self.host in ("0.0.0.0", "::", ""):
            return replace(self, host=self.cluster_host or "127.0.0.1").url
        return self.url


def normalize_route_prefix(prefix: str) -> str:
    """``prefix`` as Serve wants it: one leading slash, no trailing one (``/`` for the root)."""
    stripped = prefix.strip().strip("/")
    if any(c in stripped for c in "?#{} ") or "//" in stripped:
        raise ServeStartError(f"--route-prefix {prefix!r}: expected a path such as /team-a")
    return "/" + stripped


def check_port_free(host: str, port: int) -> None:
    """Refuse a port something already listens on (another ``rlformer serve`` included).

    A plain bind without ``SO_REUSEADDR``/``SO_REUSEPORT`` fails on any port held by a
    listening socket, including the ``SO_REUSEPORT`` one of a Serve proxy. Another process
    may still take the port between this check and Serve's bind; the readiness check, which
    waits for this server's own id, is what catches that.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError as err:
            reason = err.strerror or str(err)
            raise ServeStartError(
                f"port {port} on {host} is not free ({reason}): another server (perhaps another "
                "`rlformer serve`) holds it; stop it or choose another --port"
            ) from None


def start(
    policy: Any,
    options: ServeOptions,
    host: str = "127.0.0.1",
    port: int = 8000,
    address: str | None = None,
    route_prefix: str = "/",
    name: str = APP_NAME,
) -> Endpoint:
    """Deploy the app under ``name`` and ``route_prefix``; where it listens.

    Ray is started here (embedded, or joining ``address``) unless the caller already
    initialised it, as tests and benchmarks that hold several apps in one Serve do.
    """
    import ray
    from ray import serve

    route_prefix = normalize_route_prefix(route_prefix)
    if not ray.is_initialized():
        if address is None:
            check_port_free(host, port)
        _init_ray(address)
    running = _serve_details()
    cluster_host = None  # HOST of --address HOST:PORT (or ray://HOST:PORT)
    if address is not None:
        cluster_host = address.split("://")[-1].rpartition(":")[0].strip("[]") or None
    if running is not None:
        endpoint = _check_cluster_slot(running, name, route_prefix, port)
    else:
        endpoint = Endpoint(host, port, route_prefix)
        serve.start(http_options={"host": host, "port": port})
    endpoint = replace(endpoint, cluster_host=cluster_host)
    serve.run(build_app(policy, options), name=name, route_prefix=route_prefix, blocking=False)
    return endpoint


def _check_cluster_slot(details: dict[str, Any], name: str, route: str, port: int) -> Endpoint:
    """The endpoint of a new app on a running Serve instance, or why it cannot be had there."""
    http = details.get("http_options") or {}
    serve_host, serve_port = str(http.get("host", "127.0.0.1")), int(http.get("port", 8000))
    if port != serve_port:
        raise ServeStartError(
            f"Serve on this Ray cluster already listens on port {serve_port} (one HTTP port per "
            f"cluster): pass --port {serve_port}"
        )
    for other, app in (details.get("applications") or {}).items():
        if other == name:
            raise ServeStartError(
                f"an application named {name!r} already runs on this cluster (route "
                f"{app.get('route_prefix')}); choose another --name, or stop that server first"
            )
        if app.get("route_prefix") == route:
            raise ServeStartError(
                f"route {route} is served by the application {other!r} on this cluster; choose "
                "another --route-prefix"
            )
    return Endpoint(serve_host, serve_port, route)


def _serve_details() -> dict[str, Any] | None:
    """The running Serve instance's details on the connected cluster (None: none runs).

    Serve's public status omits the proxy's port and the applications' routes, which decide
    whether another app can join; the controller's details hold both.
    """
    from ray.serve.context import _get_global_client

    client = _get_global_client(raise_if_no_controller_running=False)
    return None if client is None else client.get_serve_details()


def _init_ray(address: str | None) -> None:
    """Embedded Ray, or the cluster at ``address`` with a one-line reason when it refuses.

    Embedded means a new local Ray even when ``RAY_ADDRESS`` names a cluster (dropped from
    this process's environment, so that nothing started from it joins that cluster either).

    Ray's ``ray start --head`` turns on token authentication whenever a token exists, but a
    driver given an explicit address never sends its token unless ``RAY_AUTH_MODE=token``
    says so, so that a token never leaks to an address typed by mistake: the usual failure.
    """
    import ray
    from ray.exceptions import AuthenticationError

    common: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
    if address is None:
        os.environ.pop("RAY_ADDRESS", None)
        os.environ.setdefault(PROXY_READY_ENV, PROXY_READY_TIMEOUT_S)
        ray.init(address="local", include_dashboard=False, **common)
        return
    try:
        ray.init(address=address, **common)
    except ConnectionError as err:
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


def wait_until_ready(
    endpoint: Endpoint, server_id: str, timeout_s: float = READY_TIMEOUT_S
) -> None:
    """Block until ``/v1/health`` at ``endpoint`` answers with ``server_id``.

    Another program answering on that port, or nothing answering, is refused in one line
    after ``timeout_s``.
    """
    import requests

    url, deadline, seen = endpoint.reachable_url + "health", time.monotonic() + timeout_s, ""
    while time.monotonic() < deadline:
        try:
            answer = requests.get(url, timeout=5)
            if answer.ok and answer.json().get("server_id") == server_id:
                return
            seen = f"; {url} answered {answer.status_code} without this server's id"
        except (requests.RequestException, ValueError, AttributeError):
            pass
        time.sleep(0.25)
    raise ServeStartError(
        f"the server did not answer at {endpoint.url} within {timeout_s:g} s{seen}"
    )


def serve_forever(
    policy: Any,
    options: ServeOptions,
    announce: Callable[[str], None] = print,
    **where: Any,
) -> None:
    """:func:`start`, wait until it answers, ``announce(url)``, then block until Ctrl-C or
    SIGTERM. On the way out only this app is deleted; an embedded Ray ends with it."""
    import ray
    from ray import serve

    options = replace(options, server_id=options.server_id or uuid.uuid4().hex)
    name = str(where.get("name", APP_NAME))
    embedded = where.get("address") is None
    deployed = False
    try:
        endpoint = start(policy, options, **where)
        deployed = True
        # after ray.init, which installs its own handler: service managers stop with SIGTERM
        signal.signal(signal.SIGTERM, _interrupt)
        wait_until_ready(endpoint, options.server_id)
        announce(endpoint.url)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        if deployed and ray.is_initialized():
            serve.delete(name)  # in-flight requests finish; other applications stay
        if embedded and ray.is_initialized():
            ray.shutdown()  # this process's own Ray, Serve's controller and proxy with it


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
