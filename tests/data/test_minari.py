"""Reading a real local Minari dataset written by minari's own DataCollector (no download)."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rlformer.data import DatasetError, load_dataset


def test_reads_local_minari_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    minari = pytest.importorskip("minari")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    env = minari.DataCollector(gym.make("CartPole-v1"))
    env.reset(seed=0)
    lengths, steps = [], 0
    for _ in range(3):
        done, steps = False, 0
        while not done:
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            steps += 1
            done = term or trunc
        lengths.append(steps)
        env.reset()
    env.create_dataset(
        "cartpole/random-v0",
        algorithm_name="random",
        author="rlformer tests",
        author_email="tests@example.org",
        code_permalink="local",
    )
    data = load_dataset("minari:cartpole/random-v0")
    assert [len(e) for e in data.episodes] == lengths
    assert data.metadata["env_id"] == "CartPole-v1"
    first = data.episodes[0]
    np.testing.assert_array_equal(first.observations[1:], first.next_observations[:-1])
    assert first.terminated and (first.rewards == 1).all()


def test_missing_minari_dataset_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    with pytest.raises(DatasetError, match=f"looked in {tmp_path}"):
        load_dataset("minari:hopper/expert-v0")
