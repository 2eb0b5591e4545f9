"""Dict / Tuple observations and images in the D4RL layout: groups of leaves, compressed image
arrays, a reader that gives back exactly what was written, and one-line leaf mismatches."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import h5py
import numpy as np
import pytest

from rlformer.algos.dt.dataset_fit import check_dataset_fits
from rlformer.data import Dataset, DatasetError, Episode, load_dataset
from rlformer.data.d4rl_format import write_d4rl
from rlformer.data.inspect import format_summary, summarize_dataset
from rlformer.data.recorder import collect_dataset


def _tree(n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "image": rng.integers(0, 4, (n, 12, 12, 3)).astype(np.uint8),  # a few codes: compressible
        "grid": rng.random((n, 10, 10, 4)) < 0.1,
        "direction": rng.integers(1, 5, n),
        "inner/0": rng.integers(0, 2, (n, 2)),
        "inner/1": rng.uniform(-1, 1, (n, 2)).astype(np.float32),
    }


def _episodes() -> list[Episode]:
    episodes = []
    for seed, n in enumerate((5, 3, 7)):
        episodes.append(
            Episode(
                _tree(n, seed),
                np.random.default_rng(seed).integers(0, 3, (n, 2)),
                np.arange(n, dtype=np.float32),
                terminated=seed != 2,
                truncated=seed == 2,
                next_observations=_tree(n, seed + 10),
            )
        )
    return episodes


def test_dict_observations_are_groups_images_compressed_and_read_back_exactly(
    tmp_path: Path,
) -> None:
    path = tmp_path / "trees.hdf5"
    episodes = _episodes()
    write_d4rl(path, episodes, {"env_id": "Made-up-v0"})
    with h5py.File(path) as handle:
        assert isinstance(handle["observations"], h5py.Group)
        assert isinstance(handle["observations/inner"], h5py.Group)  # nested Tuple: a subgroup
        for key in ("observations/image", "observations/grid", "next_observations/image"):
            array = handle[key]
            assert array.compression == "gzip" and array.chunks is not None
            assert array.chunks[1:] == array.shape[1:]  # chunks of whole steps
            assert array.id.get_storage_size() < array.nbytes / 2
        for key in ("observations/direction", "observations/inner/1", "actions"):
            assert handle[key].compression is None  # vectors stay plain D4RL arrays
        assert handle["observations/grid"].dtype == np.bool_
    data = load_dataset(path)
    assert [len(e) for e in data.episodes] == [5, 3, 7]
    for written, read in zip(episodes, data.episodes, strict=True):
        assert set(read.observations) == set(written.observations)
        for key, value in written.observations.items():
            assert read.observations[key].dtype == value.dtype, key
            np.testing.assert_array_equal(read.observations[key], value)
            np.testing.assert_array_equal(
                read.next_observations[key], written.next_observations[key]
            )
    text = format_summary(summarize_dataset(data))
    assert "observations  direction  shape () dtype int64 range" in text
    assert "              grid       shape (10, 10, 4) dtype bool range [0, 1]" in text
    assert "              inner/0    shape (2,) dtype int64" in text


def test_a_flat_image_array_is_compressed_and_a_vector_file_is_unchanged(tmp_path: Path) -> None:
    images = Episode(
        np.zeros((40, 10, 10, 4), bool),
        np.zeros(40, np.int64),
        np.zeros(40, np.float32),
        True,
        False,
    )
    write_d4rl(tmp_path / "images.hdf5", [images], {})
    vectors = Episode(
        np.ones((6, 3), np.float32), np.zeros(6, np.int64), np.ones(6, np.float32), True, False
    )
    write_d4rl(tmp_path / "vectors.hdf5", [vectors], {})
    with h5py.File(tmp_path / "images.hdf5") as handle:
        assert handle["observations"].compression == "gzip"
    with h5py.File(tmp_path / "vectors.hdf5") as handle:
        assert handle["observations"].compression is None and handle["observations"].chunks is None
    assert load_dataset(tmp_path / "images.hdf5").episodes[0].observations.dtype == np.bool_


def test_collect_records_minigrid_dict_observations_leaf_by_leaf(tmp_path: Path) -> None:
    from rlformer.config import EnvConfig

    env = EnvConfig(
        id="MiniGrid-Empty-5x5-v0",
        imports=["minigrid"],
        wrappers=[
            {
                "class": "gymnasium.wrappers:FilterObservation",
                "kwargs": {"filter_keys": ["image", "direction"]},
            }
        ],
    )
    out = tmp_path / "minigrid.hdf5"
    data = collect_dataset(
        "random", env.id, 60, out, seed=0, num_envs=2, progress=False, env_cfg=env
    )
    first = load_dataset(out).episodes[0]
    assert first.observations["image"].shape[1:] == (7, 7, 3)
    assert first.observations["image"].dtype == np.uint8
    assert first.observations["direction"].shape == (len(first),)
    np.testing.assert_array_equal(
        first.observations["image"], data.episodes[0].observations["image"]
    )
    with h5py.File(out) as handle:
        assert handle["observations/image"].compression == "gzip"


def _spaces_data(image_shape: tuple[int, ...], actions: np.ndarray) -> Dataset:
    n = len(actions)
    observations = {
        "image": np.zeros((n, *image_shape), np.uint8),
        "direction": np.arange(n) % 4,
    }
    episode = Episode(observations, actions, np.ones(n, np.float32), True, False)
    return Dataset([episode], "d4rl:grid.hdf5", {"env_id": "Grid-v0"})


MINIGRID_LIKE = gym.spaces.Dict(
    {
        "direction": gym.spaces.Discrete(4),
        "image": gym.spaces.Box(0, 255, (7, 7, 3), np.uint8),
    }
)


@pytest.mark.parametrize(
    ("data", "observation", "action", "expected"),
    [
        (  # another view size
            _spaces_data((5, 5, 3), np.zeros(4, np.int64)),
            MINIGRID_LIKE,
            gym.spaces.Discrete(3),
            "has observation 'image' of shape (5, 5, 3), but Grid-v0 has shape (7, 7, 3) there",
        ),
        (  # a key the env does not have
            _spaces_data((7, 7, 3), np.zeros(4, np.int64)),
            gym.spaces.Dict({"image": MINIGRID_LIKE["image"]}),
            gym.spaces.Discrete(3),
            "has observation 'direction', but Grid-v0 has no observation 'direction'",
        ),
        (  # a key the data does not have
            _spaces_data((7, 7, 3), np.zeros(4, np.int64)),
            gym.spaces.Dict({**MINIGRID_LIKE.spaces, "carrying": gym.spaces.Discrete(6)}),
            gym.spaces.Discrete(3),
            "has no observation 'carrying', but Grid-v0 has observation 'carrying' (Discrete(6))",
        ),
        (  # a discrete leaf's values outside the env's range
            _spaces_data((7, 7, 3), np.zeros(4, np.int64)),
            gym.spaces.Dict({**MINIGRID_LIKE.spaces, "direction": gym.spaces.Discrete(2)}),
            gym.spaces.Discrete(3),
            "has observation 'direction' values 0..3, but Grid-v0 has Discrete(2) there",
        ),
        (  # a flat image against a Dict
            _spaces_data((7, 7, 3), np.zeros(4, np.int64)),
            MINIGRID_LIKE["image"],
            gym.spaces.Discrete(3),
            "has observation keys 'image', 'direction', but Grid-v0 has one observation array",
        ),
        (  # MultiDiscrete actions out of one component's range
            _spaces_data((7, 7, 3), np.array([[0, 1], [2, 0], [0, 0], [1, 1]])),
            MINIGRID_LIKE,
            gym.spaces.MultiDiscrete([3, 2], start=[0, 1]),
            "action component 1 values 0..1, but Grid-v0 has 2 choices from 1 in action "
            "component 1",
        ),
        (  # MultiBinary actions that are not bits
            _spaces_data((7, 7, 3), np.array([[0, 1, 2], [0, 0, 1], [1, 1, 1], [0, 0, 0]])),
            MINIGRID_LIKE,
            gym.spaces.MultiBinary(3),
            "action values 0..2, but Grid-v0 has 3 binary actions (0 or 1)",
        ),
    ],
)
def test_a_leaf_that_differs_is_named_in_one_line(
    data: Dataset, observation: gym.Space, action: gym.Space, expected: str
) -> None:
    with pytest.raises(DatasetError) as refused:
        check_dataset_fits(data, observation, action, "Grid-v0")
    message = str(refused.value)
    assert expected in message and "\n" not in message
    assert "rlformer collect --env Grid-v0" in message


def test_fitting_composite_data_passes() -> None:
    data = _spaces_data((7, 7, 3), np.array([[0, 1], [2, 1], [0, 1], [1, 1]]))
    check_dataset_fits(data, MINIGRID_LIKE, gym.spaces.MultiDiscrete([3, 2], start=[0, 1]), "G")
    data = _spaces_data((7, 7, 3), np.array([[0, 1, 1], [1, 0, 0], [0, 0, 0], [1, 1, 1]]))
    check_dataset_fits(data, MINIGRID_LIKE, gym.spaces.MultiBinary(3), "G")
