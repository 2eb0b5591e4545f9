"""The serving core without Ray or HTTP: session TTL / LRU, and batched steps of many
sessions (states concatenated, split back) equal to each session run alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlformer.policies import load_policy
from rlformer.serve.batched_steps import StepRequest, parse_step, row_ops, step_batch
from rlformer.serve.messages import RequestError
from rlformer.serve.sessions import SessionStore
from tests.serve.test_serve_http import APPS, _checkpoint, _episodes, _reference


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_idle_sessions_expire_and_crowded_ones_are_evicted() -> None:
    clock = FakeClock()
    store = SessionStore(ttl_s=10, max_sessions=2, clock=clock)
    store.put("a", 1)
    clock.now = 5
    store.put("b", 2)
    store.put("c", 3)  # a is the least recently used
    with pytest.raises(RequestError, match="least recently used") as evicted:
        store.get("a")
    assert evicted.value.status == 409 and evicted.value.code == "session_dropped"
    clock.now = 16  # b and c idle 11 s
    with pytest.raises(RequestError, match="idle for more than the 10 s"):
        store.get("b")
    assert len(store) == 0
    with pytest.raises(RequestError) as unknown:
        store.get("never")
    assert unknown.value.code == "unknown_session"
    store.put("a", 4)  # restarting clears the tombstone
    assert store.get("a") == 4 and store.delete("a") and not store.delete("a")


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ckpt")
    return {name: _checkpoint(root, name, overrides) for name, (overrides, *_) in APPS.items()}


def _run_batched(spec: str | Path, plans: dict[str, list[dict]], seed: int) -> dict[str, list]:
    """Every session's steps, stepped in random batches that may hold a session twice."""
    policy = load_policy(spec)
    ops, store = row_ops(policy), SessionStore(60, 1000)
    queue = [(sid, t) for sid, steps in plans.items() for t in range(len(steps))]
    rng = np.random.default_rng(seed)
    cursor = {sid: 0 for sid in plans}
    got: dict[str, list] = {sid: [] for sid in plans}
    while any(cursor[sid] < len(plans[sid]) for sid in plans):
        live = [sid for sid in plans if cursor[sid] < len(plans[sid])]
        picks = rng.choice(live, size=min(len(live), int(rng.integers(1, 9))), replace=True)
        batch: list[StepRequest] = []
        for sid in picks:
            if cursor[sid] < len(plans[sid]):
                batch.append(parse_step(policy, sid, plans[sid][cursor[sid]]))
                cursor[sid] += 1
        for request, result in zip(batch, step_batch(policy, ops, store, batch), strict=True):
            got[request.session_id].append(result["action"])
    assert sum(len(v) for v in got.values()) == len(queue)
    return got


@pytest.mark.parametrize("name", list(APPS))
def test_random_batches_act_like_separate_runs(paths: dict[str, Path], name: str) -> None:
    plans = {f"s{i}": _episodes(i) for i in range(16)}
    expected = {sid: _reference(paths[name], steps) for sid, steps in plans.items()}
    assert _run_batched(paths[name], plans, seed=3) == expected


@pytest.mark.slow
def test_an_export_directory_is_served_the_same_way(paths: dict[str, Path], tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    from rlformer.export.writer import export_policy

    export_policy(load_policy(paths["lstm"]), tmp_path / "export", "onnx")
    plans = {f"s{i}": _episodes(i) for i in range(8)}
    expected = {sid: _reference(tmp_path / "export", steps) for sid, steps in plans.items()}
    assert _run_batched(tmp_path / "export", plans, seed=4) == expected


def test_a_format_1_export_is_served_as_it_acted_when_written() -> None:
    """The format-1 export fixture's recorded episodes, one session per recorded env slot,
    stepped through the session store in shuffled batches: the recorded actions."""
    pytest.importorskip("onnxruntime")
    from tests.policies.test_export_formats import V1, recorded

    policy, steps = load_policy(V1), recorded()
    ops, store = row_ops(policy), SessionStore(60, 100)
    slots = steps["obs"].shape[1]
    rng = np.random.default_rng(0)
    for t in range(len(steps["obs"])):
        bodies = {
            f"slot-{b}": {
                "observation": steps["obs"][t, b].tolist(),
                "episode_start": bool(steps["episode_start"][t, b]),
                "reward": float(steps["reward"][t, b]),
            }
            for b in rng.permutation(slots)
        }
        batch = [parse_step(policy, sid, body) for sid, body in bodies.items()]
        results = step_batch(policy, ops, store, batch)
        for request, result in zip(batch, results, strict=True):
            slot = int(request.session_id.split("-")[1])
            assert result["action"] == steps["action"][t, slot].tolist(), (t, slot, result)
