"""Multi-agent systems figures: team rollout throughput against Ray workers, and serving latency
of a team per agent step.

Run on an idle machine (each part ~2-4 min)::

    .venv/bin/python benchmarks/multiagent_systems.py rollouts
    .venv/bin/python benchmarks/multiagent_systems.py serve
    .venv/bin/python benchmarks/multiagent_systems.py rollouts --quick   # a smoke test

**rollouts**: MPE simple_spread (3 agents, 100-step episodes, discrete), the default GTrXL team
(``configs/mappo_simple_spread.yaml``: central critic), ``--envs`` envs in all, fragments of
``--fragment`` steps. Rows, timed in interleaved rounds (median over rounds, so load hits every
row alike): the local backend (workers in the driver), Ray with 1 worker and Ray with 2 workers
holding the same envs between them. The scaling model beside them:

    T(W) = L (a + b E / W) max(1, W / C) + o(W)

with ``a + b e`` one worker's seconds per env step at ``e`` envs (fitted on in-process workers at
three sizes), ``C`` cores and ``o(W) = o1 + (W - 1) d`` Ray's per-collect overhead (weights out,
fragments back, scheduling): ``o1`` from the Ray W=1 row; ``d``, what each further worker adds,
is one more weight broadcast and one more fragment transfer, priced with the single-agent
scaling benchmark's fits (``benchmarks/results/scaling/scaling.json``, seconds per extra
broadcast reader and per transferred byte) at this team fragment's pickled size, since two
workers on two cores cannot resolve it. The model is checked on the Ray W=2 row and projected
for a 16-core node with ``--envs`` envs per worker (workers added with their envs). It covers
collection only: the groups' update in the driver is not in it.

**serve**: the same team behind ``rlformer serve`` (one replica; the team app answers all three
agents of an env step in one request), against the same group network served as a single-agent
policy (one session per agent, three requests per env step). ``N`` concurrent clients each play
100-step episodes of random observations of the task's shape and wait for each answer.
Latency per env step (all three agents' actions) and per agent step, p50 / p99, and agent steps
per second. The clients share the machine with the server: figures are a lower bound.

Results go to ``benchmarks/results/multiagent/systems.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pickle
import platform
import socket
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlformer.algos.mappo.algorithm import describe_team, team_worker_spec
from rlformer.algos.mappo.worker import MultiAgentWorker
from rlformer.config import TrainConfig, load_config
from rlformer.rollout.collector import make_collector

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "results" / "multiagent" / "systems.json"
CONFIG = REPO / "configs" / "mappo_simple_spread.yaml"
AGENTS = 3
EPISODE_STEPS = 100


def _cfg(*extra: str) -> TrainConfig:
    return load_config(CONFIG, ["rollout.worker_cpus=0.5", *extra])


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip()


# ------------------------------------------------------------------ rollouts
SCALING = REPO / "benchmarks" / "results" / "scaling" / "scaling.json"


def worker_step_seconds(
    envs: list[int], fragment: int, repeats: int
) -> tuple[dict[int, float], dict[int, int]]:
    """One in-process worker's seconds per env step at each env count (median of repeats),
    and its fragment's pickled bytes."""
    out, sizes = {}, {}
    for e in envs:
        cfg = _cfg(f"rollout.envs_per_worker={e}", f"rollout.fragment_length={fragment}")
        worker = MultiAgentWorker(cfg.mappo, cfg.model, e, fragment, 0)  # type: ignore[attr-defined]
        worker.set_weights(worker.models.state_dict(), 0)
        worker.sample()  # warm-up
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            sampled = worker.sample()
            times.append(time.perf_counter() - started)
        worker.close()
        out[e] = statistics.median(times) / fragment
        sizes[e] = len(pickle.dumps(sampled))
    return out, sizes


def rollout_rows(envs: int, fragment: int, rounds: int) -> dict[str, float]:
    """Median seconds per collect of ``envs`` x ``fragment`` env steps, per backend row."""
    import ray

    torch.set_num_threads(1)
    rows = {"local": (1, "local"), "ray W=1": (1, "ray"), "ray W=2": (2, "ray")}
    collectors = {}
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    try:
        weights = None
        for label, (workers, backend) in rows.items():
            cfg = _cfg(
                f"rollout.backend={backend}",
                f"rollout.num_workers={workers}",
                f"rollout.envs_per_worker={envs // workers}",
                f"rollout.fragment_length={fragment}",
            )
            if weights is None:
                weights = describe_team(cfg)[1].state_dict()
            collectors[label] = make_collector(cfg, team_worker_spec(cfg))
            collectors[label].collect(weights, 0)  # warm-up
        times: dict[str, list[float]] = {label: [] for label in rows}
        for version in range(1, rounds + 1):
            for label, collector in collectors.items():
                started = time.perf_counter()
                collector.collect(weights, version)
                times[label].append(time.perf_counter() - started)
    finally:
        for collector in collectors.values():
            collector.close()
        ray.shutdown()
    return {label: statistics.median(t) for label, t in times.items()}


def extra_worker_seconds(fragment_bytes: int) -> tuple[float, str]:
    """What one more worker adds to a collect: a broadcast reader and a fragment transfer."""
    fits = json.loads(SCALING.read_text())["benchmarks"]
    broadcast, transfer = fits["broadcast"], fits["transfer"]
    seconds = (
        broadcast["s_per_extra_worker"]
        + transfer["fixed_s"]
        + fragment_bytes * transfer["s_per_byte"]
    )
    return seconds, str(SCALING.relative_to(REPO))


def scaling_model(
    per_step: dict[int, float],
    collect_s: dict[str, float],
    envs: int,
    fragment: int,
    cores: int,
    fragment_bytes: int,
) -> dict[str, Any]:
    """Fit ``a + b e`` and ``o1``, price ``d``; check on the W=2 row; project on ``cores``."""
    e = np.array(sorted(per_step), dtype=float)
    b, a = np.polyfit(e, [per_step[int(k)] for k in e], 1)

    def rollout_s(workers: int, envs_each: float, on_cores: int) -> float:
        return fragment * (a + b * envs_each) * max(1.0, workers / on_cores)

    here = os.cpu_count() or 1
    o1 = collect_s["ray W=1"] - rollout_s(1, envs, here)
    d, source = extra_worker_seconds(fragment_bytes)
    checked = {
        label: {
            "measured_steps_per_s": envs * fragment / collect_s[label],
            "predicted_steps_per_s": envs
            * fragment
            / (rollout_s(w, envs / w, here) + o1 + (w - 1) * d),
        }
        for label, w in (("ray W=1", 1), ("ray W=2", 2))
    }
    projection = []
    for workers in (1, 2, 4, 8, 16, 32):
        seconds = rollout_s(workers, envs, cores) + o1 + (workers - 1) * d
        projection.append(
            {
                "workers": workers,
                "envs": envs * workers,
                "steps_per_s": envs * workers * fragment / seconds,
            }  # fmt: skip
        )
    return {
        "fit": {
            "a_s": a,
            "b_s_per_env": b,
            "o1_s": o1,
            "d_s_per_worker": d,
            "d_from": source,
            "fragment_bytes": fragment_bytes,
        },  # fmt: skip
        "checked_here": checked,
        "projection_cores": cores,
        "projection": projection,
    }


def rollouts(args: argparse.Namespace) -> dict[str, Any]:
    sizes = sorted({2, 4, args.envs})
    per_step, fragment_bytes = worker_step_seconds(sizes, args.fragment, args.repeats)
    collect_s = rollout_rows(args.envs, args.fragment, args.rounds)
    steps = args.envs * args.fragment
    table = {
        label: {"env_steps_per_s": steps / s, "agent_steps_per_s": AGENTS * steps / s}
        for label, s in collect_s.items()
    }
    model = scaling_model(
        per_step, collect_s, args.envs, args.fragment, args.cores, fragment_bytes[args.envs]
    )
    return {
        "envs": args.envs,
        "fragment": args.fragment,
        "rounds": args.rounds,
        "worker_step_s": per_step,
        "collect_s": collect_s,
        "rows": table,
        "model": model,
    }


# ------------------------------------------------------------------ serving
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_apps(port: int) -> tuple[Any, Any]:
    """The team app under /team and its group network as a single-agent app under /agent."""
    from rlformer.algos.mappo.policy import TeamPolicy
    from rlformer.serve import ServeOptions, start

    cfg = _cfg()
    _, model = describe_team(cfg)
    team = TeamPolicy({k: v.detach() for k, v in model.state_dict().items()}, cfg, "bench")
    steps = team.serving_steps()
    options = ServeOptions(replicas=1, max_batch=64)
    start(team, options, port=port, route_prefix="/team", name="team")
    group = steps.policies["agent"]
    start(group, options, port=port, route_prefix="/agent", name="agent")
    return steps, group


def _recorded(out: dict, window: tuple, sent: float, ok: bool) -> bool:
    """Count one env step answered now if it lies in the window; whether the window is over."""
    done = time.perf_counter()
    if window[0] <= sent and done <= window[1]:
        out["latencies"].append(done - sent)
        out["env_steps"] += ok
        out["errors"] += not ok
    return done >= window[1]


async def _team_client(http: Any, url: str, index: int, window: tuple, out: dict) -> None:
    rng = np.random.default_rng(index)
    agents = [f"agent_{k}" for k in range(AGENTS)]
    episode = 0
    while time.perf_counter() < window[1]:
        sid = f"t{index}-{episode}"
        for t in range(EPISODE_STEPS):
            obs = {a: rng.uniform(-1, 1, 18).round(3).tolist() for a in agents}
            rewards = None if t == 0 else dict.fromkeys(agents, -1.0)
            body = {"observations": obs, "rewards": rewards, "episode_start": t == 0}
            sent = time.perf_counter()
            async with http.post(f"{url}/v1/sessions/{sid}/act", json=body) as answer:
                await answer.read()
                ok = answer.status == 200
            if _recorded(out, window, sent, ok):
                return
        episode += 1


async def _agent_client(http: Any, url: str, index: int, window: tuple, out: dict) -> None:
    """Three sessions, one per agent; an env step is the three requests sent together."""
    rng = np.random.default_rng(index)
    eye = np.eye(AGENTS, dtype=int)
    state = [0.0] * int(out["state_size"])
    episode = 0
    while time.perf_counter() < window[1]:
        for t in range(EPISODE_STEPS):
            bodies = [
                {
                    "observation": {
                        "obs": rng.uniform(-1, 1, 18).round(3).tolist(),
                        "agent_id": eye[k].tolist(),
                        "state": state,
                    },
                    "reward": None if t == 0 else -1.0,
                    "episode_start": t == 0,
                }
                for k in range(AGENTS)
            ]
            sent = time.perf_counter()
            answers = await asyncio.gather(
                *(
                    http.post(f"{url}/v1/sessions/a{index}-{episode}-{k}/act", json=body)
                    for k, body in enumerate(bodies)
                )
            )
            ok = all(a.status == 200 for a in answers)
            for answer in answers:
                await answer.read()
                answer.release()
            if _recorded(out, window, sent, ok):
                return
        episode += 1


async def measure(url: str, kind: str, clients: int, warmup: float, seconds: float,
                  state_size: int) -> dict[str, Any]:  # fmt: skip
    import aiohttp

    out: dict[str, Any] = {"latencies": [], "env_steps": 0, "errors": 0, "state_size": state_size}
    client = _team_client if kind == "team" else _agent_client
    connector = aiohttp.TCPConnector(limit=clients * AGENTS)
    async with aiohttp.ClientSession(connector=connector) as http:
        begin = time.perf_counter() + warmup
        window = (begin, begin + seconds)
        await asyncio.gather(*(client(http, url, i, window, out) for i in range(clients)))
    lat = sorted(out["latencies"]) or [float("nan")]
    p50, p99 = lat[len(lat) // 2], lat[min(len(lat) - 1, int(0.99 * len(lat)))]
    return {
        "app": "team session" if kind == "team" else "a session per agent",
        "clients": clients,
        "env_steps_per_s": out["env_steps"] / seconds,
        "agent_steps_per_s": AGENTS * out["env_steps"] / seconds,
        "p50_ms_per_env_step": 1e3 * p50,
        "p99_ms_per_env_step": 1e3 * p99,
        "p50_ms_per_agent_step": 1e3 * p50 / AGENTS,
        "errors": out["errors"],
    }


def in_process_team_step_ms(steps: Any, repeats: int = 300) -> float:
    """Median milliseconds of one team step without HTTP or Ray: parsing, one forward pass for
    the three agents' rows, storing their states."""
    from rlformer.serve.sessions import SessionStore

    store, rng = SessionStore(600.0, 16), np.random.default_rng(0)
    agents = [f"agent_{k}" for k in range(AGENTS)]
    times = []
    for t in range(repeats):
        body = {
            "observations": {a: rng.uniform(-1, 1, 18).tolist() for a in agents},
            "rewards": None if t % EPISODE_STEPS == 0 else dict.fromkeys(agents, -1.0),
            "episode_start": t % EPISODE_STEPS == 0,
        }
        started = time.perf_counter()
        steps.step([steps.parse("bench", body)], store, lambda size: None)
        times.append(time.perf_counter() - started)
    return 1e3 * statistics.median(times)


def serving(args: argparse.Namespace) -> dict[str, Any]:
    import ray
    from ray import serve

    torch.set_num_threads(1)
    port = _free_port()
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    rows = []
    try:
        steps, _ = start_apps(port)
        step_ms = in_process_team_step_ms(steps)
        state_size = steps.team.state_size
        base = f"http://127.0.0.1:{port}"
        for clients in args.clients:
            for kind, route in (("team", "/team"), ("agent", "/agent")):
                row = asyncio.run(
                    measure(base + route, kind, clients, args.warmup, args.seconds, state_size)
                )
                rows.append(row)
                print(json.dumps(row))
    finally:
        serve.shutdown()
        ray.shutdown()
    return {
        "clients": args.clients,
        "seconds": args.seconds,
        "in_process_team_step_ms": step_ms,
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("part", choices=["rollouts", "serve"])
    parser.add_argument("--quick", action="store_true", help="a smoke test: tiny sizes")
    parser.add_argument("--envs", type=int, default=8, help="envs in all (rollouts)")
    parser.add_argument("--fragment", type=int, default=100, help="steps per env per collect")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=3, help="in-process worker timings")
    parser.add_argument("--cores", type=int, default=16, help="cores of the projected node")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if args.quick:
        args.envs, args.fragment, args.rounds, args.repeats = 4, 20, 2, 1
        args.clients, args.seconds, args.warmup = [1, 4], 3.0, 1.0
    load = os.getloadavg()[0]
    result = rollouts(args) if args.part == "rollouts" else serving(args)
    result |= {"commit": _commit(), "load_before": load, "cpus": os.cpu_count(),
               "machine": platform.processor() or platform.machine()}  # fmt: skip
    print(json.dumps(result, indent=1))
    if not args.quick:
        saved = json.loads(args.out.read_text()) if args.out.exists() else {}
        saved[args.part] = result
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(saved, indent=1) + "\n")


if __name__ == "__main__":
    main()
