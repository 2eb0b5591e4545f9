"""Stateless serving and Decision Transformers without Ray or HTTP: sealed states open to the
same state, every altered, foreign or oversized blob is refused with a 4xx, steps that carry
their state in blobs act like separate runs, and DT sessions batch like PPO ones."""

from __future__ import annotations

import base64
import zlib
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import rlformer_envs  # noqa: F401
import torch
from typer.testing import CliRunner

from rlformer.algos.dt.loading import build_dt
from rlformer.config import load_config
from rlformer.policies import Policy, load_policy
from rlformer.runs.checkpoints import encode_spec, write_checkpoint_file
from rlformer.serve.batched_steps import StepRequest, parse_step, row_ops, step_batch
from rlformer.serve.messages import RequestError
from rlformer.serve.sessions import SessionStore
from rlformer.serve.state_blob import (
    MAGIC,
    StateCodec,
    new_state_key,
    policy_fingerprint,
    read_state_key,
)
from rlformer.serve.steps import state_codec
from tests.serve.test_serve_http import APPS, _checkpoint, _episodes

KEY = new_state_key()
DT_OVERRIDES = [
    "algo=dt",
    "env.id=rlformer/TMaze-v0",
    "env.kwargs.length=3",
    "dt.context=4",
    "dt.memory_segments=2",
    "dt.core.n_layers=1",
    "dt.core.d_model=16",
    "dt.core.n_heads=2",
    "dt.core.d_ff=32",
    "dt.core.memory_length=12",
    "dt.core.dropout=0.0",
    "dt.target_returns=[1.0]",
    "dt.max_timestep=64",
    "run.progress=false",
]


def dt_checkpoint(root: Path, name: str = "dt", seed: int = 0) -> Path:
    """An untrained memory DT (windows of 4 steps, memory carried between them) on TMaze,
    with spread weights so that its action logits are far apart."""
    cfg = load_config(None, DT_OVERRIDES)
    env = gym.make(cfg.env.id, **cfg.env.kwargs)
    model = build_dt(cfg, env.observation_space, env.action_space)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * 0.5)
    path = root / f"{name}.pt"
    payload = {
        "kind": "dt",
        "config": cfg.model_dump(mode="json"),
        "spec": encode_spec(env.observation_space, env.action_space),
        "model": model.state_dict(),
        "normalization": {
            "state_mean": torch.zeros(3),
            "state_std": torch.ones(3),
            "action_low": None,
            "action_high": None,
        },
    }
    write_checkpoint_file(path, payload)
    return path


def dt_episodes(seed: int) -> list[dict[str, Any]]:
    """:func:`_episodes` with a target return at each episode start (none at some starts:
    the config's default)."""
    rng = np.random.default_rng(1000 + seed)
    steps = _episodes(seed)
    for step in steps:
        if step["episode_start"] and rng.random() < 0.8:
            step["target_return"] = float(rng.choice([-1.0, 0.5, 1.0, 3.0]))
    return steps


def reference(policy: Policy, steps: list[dict[str, Any]]) -> list[Any]:
    """One session's actions run alone and in order (a fresh state at each episode start)."""
    state, actions = None, []
    for step in steps:
        if step["episode_start"]:
            state = policy.initial_state(1, target_return=step.get("target_return"))
        reward = None if step["reward"] is None else np.array([step["reward"]], np.float32)
        action, state = policy.act(
            np.array([step["observation"]], np.float32),
            state,
            np.array([step["episode_start"]]),
            reward,
        )
        actions.append(np.asarray(action)[0].tolist())
    return actions


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ckpt")
    found = {name: _checkpoint(root, name, overrides) for name, (overrides, *_) in APPS.items()}
    return {**found, "dt": dt_checkpoint(root)}


def _stepped_state(policy: Policy, steps: int = 6) -> Any:
    """A one-row state some steps into an episode (memory partly filled)."""
    ops = row_ops(policy)
    state = ops.initial(None)
    for t in range(steps):
        obs = np.full((1, 3), 0.1 * t, np.float32)
        _, state = policy.act(obs, state, np.array([t == 0]), np.array([0.5], np.float32))
    return state


def _assert_same_state(a: Any, b: Any) -> None:
    from rlformer.serve.state_blob import _leaves

    left, right = list(_leaves(a)), list(_leaves(b))
    assert [name for name, _ in left] == [name for name, _ in right]
    for (name, x), (_, y) in zip(left, right, strict=True):
        assert type(x) is type(y), name
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=name)


@pytest.mark.parametrize("name", [*APPS, "dt"])
def test_a_sealed_state_opens_to_the_same_state(paths: dict[str, Path], name: str) -> None:
    policy = load_policy(paths[name])
    codec = state_codec(policy, row_ops(policy), KEY)
    state = _stepped_state(policy)
    blob = codec.seal(state)
    assert len(blob) <= codec.max_chars
    _assert_same_state(codec.open(blob), state)
    fresh = row_ops(policy).initial(None)  # mostly zeros: compressed, still exact
    assert len(codec.seal(fresh)) < codec.max_chars
    _assert_same_state(codec.open(codec.seal(fresh)), fresh)


def _refusal(codec: StateCodec, blob: Any) -> RequestError:
    with pytest.raises(RequestError) as refused:
        codec.open(blob)
    assert refused.value.status in (400, 413) and "\n" not in str(refused.value)
    return refused.value


def _raw(blob: str) -> bytearray:
    return bytearray(base64.b64decode(blob))


def _text(raw: bytes) -> str:
    return base64.b64encode(bytes(raw)).decode()


def test_altered_foreign_oversized_and_malformed_blobs_are_refused(
    paths: dict[str, Path], tmp_path: Path
) -> None:
    policy = load_policy(paths["gtrxl"])
    codec = state_codec(policy, row_ops(policy), KEY)
    blob = codec.seal(_stepped_state(policy))
    for offset in (len(MAGIC), 20, len(_raw(blob)) - 1):  # flags, the MAC, the payload
        tampered = _raw(blob)
        tampered[offset] ^= 0x01
        assert _refusal(codec, _text(tampered)).code in ("state_tampered", "bad_state")
    other_key = state_codec(policy, row_ops(policy), new_state_key())
    assert _refusal(other_key, blob).code == "state_tampered"
    # the same architecture with other weights: another identity, refused even when the
    # identity written in clear is rewritten to this policy's (it is inside the MAC too)
    other = load_policy(_checkpoint(tmp_path, "other", APPS["gtrxl"][0]))
    with torch.no_grad():
        next(other.model.parameters()).add_(1.0)  # type: ignore[attr-defined]
    foreign = state_codec(other, row_ops(other), KEY)
    assert foreign.policy_id != codec.policy_id
    assert _refusal(foreign, blob).code == "foreign_state"
    disguised = _raw(blob)
    disguised[len(MAGIC) + 1 : len(MAGIC) + 9] = bytes.fromhex(foreign.policy_id)
    assert _refusal(foreign, _text(disguised)).code == "state_tampered"
    lstm = load_policy(paths["lstm"])
    lstm_blob = state_codec(lstm, row_ops(lstm), KEY).seal(_stepped_state(lstm))
    assert _refusal(codec, lstm_blob).code == "foreign_state"
    too_long = _refusal(codec, blob + "A" * codec.max_chars)
    assert too_long.status == 413 and str(codec.max_chars) in str(too_long)
    assert _refusal(codec, "not base64 !").code == "bad_state"
    assert _refusal(codec, _text(b"XXXX" + bytes(60))).code == "bad_state"
    assert _refusal(codec, {"hidden": [0.0]}).code == "bad_state"
    assert _refusal(codec, _text(_raw(blob)[:50])).code in ("state_tampered", "bad_state")


def test_a_blob_sealed_with_the_key_is_still_checked_before_it_is_used(
    paths: dict[str, Path],
) -> None:
    """Even with a valid MAC (a leaked key), a payload that inflates beyond the policy's state
    or holds other shapes is refused, never decompressed without bound or reshaped."""
    policy = load_policy(paths["lstm"])
    codec = state_codec(policy, row_ops(policy), KEY)

    def sealed(payload: bytes, flags: int) -> str:
        prefix = MAGIC + bytes([flags]) + codec.fingerprint[:8]
        return _text(prefix + codec._mac(flags, payload) + payload)

    bomb = zlib.compress(bytes(codec.max_payload * 100))
    assert _refusal(codec, sealed(bomb, 1)).code == "bad_state"
    assert "shapes" in str(_refusal(codec, sealed(b"\x02\x00\x00\x00{}", 0)))
    assert _refusal(codec, sealed(b"not zlib", 1)).code == "bad_state"


def test_the_policy_identity_follows_the_weights_not_the_file(
    paths: dict[str, Path], tmp_path: Path
) -> None:
    same = policy_fingerprint(load_policy(paths["gtrxl"]))
    assert same == policy_fingerprint(load_policy(paths["gtrxl"]))
    copy = tmp_path / "copy.pt"
    copy.write_bytes(paths["gtrxl"].read_bytes())
    assert policy_fingerprint(load_policy(copy)) == same
    assert policy_fingerprint(load_policy(paths["lstm"])) != same


def _run_stateless(policy: Policy, plans: dict[str, list[dict]], seed: int) -> dict[str, list]:
    """Every session's steps as stateless requests in random batches (distinct sessions per
    batch: a session's next step needs its previous answer), blobs carried by the 'client'."""
    ops, store = row_ops(policy), SessionStore(60, 1)
    codec = state_codec(policy, ops, KEY)
    rng = np.random.default_rng(seed)
    cursor, blobs = dict.fromkeys(plans, 0), dict.fromkeys(plans)
    got: dict[str, list] = {sid: [] for sid in plans}
    while live := [sid for sid in plans if cursor[sid] < len(plans[sid])]:
        picks = rng.choice(live, size=min(len(live), int(rng.integers(1, 9))), replace=False)
        batch: list[StepRequest] = []
        for sid in picks:
            body = {**plans[sid][cursor[sid]], "state": blobs[sid]}
            batch.append(parse_step(policy, None, body, codec.open))
            cursor[sid] += 1
        results = step_batch(policy, ops, store, batch, seal=codec.seal)
        for sid, result in zip(picks, results, strict=True):
            got[sid].append(result["action"])
            blobs[sid] = result["state"]
    assert len(store) == 0  # nothing was kept
    return got


@pytest.mark.parametrize("name", [*APPS, "dt"])
def test_stateless_batches_act_like_separate_runs(paths: dict[str, Path], name: str) -> None:
    policy = load_policy(paths[name])
    make = dt_episodes if name == "dt" else _episodes
    plans = {f"s{i}": make(i) for i in range(12)}
    expected = {sid: reference(policy, steps) for sid, steps in plans.items()}
    assert _run_stateless(policy, plans, seed=5) == expected


def test_dt_sessions_batch_like_separate_runs(paths: dict[str, Path]) -> None:
    """Session-held DT contexts (memory, window, return to go, target) in random batches that
    may hold a session twice, as the PPO policies are tested in test_batching."""
    policy = load_policy(paths["dt"])
    ops, store = row_ops(policy), SessionStore(60, 100)
    plans = {f"s{i}": dt_episodes(i) for i in range(12)}
    expected = {sid: reference(policy, steps) for sid, steps in plans.items()}
    rng = np.random.default_rng(6)
    cursor = dict.fromkeys(plans, 0)
    got: dict[str, list] = {sid: [] for sid in plans}
    while live := [sid for sid in plans if cursor[sid] < len(plans[sid])]:
        picks = rng.choice(live, size=min(len(live), int(rng.integers(1, 9))), replace=True)
        batch = []
        for sid in picks:
            if cursor[sid] < len(plans[sid]):
                batch.append(parse_step(policy, sid, plans[sid][cursor[sid]]))
                cursor[sid] += 1
        for request, result in zip(batch, step_batch(policy, ops, store, batch), strict=True):
            got[request.session_id].append(result["action"])
    assert got == expected


def test_step_fields_a_policy_cannot_use_are_refused(paths: dict[str, Path]) -> None:
    ppo, dt = load_policy(paths["lstm"]), load_policy(paths["dt"])
    first = {"observation": [0.1, 0.2, 0.3], "episode_start": True}
    cases = [
        (ppo, "s", {**first, "target_return": 1.0}, "not return-conditioned"),
        (dt, "s", {**first, "episode_start": False, "reward": 0.0, "target_return": 1.0}, "only"),
        (dt, "s", {**first, "episode_start": False}, "needs the reward"),
        (dt, "s", {**first, "target_return": "high"}, "finite number"),
        (ppo, "s", {**first, "state": "x"}, "unknown fields"),
        (ppo, None, {**first, "episode_start": False}, "missing field 'state'"),
    ]
    codec = state_codec(ppo, row_ops(ppo), KEY)
    for policy, sid, body, message in cases:
        with pytest.raises(RequestError, match=message) as refused:
            parse_step(policy, sid, body, codec.open)
        assert refused.value.status == 400
    assert parse_step(dt, "s", {**first, "target_return": 2}).target_return == 2.0


def test_cli_refuses_a_bad_state_key_before_starting(tmp_path: Path) -> None:
    from rlformer.cli import app

    short = tmp_path / "short.key"
    short.write_text("abc\n")
    good = tmp_path / "good.key"
    good.write_text(new_state_key() + "\n")
    assert read_state_key(good) == read_state_key(good)
    runner = CliRunner()
    cases = [
        (["serve", "x.pt", "--state-key-file", str(good)], "add --stateless"),
        (["serve", "x.pt", "--stateless", "--state-key-file", str(short)], "at least 32 bytes"),
        (["serve", "x.pt", "--stateless", "--state-key-file", str(tmp_path / "no")], "key-file"),
    ]
    for args, message in cases:
        result = runner.invoke(app, args)
        assert result.exit_code != 0 and message in result.output, result.output
