"""The serving modules' one Serve instance on the shared local Ray.

Each serving module adds its apps on the running instance's port and deletes them when it is
done, so that Serve's controller and HTTP proxy start once for all of those modules (two
processes, about 35 s of CPU each time on a loaded 2-core machine). The shared Ray's shutdown
after the last of them ends Serve with it."""

from __future__ import annotations

import socket
import time

REPLACEMENT_S = 120
"""How long Serve may take to replace a killed replica: it notices the death, then starts a new
process that imports torch and loads the policy (over 30 s seen on a loaded 2-core machine).
Requests for the killed replica's sessions wait that long for it."""


def free_port() -> int:
    """A TCP port on the loopback that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_port() -> int:
    """The HTTP port of the Serve instance running on the connected Ray, or a free port for
    the first serving module's (``rlformer.serve.start`` starts Serve there)."""
    from rlformer.serve.launch import _serve_details

    details = _serve_details()
    if details is None:
        return free_port()
    return int((details.get("http_options") or {})["port"])


def delete_apps(*names: str, timeout_s: float = 180.0) -> None:
    """Delete a module's apps and wait until their replicas are gone, so that a later module's
    apps of the same names or routes meet nothing of them."""
    import ray
    from ray import serve

    for name in names:
        serve.delete(name)
    prefixes = tuple(f"SERVE_REPLICA::{name}#" for name in names)
    deadline = time.monotonic() + timeout_s
    while left := [
        actor["name"]
        for actor in ray.util.list_named_actors(all_namespaces=True)
        if actor["name"].startswith(prefixes)
    ]:
        assert time.monotonic() < deadline, f"Serve replicas alive {timeout_s:g} s on: {left}"
        time.sleep(0.5)
