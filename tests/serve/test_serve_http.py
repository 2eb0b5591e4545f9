"""``rlformer serve`` through real HTTP: per-session memory under batching, sticky replicas,
bad input refused without harming other sessions, and LRU eviction answered with 409."""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import requests
import rlformer_envs  # noqa: F401
import torch

from rlformer.config import load_config
from rlformer.networks.actor_critic import ActorCritic
from rlformer.policies import load_policy
from rlformer.runs.checkpoints import encode_spec, write_checkpoint_file
from rlformer.serve import ServeOptions, load_servable, start
from tests.reliability.tiny import TINY_OVERRIDES
from tests.serve.shared_serve import REPLACEMENT_S, delete_apps, serve_port

pytestmark = [pytest.mark.slow, pytest.mark.ray]

SESSIONS, STEPS, TIMEOUT = 32, 12, 30
# name -> (model overrides, replicas, max sessions per replica)
APPS = {
    "gtrxl": (["model.prev_action_reward=true"], 2, 1000),
    "lstm": (["model.torso=lstm", "model.recurrent_hidden=16"], 1, 48),
}


def _checkpoint(root: Path, name: str, overrides: list[str]) -> Path:
    """An untrained tiny TMaze policy with weights spread wide enough that its logits are
    far apart (the near-uniform initial head would tie argmaxes to float noise)."""
    cfg = load_config(None, [*TINY_OVERRIDES, *overrides])

    env = gym.make(cfg.env.id, **cfg.env.kwargs)
    model = ActorCritic(env.observation_space, env.action_space, cfg.model)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * 0.5)
    path = root / f"{name}.pt"
    payload = {
        "kind": "ppo",
        "config": cfg.model_dump(mode="json"),
        "spec": encode_spec(env.observation_space, env.action_space),
        "model": model.state_dict(),
    }
    write_checkpoint_file(path, payload)
    return path


def _export(checkpoint: Path, out: Path) -> Path:
    """``rlformer export`` of ``checkpoint`` into ``out``."""
    from rlformer.export.writer import export_policy

    export_policy(load_policy(checkpoint), out, "onnx")
    return out


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, local_ray: None) -> Iterator[dict[str, Any]]:
    """One app per policy under ``/NAME`` on the serving modules' Serve instance."""
    root = tmp_path_factory.mktemp("serve")
    port = serve_port()
    try:
        paths = {}
        for name, (overrides, replicas, max_sessions) in APPS.items():
            paths[name] = _checkpoint(root, name, overrides)
            # a killed replica's sessions wait for its replacement (the last test) longer than
            # the default 30 s request timeout on a loaded machine
            options = ServeOptions(
                replicas=replicas,
                max_batch=32,
                max_sessions=max_sessions,
                request_timeout_s=REPLACEMENT_S,
            )
            start(
                load_servable(paths[name]), options, port=port, route_prefix=f"/{name}", name=name
            )
        paths["export"] = _export(paths["gtrxl"], root / "export")
        options = ServeOptions(replicas=1, max_batch=32)
        start(load_servable(paths["export"]), options, port=port, route_prefix="/export", name="ex")
        yield {"url": f"http://127.0.0.1:{port}", "paths": paths}
    finally:
        delete_apps(*APPS, "ex")


def _episodes(seed: int) -> list[dict[str, Any]]:
    """One session's steps: random TMaze-shaped observations and rewards, resets inside."""
    rng = np.random.default_rng(seed)
    resets = {0, int(rng.integers(3, STEPS - 2))}
    return [
        {
            "observation": rng.uniform(0, 1, 3).round(4).tolist(),
            "reward": None if t in resets else float(rng.normal()),
            "episode_start": t in resets,
            "deterministic": True,
        }
        for t in range(STEPS)
    ]


def _reference(path: Path, steps: list[dict[str, Any]]) -> list[int]:
    """The actions of one session run alone and in order, in this process."""
    policy = load_policy(path)
    state, actions = policy.initial_state(1), []
    for step in steps:
        reward = None if step["reward"] is None else np.array([step["reward"]], np.float32)
        action, state = policy.act(
            np.array([step["observation"]], np.float32),
            state,
            np.array([step["episode_start"]]),
            reward,
        )
        actions.append(int(action[0]))
    return actions


def _post(url: str, sid: str, body: Any, timeout: float = TIMEOUT) -> requests.Response:
    return requests.post(f"{url}/v1/sessions/{sid}/act", json=body, timeout=timeout)


def _run_session(url: str, sid: str, steps: list[dict[str, Any]], seed: int) -> list[int]:
    pause = random.Random(seed)
    actions = []
    for step in steps:
        time.sleep(pause.uniform(0, 0.01))  # shuffles the interleaving between sessions
        answer = _post(url, sid, step)
        assert answer.status_code == 200, answer.text
        actions.append(answer.json()["action"])
    return actions


@pytest.mark.parametrize("name", list(APPS))
def test_interleaved_sessions_act_like_separate_runs(server: dict[str, Any], name: str) -> None:
    url = f"{server['url']}/{name}"
    plans = {f"{name}-s{i}": _episodes(i) for i in range(SESSIONS)}
    expected = {sid: _reference(server["paths"][name], steps) for sid, steps in plans.items()}
    order = list(plans)
    random.Random(1).shuffle(order)
    started = time.perf_counter()
    with ThreadPoolExecutor(SESSIONS) as pool:
        futures = {
            sid: pool.submit(_run_session, url, sid, plans[sid], i) for i, sid in enumerate(order)
        }
        got = {sid: future.result(timeout=120) for sid, future in futures.items()}
    elapsed = time.perf_counter() - started
    assert got == expected
    health = requests.get(f"{url}/v1/health", timeout=TIMEOUT).json()
    sizes = {int(k): v for k, v in health["batch_sizes"].items()}
    assert health["replicas"] == APPS[name][1]
    assert sum(k * v for k, v in sizes.items()) >= SESSIONS * STEPS
    assert max(sizes) > 1, f"no step was batched: {sizes}"
    assert all(r["sessions"] > 0 for r in health["per_replica"])  # every replica took some
    print(f"{name}: {SESSIONS * STEPS} steps in {elapsed:.2f} s, batch sizes {sizes}")


BAD_BODIES: list[tuple[str, Any, int]] = [
    ("wrong shape", {"observation": [0.1, 0.2], "episode_start": True}, 400),
    ("strings", {"observation": ["a", "b", "c"], "episode_start": True}, 400),
    ("nested too deep", {"observation": [[0.1], [0.2], [0.3]], "episode_start": True}, 400),
    ("NaN", '{"observation": [NaN, 0.1, 0.2], "episode_start": true}', 400),
    ("flag not bool", {"observation": [0.1, 0.2, 0.3], "episode_start": "yes"}, 400),
    ("unknown field", {"observation": [0.1, 0.2, 0.3], "episode_start": True, "x": 1}, 400),
    ("unknown session", {"observation": [0.1, 0.2, 0.3], "episode_start": False}, 409),
    ("not JSON", "{this is not json", 400),
    ("10 MB", "[" + "0," * (5 << 20) + "0]", 413),
]


@pytest.mark.parametrize(("what", "body", "status"), BAD_BODIES, ids=[b[0] for b in BAD_BODIES])
def test_bad_input_is_a_4xx_json_line(
    server: dict[str, Any], what: str, body: Any, status: int
) -> None:
    url = f"{server['url']}/lstm"
    steps = _episodes(99)
    expected = _reference(server["paths"]["lstm"], steps)
    good = [_post(url, "bystander", steps[0]).json()["action"]]
    data = body if isinstance(body, str) else json.dumps(body)
    answer = requests.post(
        f"{url}/v1/sessions/victim-{len(what)}/act",
        data=data,
        headers={"content-type": "application/json"},
        timeout=TIMEOUT,
    )
    assert answer.status_code == status, answer.text
    assert answer.text.count("\n") <= 1 and "error" in answer.json()
    good += [_post(url, "bystander", step).json()["action"] for step in steps[1:]]
    assert good == expected


def test_evicted_session_answers_409_with_the_reason(server: dict[str, Any]) -> None:
    url = f"{server['url']}/lstm"
    first = {"observation": [0.1, 0.2, 0.3], "episode_start": True}
    limit = APPS["lstm"][2]
    for i in range(limit + 1):  # one more than the replica holds: lru-0 goes
        assert _post(url, f"lru-{i}", first).status_code == 200
    answer = _post(url, "lru-0", {**first, "episode_start": False})
    assert answer.status_code == 409 and answer.json()["code"] == "session_dropped"
    assert "least recently used" in answer.json()["error"]
    assert _post(url, f"lru-{limit}", {**first, "episode_start": False}).status_code == 200
    assert _post(url, "lru-0", first).status_code == 200  # a new episode may start again


def test_delete_policy_and_health(server: dict[str, Any]) -> None:
    url = f"{server['url']}/gtrxl"
    body = {"observation": [0.1, 0.2, 0.3], "episode_start": True}
    assert _post(url, "to-delete", body).status_code == 200
    deleted = requests.delete(f"{url}/v1/sessions/to-delete", timeout=TIMEOUT)
    assert deleted.status_code == 200 and deleted.json() == {"deleted": True}
    again = _post(url, "to-delete", {**body, "episode_start": False})
    assert again.status_code == 409 and again.json()["code"] == "session_dropped"
    assert "deleted" in again.json()["error"]
    never = _post(url, "never-held", {**body, "episode_start": False})
    assert never.status_code == 409 and never.json()["code"] == "unknown_session"
    described = requests.get(f"{url}/v1/policy", timeout=TIMEOUT).json()
    assert described["action_space"] == {"type": "Discrete", "n": 3, "start": 0}
    assert described["info"]["kind"] == "ppo"
    assert described["info"]["training_env"]["id"] == "rlformer/TMaze-v0"
    health = requests.get(f"{url}/v1/health", timeout=TIMEOUT).json()
    assert health["replicas"] == 2 and len(health["per_replica"]) == 2
    missing = requests.get(f"{url}/v1/nothing", timeout=TIMEOUT)
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"
    for method, route, allowed in [
        ("GET", "sessions/s1/act", "POST"),
        ("PUT", "sessions/s1", "DELETE"),
        ("POST", "health", "GET"),
        ("DELETE", "policy", "GET"),
    ]:
        wrong = requests.request(method, f"{url}/v1/{route}", timeout=TIMEOUT)
        assert wrong.status_code == 405 and wrong.headers["allow"] == allowed, wrong.text
        assert wrong.json()["code"] == "method_not_allowed" and allowed in wrong.json()["error"]


def test_an_export_directory_is_served_over_http_and_needs_no_files_after_start(
    server: dict[str, Any], tmp_path: Path
) -> None:
    """Sessions of the exported GTrXL act as the export run alone, also after its directory
    has moved away and a replica has been restarted (from what Serve shipped it)."""
    url, export = f"{server['url']}/export", server["paths"]["export"]
    plans = {f"export-s{i}": _episodes(200 + i) for i in range(8)}
    expected = {sid: _reference(export, steps) for sid, steps in plans.items()}
    half = STEPS // 2
    got = {
        sid: _run_session(url, sid, steps[:half], i) for i, (sid, steps) in enumerate(plans.items())
    }
    moved = tmp_path / "moved"
    export.rename(moved)
    try:
        for i, (sid, steps) in enumerate(plans.items()):
            got[sid] += _run_session(url, sid, steps[half:], i)
        assert got == expected
        _kill_replica("ex", "PolicyReplica0")
        fresh = _episodes(300)
        deadline = time.monotonic() + 120
        while True:  # the restarted replica comes back from the shipped model bytes
            try:
                actions = _run_session(url, "after-restart-3", fresh, 0)
                break
            except (AssertionError, requests.RequestException):
                # a request routed to the dead replica before Serve noticed may hang: retry
                assert time.monotonic() < deadline, "the killed replica did not come back"
                time.sleep(1)
        assert actions == _reference(moved, fresh)
    finally:
        moved.rename(export)


def _replica_of(session_id: str, replicas: int) -> int:
    digest = hashlib.sha256(session_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % replicas


def _kill_replica(app: str, deployment: str) -> None:
    import ray

    names = [
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["name"].startswith(f"SERVE_REPLICA::{app}#{deployment}#")
    ]
    assert len(names) == 1, names
    ray.kill(ray.get_actor(names[0], namespace="serve"), no_restart=True)


def test_a_killed_replica_loses_only_its_sessions(server: dict[str, Any]) -> None:
    """Runs last: sessions on the killed replica answer 410, those on the other replica go on
    unharmed while it dies, and the app serves new episodes on a fresh replica."""
    url = f"{server['url']}/gtrxl"
    ids = [f"kill-{i}" for i in range(16)]
    doomed = [sid for sid in ids if _replica_of(sid, 2) == 0]
    safe = [sid for sid in ids if _replica_of(sid, 2) == 1]
    assert doomed and safe
    first = {"observation": [0.1, 0.2, 0.3], "episode_start": True}
    for sid in doomed:
        assert _post(url, sid, first).status_code == 200
    plans = {sid: _episodes(100 + i) for i, sid in enumerate(safe)}
    expected = {sid: _reference(server["paths"]["gtrxl"], plans[sid]) for sid in safe}
    with ThreadPoolExecutor(len(safe)) as pool:
        futures = {sid: pool.submit(_run_session, url, sid, plans[sid], 7) for sid in safe}
        time.sleep(0.05)
        _kill_replica("gtrxl", "PolicyReplica0")
        got = {sid: future.result(timeout=120) for sid, future in futures.items()}
    assert got == expected
    for sid in doomed:  # Serve holds these until the killed replica's replacement is up
        answer = _post(url, sid, {**first, "episode_start": False}, REPLACEMENT_S)
        assert answer.status_code == 410 and answer.json()["code"] == "replica_lost", answer.text
        assert _post(url, sid, first, REPLACEMENT_S).status_code == 200  # a fresh episode
    assert requests.get(f"{url}/v1/health", timeout=TIMEOUT).json()["replicas"] == 2
