"""``rlformer serve --stateless`` and Decision Transformers through real HTTP: client-held
states on two replicas act like separate runs, refused blobs answer 4xx without harming other
clients, a killed replica loses nothing, and DT sessions follow their own target returns."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from rlformer.policies import load_policy
from rlformer.serve import ServeOptions, load_servable, start
from rlformer.serve.state_blob import new_state_key
from tests.serve.shared_serve import REPLACEMENT_S, delete_apps, serve_port
from tests.serve.test_serve_http import (
    APPS,
    TIMEOUT,
    _checkpoint,
    _episodes,
    _kill_replica,
    _run_session,
)
from tests.serve.test_state_blob import dt_checkpoint, dt_episodes, reference

pytestmark = [pytest.mark.slow, pytest.mark.ray]

SESSIONS = 32
STATELESS = ["gtrxl", "lstm"]
PATIENCE_S = {"gtrxl": ServeOptions.step_patience_s, "lstm": 0.5}  # a step's wait on a replica


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, local_ray: None) -> Iterator[dict[str, Any]]:
    """Stateless GTrXL and LSTM apps (two replicas each, one shared key, so that a blob of one
    policy reaches the other's MAC check; the LSTM's steps short of patience) and a
    session-holding DT app, on the serving modules' Serve instance."""
    root = tmp_path_factory.mktemp("serve")
    port, key = serve_port(), new_state_key()
    try:
        paths = {name: _checkpoint(root, name, APPS[name][0]) for name in STATELESS}
        for name in STATELESS:
            options = ServeOptions(
                replicas=2,
                max_batch=32,
                stateless=True,
                state_key=key,
                step_patience_s=PATIENCE_S[name],
            )
            policy = load_servable(paths[name])
            start(policy, options, port=port, route_prefix=f"/{name}", name=name)
        paths["dt"] = dt_checkpoint(root)
        dt_options = ServeOptions(replicas=1, max_batch=32)
        start(load_servable(paths["dt"]), dt_options, port=port, route_prefix="/dt", name="dt")
        yield {"url": f"http://127.0.0.1:{port}", "paths": paths}
    finally:
        delete_apps(*STATELESS, "dt")


def _act(url: str, body: Any) -> requests.Response:
    return requests.post(f"{url}/v1/act", json=body, timeout=TIMEOUT)


def _run_stateless(
    url: str, steps: list[dict[str, Any]], seed: int, waits: list[float] | None = None
) -> list[Any]:
    """One client: each step sends the state of the previous answer (none at the first);
    ``waits`` collects each step's answer time."""
    pause, state, actions = random.Random(seed), None, []
    for step in steps:
        time.sleep(pause.uniform(0, 0.01))  # shuffles the interleaving between clients
        sent = time.monotonic()
        answer = _act(url, {**step, "state": state})
        if waits is not None:
            waits.append(time.monotonic() - sent)
        assert answer.status_code == 200, answer.text
        actions.append(answer.json()["action"])
        state = answer.json()["state"]
    return actions


def _run_all(plans: dict[str, list[dict]], run: Callable[..., list]) -> dict[str, list]:
    """Every client at once, ``run(sid, steps, seed)`` each, started in a shuffled order."""
    order = list(plans)
    random.Random(1).shuffle(order)
    with ThreadPoolExecutor(len(plans)) as pool:
        futures = {sid: pool.submit(run, sid, plans[sid], i) for i, sid in enumerate(order)}
        return {sid: future.result(timeout=180) for sid, future in futures.items()}


@pytest.mark.parametrize("name", STATELESS)
def test_stateless_clients_on_two_replicas_act_like_separate_runs(
    server: dict[str, Any], name: str
) -> None:
    url = f"{server['url']}/{name}"
    policy = load_policy(server["paths"][name])
    plans = {f"{name}-c{i}": _episodes(i) for i in range(SESSIONS)}
    expected = {sid: reference(policy, steps) for sid, steps in plans.items()}
    got = _run_all(plans, lambda sid, steps, seed: _run_stateless(url, steps, seed))
    assert got == expected
    health = requests.get(f"{url}/v1/health", timeout=TIMEOUT).json()
    assert health["mode"] == "stateless" and health["sessions"] == 0
    sizes = {int(k): v for k, v in health["batch_sizes"].items()}
    assert sum(k * v for k, v in sizes.items()) >= SESSIONS * len(plans[f"{name}-c0"])
    assert max(sizes) > 1, f"no step was batched: {sizes}"
    assert all(r["batch_sizes"] for r in health["per_replica"])  # both replicas answered


def _blob(url: str) -> str:
    answer = _act(url, {"observation": [0.1, 0.2, 0.3], "episode_start": True})
    assert answer.status_code == 200, answer.text
    return answer.json()["state"]


def _flip(blob: str, offset: int) -> str:
    import base64

    raw = bytearray(base64.b64decode(blob))
    raw[offset] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


BAD_STATES = ["tampered MAC", "tampered payload", "oversized", "other policy", "missing"]


@pytest.mark.parametrize("what", BAD_STATES)
def test_refused_states_are_4xx_and_other_clients_go_on(server: dict[str, Any], what: str) -> None:
    url = f"{server['url']}/gtrxl"
    described = requests.get(f"{url}/v1/policy", timeout=TIMEOUT).json()["serving"]
    assert described["stateless"] and described["max_state_chars"] > 0
    steps = _episodes(77)
    expected = reference(load_policy(server["paths"]["gtrxl"]), steps)
    with ThreadPoolExecutor(1) as pool:
        bystander = pool.submit(_run_stateless, url, steps, 0)
        blob = _blob(url)
        state, status, code = {
            "tampered MAC": (_flip(blob, 20), 400, "state_tampered"),
            "tampered payload": (_flip(blob, -1), 400, "state_tampered"),
            "oversized": (blob + "A" * described["max_state_chars"], 413, "state_too_large"),
            "other policy": (_blob(f"{server['url']}/lstm"), 400, "foreign_state"),
            "missing": (None, 400, "bad_request"),
        }[what]
        body = {"observation": [0.1, 0.2, 0.3], "episode_start": False, "state": state}
        answer = _act(url, body)
        assert answer.status_code == status, answer.text
        assert answer.text.count("\n") <= 1 and answer.json()["code"] == code
        if what == "oversized":
            assert str(described["max_state_chars"]) in answer.json()["error"]
        assert bystander.result(timeout=180) == expected
    assert _act(url, {**body, "state": blob}).status_code == 200  # the genuine blob still works


def test_routes_of_the_other_mode_answer_404_with_the_way(server: dict[str, Any]) -> None:
    body = {"observation": [0.1, 0.2, 0.3], "episode_start": True}
    on_stateless = requests.post(
        f"{server['url']}/gtrxl/v1/sessions/a/act", json=body, timeout=TIMEOUT
    )
    assert on_stateless.status_code == 404 and "POST /v1/act" in on_stateless.json()["error"]
    on_sessions = _act(f"{server['url']}/dt", body)
    assert on_sessions.status_code == 404 and "--stateless" in on_sessions.json()["error"]


def test_dt_sessions_follow_their_targets_like_separate_runs(server: dict[str, Any]) -> None:
    url = f"{server['url']}/dt"
    policy = load_policy(server["paths"]["dt"])
    plans = {f"dt-{i}": dt_episodes(i) for i in range(16)}
    expected = {sid: reference(policy, steps) for sid, steps in plans.items()}
    assert _run_all(plans, lambda sid, steps, seed: _run_session(url, sid, steps, seed)) == expected
    described = requests.get(f"{url}/v1/policy", timeout=TIMEOUT).json()
    assert described["info"]["kind"] == "dt" and described["info"]["return_conditioned"]
    assert described["info"]["default_targets"] == [1.0]
    health = requests.get(f"{url}/v1/health", timeout=TIMEOUT).json()
    assert max(int(k) for k in health["batch_sizes"]) > 1
    first = {"observation": [0.1, 0.2, 0.3], "episode_start": True}
    later = {**first, "episode_start": False}
    for body, message in [
        ({**later, "reward": 1.0, "target_return": 2.0}, "episode_start: true only"),
        (later, "needs the reward"),
    ]:
        answer = requests.post(f"{url}/v1/sessions/dt-0/act", json=body, timeout=TIMEOUT)
        assert answer.status_code == 400 and message in answer.json()["error"], answer.text


def _all_replicas_up(url: str) -> dict[str, Any]:
    """``/v1/health`` once every replica answers: a killed one is reported down until its
    replacement serves."""
    deadline = time.monotonic() + REPLACEMENT_S
    while True:
        health = requests.get(f"{url}/v1/health", timeout=TIMEOUT).json()
        if all(r["up"] for r in health["per_replica"]):
            return health
        assert time.monotonic() < deadline, f"a killed replica was not replaced: {health}"
        time.sleep(0.1)


def test_a_killed_stateless_replica_loses_no_client(server: dict[str, Any]) -> None:
    """Runs last: the state travels with each step, so when a replica dies mid-load its
    steps go to the other one and every client's actions stay those of a separate run."""
    url = f"{server['url']}/gtrxl"
    policy = load_policy(server["paths"]["gtrxl"])
    plans = {f"kill-{i}": _episodes(200 + i) for i in range(8)}
    expected = {sid: reference(policy, steps) for sid, steps in plans.items()}

    def incarnations() -> list[str]:
        return [r["incarnation"] for r in _all_replicas_up(url)["per_replica"]]

    before = incarnations()
    with ThreadPoolExecutor(len(plans)) as pool:
        futures = {
            sid: pool.submit(_run_stateless, url, plans[sid], i) for i, sid in enumerate(plans)
        }
        time.sleep(0.05)
        _kill_replica("gtrxl", "PolicyReplica0")
        assert not all(future.done() for future in futures.values()), "killed after the load"
        got = {sid: future.result(timeout=180) for sid, future in futures.items()}
    assert got == expected
    after = incarnations()  # replica 0 restarted by Serve, replica 1 untouched
    assert after[0] != before[0] and after[1] == before[1]


def test_a_replica_killed_between_steps_holds_no_step_for_its_restart(
    server: dict[str, Any],
) -> None:
    """Runs after the kill above, on the other app: a replica that dies while no step is on it
    gives no step an error, and Serve holds the steps sent to it until its replacement starts
    (7.6 s here beside two training jobs). Such a step is given up after the patience and
    answered by the other replica."""
    url = f"{server['url']}/lstm"
    steps = _episodes(300)
    expected = reference(load_policy(server["paths"]["lstm"]), steps)
    health = requests.get(f"{url}/v1/health", timeout=TIMEOUT).json()
    before = [r["incarnation"] for r in health["per_replica"]]
    killed = time.monotonic()
    _kill_replica("lstm", "PolicyReplica1")
    waits: list[float] = []
    assert _run_stateless(url, steps, 0, waits) == expected
    asked = time.monotonic()
    health = requests.get(f"{url}/v1/health", timeout=TIMEOUT).json()
    # answered at once, without waiting for the replacement: replica 1 reported down, unless
    # its replacement already serves
    assert time.monotonic() - asked < ServeOptions.health_wait_s + 2.0
    replica = health["per_replica"][1]
    replaced = replica["up"] and replica["incarnation"] != before[1]
    assert replaced or health["status"] == "degraded" and not replica["up"], health
    health = _all_replicas_up(url)
    restart_s = time.monotonic() - killed
    after = [r["incarnation"] for r in health["per_replica"]]
    assert after[0] == before[0] and after[1] != before[1]
    # without the patience the step sent to replica 1 right after the kill waits out its restart
    assert max(waits) < PATIENCE_S["lstm"] + 2.0 < restart_s, (max(waits), restart_s)
