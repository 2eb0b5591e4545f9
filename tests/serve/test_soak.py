"""A soak test of ``rlformer serve``: 300 sessions created, stepped, expired and
deleted by concurrent clients over real HTTP, malformed requests among them.

What must hold was fixed before the first run:

- every session's greedy actions equal the same episodes run offline;
- no request gets a 5xx; every malformed one gets the 4xx it should;
- once the TTL has passed, no session is held;
- each replica's resident memory at the end is at most its memory after a warm-up phase of
  the same load, plus 10%.

The figures are printed (``pytest -s``) and recorded in docs/guides/runs.md.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests

from rlformer.policies import load_policy
from rlformer.serve import ServeOptions, load_servable, start
from tests.serve.shared_serve import delete_apps, serve_port
from tests.serve.test_serve_http import _checkpoint

pytestmark = [pytest.mark.slow, pytest.mark.ray]

# A GTrXL whose per-session state is large enough (2 layers x 128 slots x 64 wide: 64 KiB)
# that sessions kept past their end, or batches pinned by them, show in a replica's memory.
MODEL = [
    "model.core.n_layers=2",
    "model.core.d_model=64",
    "model.core.n_heads=4",
    "model.core.d_ff=128",
    "model.core.memory_length=128",
]
# The TTL outlasts the longest pause between a session's steps on a loaded 2-core machine (the
# whole suite beside it stalls a request for more than 10 s), so that only the sessions left
# idle expire.
REPLICAS, CLIENTS, TTL_S = 2, 24, 30.0
WARMUP_SESSIONS, SOAK_SESSIONS = 60, 240
TIMEOUT = 60
OBS = {"observation": [0.1, 0.2, 0.3], "episode_start": False}
MALFORMED: list[tuple[str, str, Any, int]] = [
    # (what, method, body as JSON text or None, expected status)
    ("not JSON", "POST", "{nope", 400),
    ("wrong shape", "POST", '{"observation": [1, 2], "episode_start": false}', 400),
    ("NaN", "POST", '{"observation": [NaN, 0, 0], "episode_start": false}', 400),
    ("strings", "POST", '{"observation": ["a", "b", "c"], "episode_start": false}', 400),
    ("unknown field", "POST", '{"observation": [0, 0, 0], "episode_start": false, "x": 1}', 400),
    ("flag not bool", "POST", '{"observation": [0, 0, 0], "episode_start": 1}', 400),
    ("GET on act", "GET", None, 405),
]


@dataclass
class Plan:
    """One session: its steps, where a malformed request cuts in, whether it is deleted."""

    session_id: str
    steps: list[dict[str, Any]]
    malformed_at: int | None
    malformed: int
    delete: bool
    actions: list[Any] = field(default_factory=list)


def plans(prefix: str, count: int, seed: int) -> list[Plan]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        length = int(rng.integers(3, 10))
        resets = {0} | ({int(rng.integers(2, length))} if length > 4 else set())
        steps = [
            {
                "observation": rng.uniform(-1, 1, 3).round(4).tolist(),
                "reward": None if t in resets else round(float(rng.normal()), 4),
                "episode_start": t in resets,
            }
            for t in range(length)
        ]
        malformed_at = int(rng.integers(1, length)) if i % 3 == 0 else None
        out.append(
            Plan(f"{prefix}-{i}", steps, malformed_at, i % len(MALFORMED), delete=i % 2 == 0)
        )
    return out


TIE = 1e-4
"""Greedy choices whose two best logits are closer than this are float ties: batched and
alone, the same step can round either way (seen: a gap of 3e-6 in 9,000 steps)."""


def offline_actions(path: Path, sessions: list[Plan]) -> dict[str, list[Any]]:
    """Each session's greedy actions run offline, sessions side by side as batch rows; a
    float tie (see :data:`TIE`) is None, which any answer matches. The model has no previous
    action input, so an action never changes what follows."""
    policy = load_policy(path)
    expected: dict[str, list[Any]] = {}
    for chunk in range(0, len(sessions), 100):
        group = sessions[chunk : chunk + 100]
        state, width = policy.initial_state(len(group)), max(len(p.steps) for p in group)
        got: list[list[Any]] = [[] for _ in group]
        for t in range(width):
            live = [j for j, p in enumerate(group) if t < len(p.steps)]
            obs = np.zeros((len(group), 3), np.float32)  # rows past their end act on zeros
            starts, rewards = np.ones(len(group), bool), np.zeros(len(group), np.float32)
            for j in live:
                step = group[j].steps[t]
                obs[j], starts[j] = step["observation"], step["episode_start"]
                rewards[j] = 0.0 if step["reward"] is None else step["reward"]
            (logits,) = policy.distribution(obs, state, starts, rewards).logits
            actions, state = policy.act(obs, state, starts, rewards)
            top2 = np.sort(logits, axis=1)[:, -2:]
            for j in live:
                decisive = top2[j, 1] - top2[j, 0] >= TIE
                got[j].append(np.asarray(actions)[j].tolist() if decisive else None)
        expected.update({p.session_id: g for p, g in zip(group, got, strict=True)})
    return expected


def same_actions(served: list[Any], offline: list[Any]) -> bool:
    return len(served) == len(offline) and all(
        o is None or s == o for s, o in zip(served, offline, strict=True)
    )


@dataclass
class Tally:
    statuses: Counter[int] = field(default_factory=Counter)
    wrong_refusals: list[str] = field(default_factory=list)
    requests: int = 0


def drive(url: str, plan: Plan, tally: Tally, seed: int) -> None:
    """One client's session: its steps in order, the malformed request where planned."""
    http = requests.Session()
    pause = random.Random(seed)
    for t, step in enumerate(plan.steps):
        if t == plan.malformed_at:
            what, method, body, status = MALFORMED[plan.malformed]
            answer = http.request(
                method,
                f"{url}/v1/sessions/{plan.session_id}/act",
                data=body,
                headers={"content-type": "application/json"},
                timeout=TIMEOUT,
            )
            tally.statuses[answer.status_code] += 1
            tally.requests += 1
            if answer.status_code != status:
                tally.wrong_refusals.append(f"{what}: {answer.status_code} {answer.text[:200]}")
        time.sleep(pause.uniform(0, 0.005))
        answer = http.post(f"{url}/v1/sessions/{plan.session_id}/act", json=step, timeout=TIMEOUT)
        tally.statuses[answer.status_code] += 1
        tally.requests += 1
        plan.actions.append(answer.json().get("action") if answer.ok else answer.text[:200])
    if plan.delete:
        answer = http.delete(f"{url}/v1/sessions/{plan.session_id}", timeout=TIMEOUT)
        tally.statuses[answer.status_code] += 1
        tally.requests += 1


def run_phase(url: str, sessions: list[Plan], tally: Tally) -> float:
    started = time.perf_counter()
    with ThreadPoolExecutor(CLIENTS) as pool:
        for future in [pool.submit(drive, url, p, tally, i) for i, p in enumerate(sessions)]:
            future.result(timeout=600)
    return time.perf_counter() - started


def health(url: str) -> dict[str, Any]:
    return requests.get(f"{url}/v1/health", timeout=TIMEOUT).json()


def wait_for_expiry(url: str) -> dict[str, Any]:
    time.sleep(TTL_S + 0.5)
    return health(url)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, local_ray: None) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("soak")
    path = _checkpoint(root, "soak", MODEL)
    try:
        options = ServeOptions(replicas=REPLICAS, max_batch=32, session_ttl_s=TTL_S)
        port = serve_port()
        start(load_servable(path), options, port=port, name="soak")
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                if requests.get(f"{url}/v1/health", timeout=5).ok:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, "the soak server did not start"
            time.sleep(0.5)
        yield url, path
    finally:
        delete_apps("soak")


def test_hundreds_of_sessions_come_and_go_without_errors_or_growth(
    server: tuple[str, Path],
) -> None:
    url, path = server
    warmup, soak = plans("warm", WARMUP_SESSIONS, 0), plans("soak", SOAK_SESSIONS, 1)
    expected = offline_actions(path, warmup + soak)
    tally = Tally()

    warm_s = run_phase(url, warmup, tally)
    after_warmup = wait_for_expiry(url)
    assert after_warmup["sessions"] == 0
    warm_rss = {r["index"]: r["rss_bytes"] for r in after_warmup["per_replica"]}

    soak_s = run_phase(url, soak, tally)
    live_at_end = health(url)["sessions"]
    expired = wait_for_expiry(url)
    end_rss = {r["index"]: r["rss_bytes"] for r in expired["per_replica"]}
    # a session left to expire answers with the reason; one deleted says so
    kept = next(p for p in soak if not p.delete)
    gone = requests.post(f"{url}/v1/sessions/{kept.session_id}/act", json=OBS, timeout=TIMEOUT)
    assert gone.status_code == 409 and "idle for more than" in gone.json()["error"], gone.text
    deleted = next(p for p in soak if p.delete)
    gone = requests.post(f"{url}/v1/sessions/{deleted.session_id}/act", json=OBS, timeout=TIMEOUT)
    assert gone.status_code == 409 and "deleted" in gone.json()["error"], gone.text

    steps = sum(len(p.steps) for p in warmup + soak)
    mismatched = [
        p.session_id for p in warmup + soak if not same_actions(p.actions, expected[p.session_id])
    ]
    ties = sum(a is None for actions in expected.values() for a in actions)
    growth = {i: end_rss[i] / warm_rss[i] - 1 for i in warm_rss}
    print(
        f"\nsoak: {len(warmup) + len(soak)} sessions, {steps} steps, {tally.requests} requests "
        f"({sum(p.malformed_at is not None for p in warmup + soak)} malformed) by {CLIENTS} "
        f"clients, {ties} float ties among the greedy actions; "
        f"warm-up {warm_s:.1f} s, soak {soak_s:.1f} s "
        f"({sum(len(p.steps) for p in soak) / soak_s:.0f} steps/s); statuses "
        f"{dict(sorted(tally.statuses.items()))}; {live_at_end} sessions live at the end of "
        f"the load, {expired['sessions']} after the TTL; replica memory after warm-up "
        f"{ {i: round(v / 2**20) for i, v in warm_rss.items()} } MiB, at the end "
        f"{ {i: round(v / 2**20) for i, v in end_rss.items()} } MiB "
        f"({ {i: f'{g:+.1%}' for i, g in growth.items()} })"
    )
    assert not [s for s in tally.statuses if s >= 500], tally.statuses
    assert not tally.wrong_refusals, tally.wrong_refusals[:5]
    by_id = {p.session_id: p for p in warmup + soak}
    assert not mismatched, f"{len(mismatched)} sessions differ from offline: " + "; ".join(
        f"{sid} served {by_id[sid].actions} offline {expected[sid]}" for sid in mismatched[:3]
    )
    assert expired["sessions"] == 0
    assert all(g <= 0.10 for g in growth.values()), growth
