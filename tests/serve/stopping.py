"""Ending a Serve instance on the shared local Ray so that the next one can start, and how long
a killed replica takes to come back."""

from __future__ import annotations

import time

REPLACEMENT_S = 120
"""How long Serve may take to replace a killed replica: it notices the death, then starts a new
process that imports torch and loads the policy (over 30 s seen on a loaded 2-core machine).
Requests for the killed replica's sessions wait that long for it."""


def shut_down_serve(timeout_s: float = 180.0) -> None:
    """``serve.shutdown()``, then wait until its controller, proxies and replicas are gone.

    ``serve.shutdown()`` stops waiting after 30 s with only a warning. On a loaded machine the
    old controller then goes on shutting down and kills the proxy that the next module's Serve
    starts under the same name, and that module's set-up fails."""
    import ray
    from ray import serve

    serve.shutdown()
    deadline = time.monotonic() + timeout_s
    while left := [
        actor["name"]
        for actor in ray.util.list_named_actors(all_namespaces=True)
        if actor["name"].startswith("SERVE_")
    ]:
        assert time.monotonic() < deadline, f"Serve actors alive {timeout_s:g} s on: {left}"
        time.sleep(0.5)
