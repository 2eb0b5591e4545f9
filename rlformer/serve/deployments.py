"""The Ray Serve application: N policy replicas that hold sessions, behind one HTTP router.

Why not Serve's model multiplexing for stickiness: it routes a model id to a replica that
has it loaded *when it can*, and otherwise to any replica, which for a session would mean a
silent fresh memory. Here each replica index is its own deployment (one Serve replica each) and
the router sends a session to ``sha256(id) mod N``, so a session reaches the same replica for
as long as the app lives. A replica that dies is restarted by Serve empty: the router knows
which incarnation served each session last and answers 410 rather than pretend.

With ``stateless`` the replicas hold no sessions: ``POST /v1/act`` carries the previous step's
sealed state (:mod:`rlformer.serve.state_blob`) and goes to the next replica in turn, or to
another one if that replica died, since nothing is lost with it.

The router's process imports this module and never torch: what only the replicas and the
driver need is imported where they use it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import time
import uuid
from collections import Counter, OrderedDict
from dataclasses import asdict, dataclass, replace
from typing import Any

from ray import serve
from ray.serve.handle import DeploymentHandle
from starlette.requests import Request
from starlette.responses import JSONResponse

from rlformer.serve.messages import RequestError
from rlformer.serve.replica_watch import ReplicaLost, ReplicaWatch
from rlformer.serve.sessions import SessionStore

_SESSION_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


@dataclass
class ServeOptions:
    """What ``rlformer serve`` takes besides the policy (see its ``--help``)."""

    replicas: int = 1
    max_batch: int = 64
    batch_wait_s: float = 0.002
    session_ttl_s: float = 600.0
    max_sessions: int = 10_000  # per replica
    max_body_bytes: int = 1 << 20
    request_timeout_s: float = 30.0
    stateless: bool = False  # clients carry their state (POST /v1/act); replicas hold none
    state_key: str = ""  # hex HMAC key of stateless blobs ("": a random one per app start)
    # stateless: how long a step waits on one replica while another is up before it goes
    # there; a batched step takes milliseconds, so this ends waits on a replica that died
    # unseen (Serve holds its requests until the replacement starts)
    step_patience_s: float = 5.0
    # /v1/health asks every replica for its figures at once and waits this long for each: one
    # silent past it (restarting: Serve holds calls to it until its replacement starts), or
    # held down by the stateless watch, is reported down instead of holding up the answer
    health_wait_s: float = 5.0
    server_id: str = ""  # answered by /v1/health, so a launcher knows its own server answers


@serve.deployment(ray_actor_options={"num_cpus": 0}, max_ongoing_requests=1024)
class PolicyReplica:
    """Holds its sessions' states and steps them in batches of up to ``max_batch``."""

    def __init__(self, servable: Any, index: int, options: dict[str, Any]) -> None:
        import torch

        from rlformer.serve.steps import session_steps

        torch.set_num_threads(1)  # small batched models: one thread per replica scales best
        opts = ServeOptions(**options)
        self.index = index
        self.steps = session_steps(servable, opts.stateless, opts.state_key)
        self.store = SessionStore(opts.session_ttl_s, opts.max_sessions)
        self.incarnation = uuid.uuid4().hex[:12]
        self.batch_sizes: Counter[int] = Counter()
        self._step.set_max_batch_size(opts.max_batch)
        self._step.set_batch_wait_timeout_s(opts.batch_wait_s)

    async def act(self, session_id: str | None, body: Any) -> dict[str, Any]:
        """One step; ``session_id`` None: a stateless step (its state in ``body``)."""
        try:
            request = self.steps.parse(session_id, body)
        except RequestError as err:
            result = err.payload()
        else:
            result = await self._step(request)
        return {**result, "incarnation": self.incarnation}

    @serve.batch(max_batch_size=64, batch_wait_timeout_s=0.002)
    async def _step(self, requests: list) -> list[dict[str, Any]]:
        return self.steps.step(requests, self.store, self._count)

    def _count(self, size: int) -> None:
        self.batch_sizes[size] += 1

    def delete(self, session_id: str) -> bool:
        return self.store.delete(session_id)

    def stats(self) -> dict[str, Any]:
        self.store.expire()
        return {
            "index": self.index,
            "incarnation": self.incarnation,
            "sessions": len(self.store),
            "batch_sizes": dict(self.batch_sizes),
            "rss_bytes": resident_bytes(),
        }

    def describe(self) -> dict[str, Any]:
        return self.steps.describe()


def resident_bytes() -> int | None:
    """This process's resident memory (Linux's /proc; None elsewhere), so that an operator
    sees from /v1/health whether a replica's memory stays flat as sessions come and go."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _error(err: RequestError) -> JSONResponse:
    return JSONResponse(err.payload(), status_code=err.status, headers=err.headers)


_METHODS = {
    "health": ("GET",),
    "policy": ("GET",),
    "act": ("POST",),
    "session_act": ("POST",),
    "session": ("DELETE",),
}
"""The methods each route answers; another method there is a 405 that names them."""


def _route_name(parts: list[str]) -> str | None:
    """Which route the path's parts after ``/v1/`` name (None: no route)."""
    if parts in (["health"], ["policy"], ["act"]):
        return parts[0]
    if len(parts) == 3 and parts[0] == "sessions" and parts[2] == "act":
        return "session_act"
    if len(parts) == 2 and parts[0] == "sessions":
        return "session"
    return None


@serve.deployment(ray_actor_options={"num_cpus": 0}, max_ongoing_requests=4096)
class Router:
    """The HTTP ingress: parses and bounds requests, sends each session to its replica."""

    def __init__(self, options: dict[str, Any], *replicas: DeploymentHandle) -> None:
        self.options = ServeOptions(**options)
        self.replicas = list(replicas)
        # which replica incarnation last held each session (bounded: best effort for old ids)
        self.homes: OrderedDict[str, str] = OrderedDict()
        self.max_homes = 2 * len(replicas) * self.options.max_sessions
        self.watch = ReplicaWatch(len(replicas), self._probe)  # stateless: replicas in turn

    def _replica(self, session_id: str) -> DeploymentHandle:
        digest = hashlib.sha256(session_id.encode()).digest()
        return self.replicas[int.from_bytes(digest[:8], "big") % len(self.replicas)]

    async def __call__(self, request: Request) -> JSONResponse:
        try:
            return await self._route(request)
        except RequestError as err:
            return _error(err)

    async def _route(self, request: Request) -> JSONResponse:
        path = request.url.path
        root = request.scope.get("root_path", "").rstrip("/")  # the app's route prefix
        rest = path[len(root) :] if root and path.startswith(root + "/") else path
        # only this app's own /v1/ routes: a root app must not answer /other-app/v1/...
        parts = rest[4:].strip("/").split("/") if rest.startswith("/v1/") else []
        method, route = request.method, _route_name(parts)
        allowed = _METHODS.get(route)
        if allowed is not None and method not in allowed:
            raise RequestError(
                405,
                f"{method} is not allowed on {path} (allowed: {', '.join(allowed)})",
                "method_not_allowed",
                headers={"Allow": ", ".join(allowed)},
            )
        if route == "health":
            return await self._health()
        if route == "policy":
            return JSONResponse(await self._call(self.replicas[0].describe.remote()))
        if route == "act":
            if not self.options.stateless:
                raise RequestError(
                    404,
                    "this server keeps sessions: POST /v1/sessions/ID/act (client-held state "
                    "needs a server started with --stateless)",
                    "not_found",
                )
            return await self._act_stateless(await self._json(request))
        if route in ("session_act", "session") and self.options.stateless:
            raise RequestError(
                404,
                "this server is stateless (--stateless): POST /v1/act with the state of the "
                "previous answer",
                "not_found",
            )
        if route in ("session_act", "session"):
            session_id = parts[1]
            if not _SESSION_ID.match(session_id):
                raise RequestError(400, "session ids are 1-128 characters of A-Z a-z 0-9 . _ : -")
            if route == "session_act":
                return await self._act(session_id, await self._json(request))
            gone = await self._call(self._replica(session_id).delete.remote(session_id))
            self.homes.pop(session_id, None)
            return JSONResponse({"deleted": bool(gone)})
        routes = (
            "POST /v1/act"
            if self.options.stateless
            else "POST /v1/sessions/ID/act, DELETE /v1/sessions/ID"
        )
        raise RequestError(
            404,
            f"no route {method} {path} ({routes}, GET /v1/health, GET /v1/policy)",
            "not_found",
        )

    async def _json(self, request: Request) -> Any:
        limit = self.options.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise RequestError(413, f"body over {limit} bytes", "body_too_large")
        body = bytearray()
        async for chunk in request.stream():
            body.extend(chunk)
            if len(body) > limit:
                raise RequestError(413, f"body over {limit} bytes", "body_too_large")
        try:
            return json.loads(body)
        except (ValueError, UnicodeDecodeError) as err:
            raise RequestError(400, f"the body is not JSON ({err})"[:300]) from None

    async def _call(self, response: Any, timeout_s: float | None = None) -> Any:
        """A replica's answer within the request timeout (or ``timeout_s``, what is left of
        it); Ray failures become clear errors."""
        from ray.exceptions import RayActorError

        try:
            return await asyncio.wait_for(response, timeout_s or self.options.request_timeout_s)
        except TimeoutError:
            raise RequestError(
                503, f"no answer within {self.options.request_timeout_s:g} s", "timeout"
            ) from None
        except RayActorError:
            raise RequestError(
                410,
                "the replica holding this session died and its memory is lost; start a new "
                "episode with episode_start: true",
                "replica_lost",
            ) from None

    async def _act(self, session_id: str, body: Any) -> JSONResponse:
        result = await self._call(self._replica(session_id).act.remote(session_id, body))
        incarnation = result.pop("incarnation")
        home = self.homes.get(session_id)
        if result.get("code") == "unknown_session" and home not in (None, incarnation):
            raise RequestError(
                410,
                f"session {session_id!r} was held by a replica that restarted; its memory is "
                "lost, start a new episode with episode_start: true",
                "replica_lost",
            )
        if "error" in result:
            return JSONResponse(result, status_code=result["status"])
        self.homes[session_id] = incarnation
        self.homes.move_to_end(session_id)
        while len(self.homes) > self.max_homes:
            self.homes.popitem(last=False)
        return JSONResponse(result)

    async def _act_stateless(self, body: Any) -> JSONResponse:
        """A step on the next replica in turn that is up; a step on a replica that died or
        stays silent past the patience goes to the next one, since the state travels with the
        request. Only the request timeout ends the tries."""
        timeout = self.options.request_timeout_s
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            index = self.watch.next_index()
            patience = self.options.step_patience_s
            # nowhere else to go, or the deadline comes first: the step just waits
            elsewhere = patience < left and self.watch.others_up(index)
            response = self.replicas[index].act.remote(None, body)
            try:
                answer = self._call(response, left)
                giving_up = patience if elsewhere else None
                result = await self.watch.wait(index, answer, response.cancel, giving_up)
            except RequestError as err:
                if err.code != "replica_lost":
                    raise
                self.watch.mark_down(index)  # its other waiting steps leave it now
                if not self.watch.others_up(index):
                    await asyncio.sleep(0.1)  # every replica is down: Serve is restarting them
                continue
            except ReplicaLost:  # found dead or silent: this step goes to the next replica
                continue
            result.pop("incarnation", None)
            return JSONResponse(result, status_code=result.get("status", 200))
        raise RequestError(503, f"no answer within {timeout:g} s", "timeout")

    async def _probe(self, index: int) -> None:
        """Answers once replica ``index`` serves again (Serve holds the call until then)."""
        await self._call(self.replicas[index].stats.remote())

    async def _replica_figures(self, index: int) -> dict[str, Any]:
        """Replica ``index``'s figures with ``up: true``; ``{index, up: false}`` when the
        stateless watch holds it down, or it is dead or silent past ``health_wait_s``."""
        down = {"index": index, "up": False}
        if index in self.watch.down:
            return down
        response = self.replicas[index].stats.remote()
        try:
            figures = await self._call(response, self.options.health_wait_s)
        except RequestError:
            response.cancel()
            return down
        return {**figures, "up": True}

    async def _health(self) -> JSONResponse:
        """The server's figures, every replica asked at once: ``ok`` (200) with all replicas
        up, ``degraded`` (200) with some, ``unavailable`` (503) with none, so that a load
        balancer's probe is answered within ``health_wait_s`` while a replica restarts."""
        count = len(self.replicas)
        per_replica = await asyncio.gather(*(self._replica_figures(i) for i in range(count)))
        up = [figures for figures in per_replica if figures["up"]]
        histogram: Counter[int] = Counter()
        for figures in up:
            histogram.update({int(k): v for k, v in figures["batch_sizes"].items()})
        status = "ok" if len(up) == count else "degraded" if up else "unavailable"
        body = {
            "status": status,
            "server_id": self.options.server_id,
            "mode": "stateless" if self.options.stateless else "sessions",
            "replicas": count,
            "replicas_up": len(up),
            "sessions": sum(figures["sessions"] for figures in up),
            "batch_sizes": {str(k): histogram[k] for k in sorted(histogram)},
            "per_replica": per_replica,
        }
        return JSONResponse(body, status_code=503 if status == "unavailable" else 200)


def build_app(policy: Any, options: ServeOptions) -> Any:
    """The Serve application for ``policy`` (a bound ``Router`` over its replicas): a
    :class:`~rlformer.policies.base.Policy`, or a team that brings its own steps.

    Stateless: the key is made here when none is given, so that every replica shares it, and
    the router's body limit grows by the longest state blob the policy's state can need.
    """
    from rlformer.serve.batched_steps import row_ops
    from rlformer.serve.state_blob import new_state_key
    from rlformer.serve.steps import check_servable, state_codec

    check_servable(policy, options.stateless)
    router_options = dict(asdict(options))
    if options.stateless:
        if not options.state_key:
            options = replace(options, state_key=new_state_key())
        codec = state_codec(policy, row_ops(policy), options.state_key)
        router_options["max_body_bytes"] = options.max_body_bytes + codec.max_chars
    router_options["state_key"] = ""  # the router never opens a blob
    opts = asdict(options)
    replicas = [
        PolicyReplica.options(name=f"PolicyReplica{i}").bind(policy, i, opts)
        for i in range(options.replicas)
    ]
    return Router.bind(router_options, *replicas)
