"""D4RL-layout reading of hand-built HDF5 files: splitting, partial episodes, bad files."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from rlformer.data import DatasetError, load_dataset
from rlformer.data.d4rl_format import write_d4rl
from rlformer.data.references import normalized_score


def _write(path: Path, n: int = 7, **overrides: np.ndarray | None) -> Path:
    arrays = {
        "observations": np.arange(n * 2, dtype=np.float32).reshape(n, 2),
        "actions": np.arange(n, dtype=np.float32).reshape(n, 1),
        "rewards": np.arange(n, dtype=np.float32),
        "terminals": np.array([0, 0, 1, 0, 0, 0, 0][:n], dtype=bool),
        "timeouts": np.array([0, 0, 0, 0, 1, 0, 0][:n], dtype=bool),
        "next_observations": np.arange(n * 2, dtype=np.float32).reshape(n, 2) + 2,
    }
    arrays.update(overrides)
    with h5py.File(path, "w") as handle:
        for key, value in arrays.items():
            if value is not None:
                handle[key] = value
        handle["infos/qpos"] = np.zeros((n, 3))
        handle.attrs["env_id"] = "Hopper-v5"
    return path


def test_splits_on_terminals_and_timeouts_and_keeps_trailing_partial(tmp_path: Path) -> None:
    data = load_dataset(f"d4rl:{_write(tmp_path / 'd.hdf5')}")
    assert [len(e) for e in data.episodes] == [3, 2, 2]
    first, second, tail = data.episodes
    assert first.terminated and not first.truncated
    assert second.truncated and not second.terminated  # timeout
    assert tail.truncated and not tail.terminated  # trailing partial, kept
    np.testing.assert_array_equal(first.rewards, [0, 1, 2])
    np.testing.assert_array_equal(second.observations, [[6, 7], [8, 9]])
    np.testing.assert_array_equal(tail.next_observations, [[12, 13], [14, 15]])
    assert tail.infos["qpos"].shape == (2, 3)
    assert data.num_transitions == 7 and data.env_id == "Hopper-v5"
    np.testing.assert_allclose(data.returns, [3, 7, 11])


def test_plain_path_and_missing_optional_keys(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.hdf5", timeouts=None, next_observations=None)
    data = load_dataset(path)
    assert [len(e) for e in data.episodes] == [3, 4]
    assert data.episodes[0].next_observations is None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"actions": None}, "missing key(s) actions"),
        ({"rewards": np.zeros(5, np.float32)}, "'rewards' has 5 entries but observations has 7"),
        ({"observations": np.full((7, 2), np.nan, np.float32)}, "'observations' contains NaN"),
        ({"rewards": np.array([0, 1, np.inf, 0, 0, 0, 0], np.float32)}, "first at transition 2"),
        ({"actions": np.array(["a"] * 7, dtype="S1")}, "'actions' has dtype |S1"),
        ({"rewards": np.zeros((7, 2), np.float32)}, "one number per transition"),
        ({"terminals": np.zeros((7, 2), bool)}, "'terminals' must be one flag per transition"),
        ({"timeouts": np.zeros(8, bool)}, "'timeouts' has 8 entries but observations has 7"),
        ({"next_observations": np.zeros((6, 2))}, "'next_observations' has 6 entries"),
        ({"actions": np.float32(1.0)}, "'actions' is a single value"),
        ({"observations": np.zeros((0, 2), np.float32)}, "'actions' has 7 entries but obs"),
    ],
)
def test_bad_files_name_file_and_problem(tmp_path: Path, overrides: dict, message: str) -> None:
    path = _write(tmp_path / "bad.hdf5", **overrides)
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    assert message in str(info.value) and str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_non_hdf5_and_truncated_files(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="not found; record one with `rlformer collect"):
        load_dataset(tmp_path / "missing.hdf5")
    text = tmp_path / "notes.hdf5"
    text.write_text("hello")
    with pytest.raises(DatasetError, match="not a readable HDF5 file"):
        load_dataset(text)
    good = _write(tmp_path / "good.hdf5")
    cut = tmp_path / "cut.hdf5"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(DatasetError, match=str(cut)):
        load_dataset(cut)


def test_mismatched_infos_and_empty_files(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.hdf5")
    with h5py.File(path, "a") as handle:
        handle["infos/extra"] = np.zeros(3)
    with pytest.raises(DatasetError, match="'infos/extra' has 3 entries but observations has 7"):
        load_dataset(path)
    empty = {k: np.zeros((0,)) for k in ("observations", "actions", "rewards", "terminals")}
    with pytest.raises(DatasetError, match="holds no transitions"):
        load_dataset(_write(tmp_path / "e.hdf5", n=0, **empty))


def test_terminal_and_timeout_on_the_same_step_counts_as_terminated(tmp_path: Path) -> None:
    both = np.array([0, 0, 1, 0, 0, 0, 0], dtype=bool)
    data = load_dataset(_write(tmp_path / "d.hdf5", terminals=both, timeouts=both))
    assert [(len(e), e.terminated, e.truncated) for e in data.episodes] == [
        (3, True, False),
        (4, False, True),
    ]


def test_sources_and_prefixes(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.hdf5")
    assert load_dataset(f"d4rl:{path}").source == load_dataset(path).source == f"d4rl:{path}"
    with pytest.raises(DatasetError, match="unknown dataset source 'hf'"):
        load_dataset("hf:some/dataset")
    with pytest.raises(DatasetError, match="d4rl-missing.hdf5: dataset file not found"):
        load_dataset(f"d4rl:{tmp_path / 'd4rl-missing.hdf5'}")


def test_written_layout_by_hand(tmp_path: Path) -> None:
    from rlformer.data.episodes import Episode

    def episode(n: int, terminated: bool, start: float) -> Episode:
        obs = np.arange(start, start + n, dtype=np.float32)[:, None]
        return Episode(
            obs,
            np.zeros((n, 1)),
            np.ones(n, np.float32),
            terminated,
            not terminated,
            next_observations=obs + 1,
            infos={"k": np.full(n, start)},
        )

    episodes = [episode(2, True, 0), episode(3, False, 10), episode(1, True, 20)]
    write_d4rl(tmp_path / "w.hdf5", episodes, {"env_id": "X-v0", "skipped": None, "n": 3})
    with h5py.File(tmp_path / "w.hdf5", "r") as handle:
        np.testing.assert_array_equal(handle["terminals"][()], [0, 1, 0, 0, 0, 1])
        np.testing.assert_array_equal(handle["timeouts"][()], [0, 0, 0, 0, 1, 0])
        np.testing.assert_array_equal(handle["observations"][:, 0], [0, 1, 10, 11, 12, 20])
        np.testing.assert_array_equal(handle["infos/k"][()], [0, 0, 10, 10, 10, 20])
        assert "skipped" not in handle.attrs and handle.attrs["n"] == 3
    assert not list(tmp_path.glob(".*.tmp"))  # the temporary file was renamed away
    with pytest.raises(DatasetError, match="no episodes to write"):
        write_d4rl(tmp_path / "none.hdf5", [], {})


def test_write_then_read_round_trip(tmp_path: Path) -> None:
    original = load_dataset(_write(tmp_path / "d.hdf5"))
    write_d4rl(tmp_path / "copy.hdf5", original.episodes, {"env_id": "X-v0", "returns": [1, 2]})
    again = load_dataset(tmp_path / "copy.hdf5")
    assert [len(e) for e in again.episodes] == [3, 2, 2]
    assert [e.terminated for e in again.episodes] == [True, False, False]
    assert again.metadata["returns"] == [1, 2]
    for a, b in zip(original.episodes, again.episodes, strict=True):
        np.testing.assert_array_equal(a.observations, b.observations)


def test_d4rl_normalized_scores() -> None:
    assert normalized_score(-20.272305, "Hopper-v5") == pytest.approx(0.0)
    assert normalized_score(3234.3, "hopper-medium-v2") == pytest.approx(100.0)
    assert normalized_score(6000.0, "halfcheetah-expert-v2") == pytest.approx(
        100 * (6000 + 280.178953) / (12135.0 + 280.178953)
    )
    assert normalized_score(1.0, "CartPole-v1") is None


@pytest.mark.parametrize(
    ("name", "task"),
    [
        ("HalfCheetah-v5", "halfcheetah"),
        ("Walker2d-v4", "walker2d"),
        ("Ant-v5", "ant"),
        ("mujoco/hopper/expert-v0", "hopper"),
        ("d4rl:/data/walker2d-medium-replay-v2.hdf5", "walker2d"),
        ("/data/hopper_medium_v2.h5", "hopper"),
        ("d4rl:/data/ant/cartpole.hdf5", None),  # the folder name does not count
        ("antmaze-umaze-v2", None),  # not Ant locomotion
        ("bullet-hopper-medium-v0", None),  # PyBullet Hopper has other references
        ("hopper-vs-walker2d", None),  # ambiguous
        (None, None),
    ],
)
def test_reference_matching_by_name(name: str | None, task: str | None) -> None:
    from rlformer.data.references import REFERENCE_RETURNS, reference_for

    assert reference_for(name) == (REFERENCE_RETURNS[task] if task else None)
