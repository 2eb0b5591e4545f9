"""Fuzzing checkpoint loading: damaged, altered and hostile checkpoint files.

A real checkpoint comes from a tiny in-process ``train`` run (CartPole, MLP torso). Its bytes are
cut, zeroed, replaced, bit-flipped (anywhere, and inside the zip's pickle with a correct CRC);
its payload is altered (keys dropped, values retyped, weights reshaped or set to NaN); and files
whose pickle would create a marker file are offered. ``load_policy`` must raise
:class:`CheckpointError` with one line or give an agent that acts; ``rlformer eval PATH
--episodes 1`` must exit 0 or 2 with one ``error:`` line; the marker file must never appear.
"""

from __future__ import annotations

import builtins
import io
import os
import pickle
import random
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from rlformer.cli import app
from rlformer.config import load_config
from rlformer.policies import load_policy
from rlformer.runs.checkpoints import CheckpointError, read_checkpoint_file
from tests.reliability.fuzzing import FUZZ, check_cli_result, outcome, tried, working_directory


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real checkpoint file written by ``rlformer.runs.training.train`` (one tiny iteration)."""
    from rlformer.runs.training import train

    root = tmp_path_factory.mktemp("runs")
    cfg = load_config(
        None,
        [
            f"run.root={root}",
            "run.progress=false",
            "env.id=CartPole-v1",
            "model.torso=mlp",
            "model.mlp_hidden=[8]",
            "rollout.envs_per_worker=2",
            "rollout.fragment_length=8",
            "ppo.total_steps=16",
            "ppo.num_minibatches=1",
            "ppo.update_epochs=1",
            "eval.episodes=0",
        ],
    )
    result = train(cfg)
    torch.set_num_threads(1)
    (written,) = (result.run_dir / "checkpoints").glob("ckpt_*.pt")
    # Made byte-for-byte reproducible, so a given bit flip hits the same place on every run:
    # saved under a fixed name (torch names the zip's folder after the file, and
    # save_checkpoint writes through a randomly named temp file), with the temp run root and
    # the pickled env states (eval reads neither) replaced by fixed values of the same kind.
    payload = read_checkpoint_file(written)
    payload["config"]["run"]["root"] = "runs"
    payload["collector"] = {"blobs": [bytes(64)], "mac": "0" * 64}
    path = tmp_path_factory.mktemp("fixed") / "ckpt_000000016.pt"
    torch.save(payload, path)
    load_policy(path)  # the undamaged file loads
    return path


@pytest.fixture(scope="module")
def marker_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Hostile pickles try to create files here; the folder must stay empty."""
    return tmp_path_factory.mktemp("markers")


def _check_load(path: Path, target: str, marker_dir: Path) -> None:
    """CheckpointError (one line), or a policy that acts with finite outputs."""
    tried(target)
    try:
        policy = load_policy(path)
    except CheckpointError as err:
        assert str(err).strip() and "\n" not in str(err), repr(str(err))
        outcome(target, type(err).__name__)
    else:
        outcome(target, "loaded")
        assert policy.info.kind == "ppo"
        obs = np.stack([policy.observation_space.sample() for _ in range(2)])
        actions, _ = policy.act(  # stochastic: sampling sees NaNs at once
            obs, policy.initial_state(2), np.ones(2, dtype=bool), deterministic=False
        )
        assert all(policy.action_space.contains(a) for a in actions)
    assert not any(marker_dir.iterdir()), "a checkpoint's pickle ran code"


# ------------------------------------------------------------------ byte-level damage
@pytest.mark.timeout(180)
@settings(FUZZ, max_examples=200)
@given(
    kind=st.sampled_from(["truncate", "zero", "random", "flip", "overwrite", "pickle_flip"]),
    where=st.floats(0.0, 1.0),
    count=st.integers(1, 8),
    seed=st.integers(0, 2**32 - 1),
)
def test_byte_damage(
    tmp_path_factory: pytest.TempPathFactory,
    checkpoint: Path,
    marker_dir: Path,
    kind: str,
    where: float,
    count: int,
    seed: int,
) -> None:
    rng = random.Random(seed)
    data = bytearray(checkpoint.read_bytes())
    at = min(int(where * len(data)), len(data) - 1)
    if kind == "truncate":
        data = data[:at]
    elif kind == "zero":
        data = bytearray()
    elif kind == "random":
        data = bytearray(rng.randbytes(count * 256))
    elif kind == "flip":
        for _ in range(count):
            data[rng.randrange(len(data)) if rng.random() < 0.5 else at] ^= 1 << rng.randrange(8)
    elif kind == "overwrite":
        data[at : at + count * 8] = rng.randbytes(count * 8)
    else:  # flip bits in the pickle itself and rebuild the zip, so its CRCs still match
        data = bytearray(_rezip(bytes(data), lambda pkl: _flip(pkl, count, where, rng)))
    path = tmp_path_factory.mktemp("bytes") / "ckpt_000000016.pt"
    path.write_bytes(bytes(data))
    _check_load(path, f"checkpoint: byte damage ({kind})", marker_dir)


def _flip(data: bytes, count: int, where: float, rng: random.Random) -> bytes:
    out = bytearray(data)
    at = min(int(where * len(out)), len(out) - 1)
    for _ in range(count):
        out[rng.randrange(len(out)) if rng.random() < 0.5 else at] ^= 1 << rng.randrange(8)
    return bytes(out)


def _rezip(data: bytes, change: Any) -> bytes:
    """The checkpoint zip with its ``data.pkl`` entry replaced by ``change(data.pkl)``."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            content = source.read(info)
            if info.filename.endswith("/data.pkl"):
                content = change(content)
            target.writestr(info, content)
    return out.getvalue()


# ------------------------------------------------------------------ altered payloads
JUNK = [None, 0, -1, 2**40, 1.5, float("nan"), "", "ppo", b"\x00", [], {}, [1, "a"], {"x": 1},
        torch.zeros(0), torch.ones(3, 3), torch.tensor(float("nan"))]  # fmt: skip
TOP_KEYS = ["format", "kind", "config", "spec", "model", "learner", "collector", "iteration"]


def _paths(payload: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path into the nested dicts / lists of a payload."""
    found = []
    items = payload.items() if isinstance(payload, dict) else enumerate(payload)
    for key, value in items:
        found.append((*prefix, key))
        if isinstance(value, dict | list) and len(found) < 400:
            found += _paths(value, (*prefix, key))
    return found


@st.composite
def _alterations(draw: st.DrawFn, payload: dict) -> list[tuple[str, tuple, Any]]:
    paths = _paths(payload)
    edit = st.one_of(
        st.tuples(st.just("delete"), st.sampled_from(paths), st.none()),
        st.tuples(st.just("set"), st.sampled_from(paths), st.sampled_from(JUNK)),
        st.tuples(st.just("set"), st.sampled_from([(k,) for k in TOP_KEYS]), st.sampled_from(JUNK)),
        st.tuples(st.just("weights"), st.sampled_from(list(payload["model"])), st.sampled_from(
            ["nan", "inf", "reshape", "dtype", "drop_dim", "scalar"])),
    )  # fmt: skip
    return draw(st.lists(edit, min_size=1, max_size=3))


def _alter(payload: dict, action: str, where: Any, value: Any) -> None:
    if action == "weights":
        weights = payload.get("model")
        tensor = weights.get(where) if isinstance(weights, dict) else None
        if not isinstance(tensor, torch.Tensor):
            return  # an earlier edit removed or replaced it
        weights[where] = {
            "nan": tensor.float().fill_(float("nan")),
            "inf": tensor.float().fill_(float("inf")),
            "reshape": tensor.reshape(-1)[:-1] if tensor.numel() > 1 else tensor.reshape(1, 1, -1),
            "dtype": tensor.to(torch.int64),
            "drop_dim": tensor[0] if tensor.ndim else tensor.reshape(1),
            "scalar": torch.tensor(1.0),
        }[value]
        return
    node = payload
    for key in where[:-1]:
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            return  # an earlier edit removed or replaced the parent
    if not isinstance(node, dict | list):
        return
    try:
        if action == "delete":
            del node[where[-1]]
        else:
            node[where[-1]] = value.clone() if isinstance(value, torch.Tensor) else value
    except (KeyError, IndexError, TypeError):
        pass


@pytest.mark.timeout(180)
@settings(FUZZ, max_examples=250)
@given(data=st.data())
def test_altered_payloads(
    tmp_path_factory: pytest.TempPathFactory, checkpoint: Path, marker_dir: Path, data: Any
) -> None:
    payload = read_checkpoint_file(checkpoint)
    for action, where, value in data.draw(_alterations(payload)):
        _alter(payload, action, where, value)
    path = tmp_path_factory.mktemp("payload") / "ckpt_000000016.pt"
    torch.save(payload, path)
    _check_load(path, "checkpoint: altered payload", marker_dir)


# ------------------------------------------------------------------ hostile pickles
class _Hostile:
    """Unpickling this runs ``call(*args)``: the classic way a pickle runs code."""

    def __init__(self, call: Any, *args: Any) -> None:
        self.call, self.args = call, args

    def __reduce__(self) -> tuple:
        return self.call, self.args


def _hostile_objects(marker: Path) -> dict[str, Any]:
    return {
        "open": _Hostile(builtins.open, str(marker), "w"),
        "os.system": _Hostile(os.system, f"touch {marker}"),
        "subprocess": _Hostile(subprocess.call, ["touch", str(marker)]),
        "exec": _Hostile(builtins.exec, f"open({str(marker)!r}, 'w').close()"),
        "eval": _Hostile(builtins.eval, f"open({str(marker)!r}, 'w')"),
        "Path.touch": _Hostile(Path.touch, marker),
    }


HOSTILE = ["open", "os.system", "subprocess", "exec", "eval", "Path.touch"]


@pytest.mark.timeout(180)
@settings(FUZZ, max_examples=80)
@given(
    name=st.sampled_from(HOSTILE),
    where=st.sampled_from(["top", "config", "model", "spec", "collector", "deep_list"]),
    container=st.sampled_from(["torch_zip", "torch_legacy", "raw_pickle", "zip_swap"]),
    protocol=st.integers(2, 5),
)
def test_hostile_pickles_never_run(
    tmp_path_factory: pytest.TempPathFactory,
    checkpoint: Path,
    marker_dir: Path,
    name: str,
    where: str,
    container: str,
    protocol: int,
) -> None:
    marker = marker_dir / "pwned"
    evil = _hostile_objects(marker)[name]
    payload: dict[str, Any] = read_checkpoint_file(checkpoint)
    if where == "top":
        payload = {"format": 2, "kind": evil}
    elif where == "deep_list":
        payload["recent_episodes"]["returns"] = [1.0, [2.0, {"x": evil}]]
    else:
        payload[where] = {"x": evil} if where != "model" else {**payload["model"], "w": evil}
    path = tmp_path_factory.mktemp("hostile") / "ckpt_000000016.pt"
    if container == "torch_zip":
        torch.save(payload, path, pickle_protocol=protocol)
    elif container == "torch_legacy":
        torch.save(payload, path, _use_new_zipfile_serialization=False, pickle_protocol=protocol)
    elif container == "raw_pickle":
        path.write_bytes(pickle.dumps(payload, protocol=protocol))
    else:  # a valid checkpoint's zip whose data.pkl is swapped for the hostile pickle
        hostile = pickle.dumps({"format": 2, "kind": "ppo", "x": evil}, protocol=protocol)
        path.write_bytes(_rezip(checkpoint.read_bytes(), lambda _: hostile))
    _check_load(path, "checkpoint: hostile pickle", marker_dir)
    with pytest.raises(CheckpointError):
        load_policy(path)  # never "loaded": the hostile object cannot be read back
    assert not marker.exists()


# ------------------------------------------------------------------ through the real CLI
@pytest.mark.slow
@pytest.mark.timeout(300)
@settings(FUZZ, max_examples=30)
@given(
    kind=st.sampled_from(["none", "truncate", "flip", "pickle_flip", "nan", "hostile"]),
    where=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**32 - 1),
    as_run_dir=st.booleans(),
)
def test_eval_cli(
    tmp_path_factory: pytest.TempPathFactory,
    checkpoint: Path,
    marker_dir: Path,
    kind: str,
    where: float,
    seed: int,
    as_run_dir: bool,
) -> None:
    target = "cli: eval PATH --episodes 1"
    tried(target)
    rng = random.Random(seed)
    data = checkpoint.read_bytes()
    if kind == "truncate":
        data = data[: int(where * len(data))]
    elif kind == "flip":
        data = _flip(data, 4, where, rng)
    elif kind == "pickle_flip":
        data = _rezip(data, lambda pkl: _flip(pkl, 2, where, rng))
    elif kind in ("nan", "hostile"):
        payload = read_checkpoint_file(checkpoint)
        if kind == "nan":
            payload["model"] = {
                k: v.float().fill_(float("nan")) for k, v in payload["model"].items()
            }
        else:
            payload["spec"] = _Hostile(builtins.open, str(marker_dir / "pwned"), "w")
        buffer = io.BytesIO()
        torch.save(payload, buffer)
        data = buffer.getvalue()
    tmp = tmp_path_factory.mktemp("cli")
    (tmp / "checkpoints").mkdir()
    path = tmp / "checkpoints" / "ckpt_000000016.pt"
    path.write_bytes(data)
    spec = str(tmp) if as_run_dir else str(path)
    args = ["eval", spec, "--episodes", "1", "--num-envs", "1", "--stochastic"]
    with working_directory(tmp):
        result = CliRunner().invoke(app, args)
    check_cli_result(result)
    outcome(target, f"exit {result.exit_code}")
    if result.exit_code == 2:
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not any(marker_dir.iterdir())
