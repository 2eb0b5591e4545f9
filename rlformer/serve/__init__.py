"""Serve a memory policy over HTTP/JSON with Ray Serve, each client's memory held server-side.

Endpoints (see docs/guides/serving.md):

- ``POST /v1/sessions/{id}/act`` with ``{"observation": ..., "reward": float|null,
  "episode_start": bool, "action_mask": [bool, ...]|null, "deterministic": bool}``
  answers ``{"action": ...}``; ``episode_start: true`` starts (or restarts) the session.
- ``DELETE /v1/sessions/{id}``, ``GET /v1/health``, ``GET /v1/policy``.
- stateless (``ServeOptions(stateless=True)``): ``POST /v1/act`` with the same fields plus
  ``"state"``, the blob of the previous answer, answers ``{"action": ..., "state": ...}``
  (:mod:`rlformer.serve.state_blob`).

Decision Transformers take ``"target_return"`` at ``episode_start: true``.

Errors are one JSON line ``{"error": ..., "code": ..., "status": ...}`` with a 4xx / 5xx status.
The JSON forms of observations and actions are in :mod:`rlformer.serve.messages`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlformer.lazy import exports

if TYPE_CHECKING:
    from rlformer.serve.deployments import ServeOptions, build_app
    from rlformer.serve.launch import load_servable, serve_forever, start

__all__ = ["ServeOptions", "build_app", "load_servable", "serve_forever", "start"]

# loaded on first use (rlformer.lazy): the router's process imports this package without torch
__getattr__ = exports(
    __name__,
    {
        "ServeOptions": "rlformer.serve.deployments",
        "build_app": "rlformer.serve.deployments",
        **dict.fromkeys(["load_servable", "serve_forever", "start"], "rlformer.serve.launch"),
    },
)
