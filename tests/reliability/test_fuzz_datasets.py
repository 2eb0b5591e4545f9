"""Fuzzing dataset reading: corrupted D4RL-layout HDF5 files.

A small valid file is written with h5py, then damaged: cut short, bits flipped, byte ranges
overwritten, datasets deleted, retyped, reshaped, replaced by groups or filled with NaN,
attributes garbled. ``load_dataset("d4rl:PATH")`` must raise :class:`DatasetError` or return a
dataset whose episodes add up to the file's transitions; ``rlformer dataset info`` must exit 0
or 2 with one ``error:`` line. Never another exception, never a hang (pytest-timeout).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from rlformer.cli import app
from rlformer.data import Dataset, DatasetError, load_dataset
from rlformer.data.inspect import format_summary, summarize_dataset
from tests.reliability.fuzzing import FUZZ, check_cli_result, outcome, tried

N = 12
KEYS = ["observations", "actions", "rewards", "terminals", "timeouts", "next_observations"]


def write_valid(path: Path) -> Path:
    """A 12-transition file in the D4RL layout with infos and rlformer-style attributes."""
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as handle:
        handle["observations"] = rng.normal(size=(N, 3)).astype(np.float32)
        handle["actions"] = rng.normal(size=(N, 1)).astype(np.float32)
        handle["rewards"] = rng.normal(size=N).astype(np.float32)
        handle["terminals"] = np.isin(np.arange(N), [3]).astype(bool)
        handle["timeouts"] = np.isin(np.arange(N), [7]).astype(bool)
        handle["next_observations"] = rng.normal(size=(N, 3)).astype(np.float32)
        handle["infos/qpos"] = rng.normal(size=(N, 2))
        handle.attrs["env_id"] = "Pendulum-v1"
        handle.attrs["episode_returns"] = json.dumps([1.0, 2.0, 3.0])
        handle.attrs["seed"] = 0
    return path


@pytest.fixture(scope="module")
def valid_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = write_valid(tmp_path_factory.mktemp("valid") / "valid.hdf5")
    load_dataset(f"d4rl:{path}")  # the undamaged file reads
    return path.read_bytes()


def _check_load(path: Path, target: str) -> None:
    """DatasetError, or a dataset that is consistent and can be summarised."""
    tried(target)
    try:
        data = load_dataset(f"d4rl:{path}")
    except DatasetError as err:
        assert str(err).strip() and "\n" not in str(err).strip(), repr(str(err))
        outcome(target, "DatasetError")
        return
    outcome(target, "loaded")
    assert isinstance(data, Dataset) and data.num_episodes >= 1
    for episode in data.episodes:
        n = len(episode)
        assert n >= 1 and len(episode.observations) == n and len(episode.actions) == n
        assert np.isfinite(episode.rewards).all()
        if episode.next_observations is not None:
            assert len(episode.next_observations) == n
        assert all(len(v) == n for v in episode.infos.values())
    format_summary(summarize_dataset(data))


# ------------------------------------------------------------------ byte-level damage
@pytest.mark.timeout(120)
@settings(FUZZ, max_examples=300)
@given(
    kind=st.sampled_from(["truncate", "flip", "overwrite", "zero", "random"]),
    where=st.floats(0.0, 1.0),
    count=st.integers(1, 16),
    seed=st.integers(0, 2**32 - 1),
)
def test_byte_damage(
    tmp_path_factory: pytest.TempPathFactory,
    valid_bytes: bytes,
    kind: str,
    where: float,
    count: int,
    seed: int,
) -> None:
    rng = random.Random(seed)
    data = bytearray(valid_bytes)
    at = min(int(where * len(data)), len(data) - 1)
    if kind == "truncate":
        data = data[:at]
    elif kind == "flip":
        for _ in range(count):
            spot = rng.randrange(len(data)) if rng.random() < 0.5 else at
            data[spot] ^= 1 << rng.randrange(8)
    elif kind == "overwrite":
        data[at : at + count * 4] = rng.randbytes(count * 4)
    elif kind == "zero":
        data = bytearray()
    else:
        data = bytearray(rng.randbytes(count * 64))
    path = tmp_path_factory.mktemp("bytes") / "d.hdf5"
    path.write_bytes(bytes(data))
    _check_load(path, f"dataset: byte damage ({kind})")


# ------------------------------------------------------------------ structural damage
def _replacement(kind: str, rng: np.random.Generator) -> object:
    """A value to store in place of a dataset: wrong type, shape or content."""
    return {
        "scalar": np.float32(1.5),
        "empty": np.zeros((0,), np.float32),
        "short": rng.normal(size=(N - 3, 3)).astype(np.float32),
        "long": rng.normal(size=(N + 2,)).astype(np.float32),
        "wide": rng.normal(size=(N, 2)).astype(np.float32),
        "zero_width": np.zeros((N, 0), np.float32),
        "3d": rng.normal(size=(N, 2, 2)).astype(np.float32),
        "nan": np.full((N,), np.nan, np.float32),
        "inf": np.full((N, 3), -np.inf),
        "strings": np.array([b"x"] * N),
        "vlen_str": np.array(["é"] * N, dtype=h5py.string_dtype()),
        "complex": np.ones(N, np.complex64),
        "compound": np.zeros(N, dtype=[("a", "f4"), ("b", "i4")]),
        "ints": np.arange(N, dtype=np.int64),
        "bools": np.ones(N, bool),
        "huge_ints": np.full((N,), 2**62, np.int64),
        "h5_empty": h5py.Empty("f4"),
    }[kind]


REPLACEMENTS = [
    "scalar",
    "empty",
    "short",
    "long",
    "wide",
    "zero_width",
    "3d",
    "nan",
    "inf",
    "strings",
    "vlen_str",
    "complex",
    "compound",
    "ints",
    "bools",
    "huge_ints",
    "h5_empty",
]


@st.composite
def _edits(draw: st.DrawFn) -> list[tuple[str, str, str]]:
    edit = st.tuples(
        st.sampled_from(["delete", "replace", "group", "attr", "infos"]),
        st.sampled_from([*KEYS, "infos", "infos/qpos"]),
        st.sampled_from(REPLACEMENTS),
    )
    return draw(st.lists(edit, min_size=1, max_size=3))


def _apply(handle: h5py.File, action: str, key: str, kind: str, rng: np.random.Generator) -> None:
    if action in ("delete", "replace", "group") and key in handle:
        del handle[key]
    if action == "replace":
        handle[key] = _replacement(kind, rng)
    elif action == "group":
        handle.create_group(key)
    elif action == "attr":
        junk = {
            "bytes": np.void(b"\xff\xfe\x00"),
            "json": "[1, 2",
            "array": np.arange(4),
            "utf8": "ünïcode",
            "nested": json.dumps({"a": [1, {"b": None}]}),
            "bad_utf8": np.bytes_(b"\xff\xfe"),
            "empty": h5py.Empty("f4"),
        }
        name = rng.choice(list(junk))
        handle.attrs[rng.choice(["env_id", "episode_returns", "seed", "junk"])] = junk[name]
    elif action == "infos":
        if "infos" in handle:
            del handle["infos"]
        if kind in ("scalar", "short", "long", "h5_empty", "strings", "compound"):
            handle[f"infos/{key.replace('/', '_')}"] = _replacement(kind, rng)
        else:
            handle["infos"] = _replacement(kind, rng)  # a dataset where a group belongs


@pytest.mark.timeout(120)
@settings(FUZZ, max_examples=250)
@given(edits=_edits(), seed=st.integers(0, 2**16))
def test_structural_damage(
    tmp_path_factory: pytest.TempPathFactory, edits: list[tuple[str, str, str]], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    path = write_valid(tmp_path_factory.mktemp("struct") / "d.hdf5")
    with h5py.File(path, "a") as handle:
        for action, key, kind in edits:
            _apply(handle, action, key, kind, rng)
    _check_load(path, "dataset: structural damage")


# ------------------------------------------------------------------ through the real CLI
@pytest.mark.timeout(120)
@settings(FUZZ, max_examples=60)
@given(
    edits=st.one_of(st.just([]), _edits()),
    cut=st.one_of(st.none(), st.floats(0.0, 1.0)),
    seed=st.integers(0, 2**16),
)
def test_dataset_info_cli(
    tmp_path_factory: pytest.TempPathFactory,
    edits: list[tuple[str, str, str]],
    cut: float | None,
    seed: int,
) -> None:
    target = "cli: dataset info"
    tried(target)
    rng = np.random.default_rng(seed)
    path = write_valid(tmp_path_factory.mktemp("cli") / "d.hdf5")
    with h5py.File(path, "a") as handle:
        for action, key, kind in edits:
            _apply(handle, action, key, kind, rng)
    if cut is not None:
        data = path.read_bytes()
        path.write_bytes(data[: int(cut * len(data))])
    spec = rng.choice([f"d4rl:{path}", str(path)])
    result = CliRunner().invoke(app, ["dataset", "info", spec])
    check_cli_result(result)
    outcome(target, f"exit {result.exit_code}")
    if result.exit_code == 2:
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    else:
        assert "transitions" in result.stdout
