"""Throughput and latency of ``rlformer serve`` under N concurrent clients on loopback.

One embedded Ray and one Serve HTTP proxy hold five apps, each under its own route prefix and
measured in turn with the same load:

* ``no-op``: the app's shape (an HTTP ingress that parses the body and calls one replica)
  with a replica that answers a constant: the ceiling that HTTP and Ray impose here;
* ``gtrxl M=64``: the popgym preset's GTrXL (1 layer, d_model 64, 4 heads, memory 64) on an
  8-dim observation and 4 actions, batching up to 64 sessions' steps per forward pass;
* ``gtrxl M=64 unbatched``: the same app with ``max_batch_size=1``;
* ``gtrxl M=256`` and ``gtrxl M=256 unbatched``: the same with memory 256;
* with ``--stateless``, per memory ``gtrxl M=... stateless``: ``POST /v1/act``, each step
  carrying the signed state of the previous answer (no sessions), and ``... stateless, patience
  off``: the same with ``step_patience_s`` past the request timeout, so that no step's wait is
  watched for a replica that went silent (with one replica nothing is watched either way: give
  ``--replicas 2`` to measure what the watch costs).

Each of N clients (asyncio + aiohttp, at most N connections) plays episodes of
``--episode-steps`` steps with its own session (``episode_start`` at the first, DELETE at the
end) and waits for each answer before the next step. Steps are counted in a window of
``--seconds`` after ``--warmup``; the batch-size distribution is the change of
``GET /v1/health``'s histogram over the cell. Everything is bounded: N <= 1024, a request
timeout, and ``--time-limit`` for the whole run (cells that would pass it are skipped).

The clients share the machine with the server, as a real deployment's clients would not: on a
small machine the figures are a lower bound. Run on an idle machine::

    .venv/bin/python benchmarks/serve.py                  # N = 1, 16, 64, 256 (~5 min)
    .venv/bin/python benchmarks/serve.py --quick          # N = 1, 4, a few seconds each
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from ray import serve
from ray.serve.handle import DeploymentHandle
from starlette.requests import Request
from starlette.responses import JSONResponse

from rlformer.algos.ppo.policy import ActorCriticPolicy
from rlformer.config import ModelConfig
from rlformer.config.presets import apply_preset
from rlformer.networks.actor_critic import ActorCritic
from rlformer.policies.base import PolicyInfo
from rlformer.serve import ServeOptions, start

OBSERVATION = gym.spaces.Box(-1.0, 1.0, (8,), np.float32)
ACTION = gym.spaces.Discrete(4)
MAX_CLIENTS = 1024
REQUEST_TIMEOUT_S = 30.0


# ------------------------------------------------------------------ the apps
@serve.deployment(ray_actor_options={"num_cpus": 0}, max_ongoing_requests=1024)
class NoopReplica:
    """Answers every step with the same action: no model, no state."""

    async def act(self, session_id: str, body: Any) -> dict[str, Any]:
        return {"action": 0}


@serve.deployment(ray_actor_options={"num_cpus": 0}, max_ongoing_requests=4096)
class NoopRouter:
    """The app's request path without the policy: parse the JSON body, one handle call."""

    def __init__(self, replica: DeploymentHandle) -> None:
        self.replica = replica

    async def __call__(self, request: Request) -> JSONResponse:
        parts = request.url.path.strip("/").split("/")
        if request.method == "POST":
            body = json.loads(await request.body())
            return JSONResponse(await self.replica.act.remote(parts[-2], body))
        if request.method == "DELETE":
            return JSONResponse({"deleted": True})
        return JSONResponse({"status": "ok", "batch_sizes": {}})


def popgym_policy(memory_length: int) -> ActorCriticPolicy:
    """The popgym preset's GTrXL with ``memory_length`` slots, random weights."""
    raw = apply_preset({"preset": "popgym", "env": {"id": "popgym-RepeatPreviousEasy-v0"}})
    cfg = ModelConfig.model_validate(raw["model"])
    core = cfg.core.model_copy(update={"memory_length": memory_length})
    torch.manual_seed(0)
    model = ActorCritic(OBSERVATION, ACTION, cfg.model_copy(update={"core": core}))
    return ActorCriticPolicy(model, PolicyInfo(f"popgym-gtrxl-m{memory_length}", "ppo"))


def start_apps(
    port: int, memories: list[int], replicas: int, stateless: bool = False
) -> dict[str, str]:
    """Every app under its own prefix; ``{label: route prefix}`` in measuring order."""
    serve.run(NoopRouter.bind(NoopReplica.bind()), name="noop", route_prefix="/noop")
    prefixes = {"no-op": "/noop"}
    for memory in memories:
        policy = popgym_policy(memory)
        for label, batch in ((f"gtrxl M={memory}", 64), (f"gtrxl M={memory} unbatched", 1)):
            name = f"m{memory}-b{batch}"
            options = ServeOptions(replicas=replicas, max_batch=batch)
            start(policy, options, port=port, route_prefix=f"/{name}", name=name)
            prefixes[label] = f"/{name}"
        if not stateless:
            continue
        for suffix, patience in (("", ServeOptions.step_patience_s), (", patience off", 1e9)):
            name = f"m{memory}-stateless{'-off' if suffix else ''}"
            options = ServeOptions(
                replicas=replicas, max_batch=64, stateless=True, step_patience_s=patience
            )
            start(policy, options, port=port, route_prefix=f"/{name}", name=name)
            prefixes[f"gtrxl M={memory} stateless{suffix}"] = f"/{name}"
    return prefixes


# ------------------------------------------------------------------ the load
@dataclass
class Cell:
    """What one app did under one load."""

    app: str
    clients: int
    seconds: float
    steps: int = 0
    sessions: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)
    batch_sizes: dict[int, int] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        lat = sorted(self.latencies) or [float("nan")]
        sizes = Counter(self.batch_sizes)
        calls = sum(sizes.values())
        return {
            "app": self.app,
            "clients": self.clients,
            "steps_per_s": self.steps / self.seconds,
            "sessions_per_s": self.sessions / self.seconds,
            "p50_ms": 1e3 * lat[len(lat) // 2],
            "p99_ms": 1e3 * lat[min(len(lat) - 1, int(0.99 * len(lat)))],
            "mean_batch": sum(k * v for k, v in sizes.items()) / calls if calls else None,
            "max_batch": max(sizes) if sizes else None,
            "batch_sizes": {str(k): sizes[k] for k in sorted(sizes)},
            "errors": self.errors,
        }


async def _client(
    http: Any, url: str, index: int, cell: Cell, window: tuple[float, float], steps: int
) -> None:
    """One client: episodes of ``steps`` steps, one request at a time, until the window ends."""
    import aiohttp

    rng = np.random.default_rng(index)
    begin, end = window
    episode = 0
    stateless = "stateless" in cell.app
    while time.perf_counter() < end:
        sid, completed, done, state = f"c{index}-e{episode}", True, 0.0, None
        for t in range(steps):
            body = {"observation": rng.uniform(-1, 1, 8).round(3).tolist(), "episode_start": t == 0}
            route = "v1/act" if stateless else f"v1/sessions/{sid}/act"
            if stateless:
                body["state"] = state
            sent = time.perf_counter()
            try:
                async with http.post(f"{url}/{route}", json=body) as answer:
                    reply = await answer.read()
                    ok = answer.status == 200
                    state = json.loads(reply)["state"] if ok and stateless else None
            except (aiohttp.ClientError, TimeoutError):  # counted, and a new episode starts
                ok = False
            done = time.perf_counter()
            if begin <= sent and done <= end:
                cell.latencies.append(done - sent)
                cell.steps += ok
                cell.errors += not ok
            if not ok or done >= end:
                completed = False
                break
        if completed and begin <= done <= end:  # an episode that ended inside the window
            cell.sessions += 1
        if stateless:  # the server holds nothing to delete
            episode += 1
            continue
        try:
            async with http.delete(f"{url}/v1/sessions/{sid}") as answer:
                await answer.read()
        except (aiohttp.ClientError, TimeoutError):
            cell.errors += 1
        episode += 1


async def _histogram(http: Any, url: str) -> Counter[int]:
    async with http.get(f"{url}/v1/health") as answer:
        data = await answer.json()
    return Counter({int(k): v for k, v in data.get("batch_sizes", {}).items()})


async def measure(
    url: str, app: str, clients: int, warmup: float, seconds: float, steps: int
) -> Cell:
    """One cell: ``clients`` concurrent clients for ``warmup + seconds``."""
    import aiohttp

    cell = Cell(app, clients, seconds)
    connector = aiohttp.TCPConnector(limit=clients)
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
        before = await _histogram(http, url)
        begin = time.perf_counter() + warmup
        window = (begin, begin + seconds)
        await asyncio.gather(*(_client(http, url, i, cell, window, steps) for i in range(clients)))
        after = await _histogram(http, url)
    cell.batch_sizes = dict(after - before)
    return cell


# ------------------------------------------------------------------ the report
def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None or value != value else f"{value:,.{digits}f}"


def markdown(rows: list[dict[str, Any]]) -> str:
    """The cells' table, then batched against unbatched and against the no-op ceiling."""
    lines = [
        "| app | N | steps/s | sessions/s | p50 ms | p99 ms | mean batch | max batch | errors |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['app']} | {r['clients']} | {_fmt(r['steps_per_s'], 0)} | "
            f"{_fmt(r['sessions_per_s'], 1)} | {_fmt(r['p50_ms'], 2)} | {_fmt(r['p99_ms'], 2)} | "
            f"{_fmt(r['mean_batch'], 1)} | {r['max_batch'] or '-'} | {r['errors']} |"
        )
    by = {(r["app"], r["clients"]): r for r in rows}
    lines += ["", "| app | N | batched / unbatched | batched / no-op | target at N=64 |"]
    lines.append("| --- | ---: | ---: | ---: | --- |")
    for r in rows:
        app, n = r["app"], r["clients"]
        if "unbatched" in app or app == "no-op":
            continue
        unbatched, noop = by.get((f"{app} unbatched", n)), by.get(("no-op", n))
        ratio_u = r["steps_per_s"] / unbatched["steps_per_s"] if unbatched else None
        ratio_n = r["steps_per_s"] / noop["steps_per_s"] if noop else None
        lines.append(
            f"| {app} | {n} | {_fmt(ratio_u, 2)}x | {_fmt(ratio_n, 2)} | "
            f"{verdict(r, unbatched, noop) if n == 64 else ''} |"
        )
    return "\n".join(lines)


def verdict(batched: dict, unbatched: dict | None, noop: dict | None) -> str:
    """At N=64: steps/s >= min(5x unbatched, 70% of the no-op ceiling), p99 < 50 ms."""
    if unbatched is None or noop is None:
        return "-"
    bar = min(5 * unbatched["steps_per_s"], 0.7 * noop["steps_per_s"])
    met = batched["steps_per_s"] >= bar and batched["p99_ms"] < 50
    note = "" if noop["p99_ms"] < 50 else f" (no-op p99 {noop['p99_ms']:.1f} ms)"
    return (
        f"{'met' if met else 'missed'}: {batched['steps_per_s']:,.0f} vs {bar:,.0f} steps/s, "
        f"p99 {batched['p99_ms']:.1f} ms{note}"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 16, 64, 256])
    parser.add_argument("--memories", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured window per cell")
    parser.add_argument("--warmup", type=float, default=3.0, help="load before the window")
    parser.add_argument("--episode-steps", type=int, default=32)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--time-limit", type=float, default=1800.0, help="whole run, seconds")
    parser.add_argument("--quick", action="store_true", help="N = 1, 4; ~2 s per cell")
    parser.add_argument(
        "--stateless", action="store_true", help="also the stateless apps (POST /v1/act)"
    )
    parser.add_argument("--out", type=Path, help="also write the cells as JSON here")
    args = parser.parse_args(argv)
    if args.quick:
        args.clients, args.seconds, args.warmup = [1, 4], 1.0, 0.5
    if max(args.clients) > MAX_CLIENTS or min(args.clients) < 1:
        parser.error(f"--clients must be within 1..{MAX_CLIENTS}")

    import ray

    torch.set_num_threads(1)
    deadline = time.monotonic() + args.time_limit
    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    port = _free_port()
    rows: list[dict[str, Any]] = []
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        apps = start_apps(port, args.memories, args.replicas, args.stateless)
        cell_s = args.warmup + args.seconds + 2
        for clients in args.clients:
            for label, prefix in apps.items():
                if time.monotonic() + cell_s > deadline:
                    print(f"time limit: skipped {label} at N={clients}", file=sys.stderr)
                    continue
                url = f"http://127.0.0.1:{port}{prefix}"
                cell = asyncio.run(
                    measure(url, label, clients, args.warmup, args.seconds, args.episode_steps)
                )
                rows.append(cell.summary())
                print(
                    f"{label:>22} N={clients:<4} {rows[-1]['steps_per_s']:9.0f} steps/s  "
                    f"p99 {rows[-1]['p99_ms']:7.2f} ms",
                    file=sys.stderr,
                )
    finally:
        serve.shutdown()
        ray.shutdown()
    meta = (
        f"{args.seconds:g} s per cell after {args.warmup:g} s of warm-up, "
        f"{args.episode_steps}-step episodes, {args.replicas} replica(s) per app, "
        f"{os.cpu_count()} CPUs, torch {torch.__version__}, ray {ray.__version__}"
    )
    print(markdown(rows) + f"\n\n{meta}")
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
