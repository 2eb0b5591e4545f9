"""Reading a real local Minari dataset written by minari's own DataCollector (no download)."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rlformer.data import DatasetError, load_dataset


def _record(dataset_id: str, episodes: int, max_steps: int | None = None) -> list[int]:
    """Write a CartPole Minari dataset of random episodes; returns their lengths."""
    minari = pytest.importorskip("minari")
    env = minari.DataCollector(gym.make("CartPole-v1", max_episode_steps=max_steps))
    env.reset(seed=0)
    env.action_space.seed(0)
    lengths = []
    for _ in range(episodes):
        done, steps = False, 0
        while not done:
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            steps += 1
            done = term or trunc
        lengths.append(steps)
        env.reset()
    env.create_dataset(
        dataset_id,
        eval_env="CartPole-v1",
        algorithm_name="random",
        author="rlformer tests",
        author_email="tests@example.org",
        code_permalink="local",
        description="random CartPole episodes for rlformer's reader tests",
    )
    return lengths


def test_reads_local_minari_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    lengths = _record("cartpole/random-v0", 3)
    data = load_dataset("minari:cartpole/random-v0")
    assert [len(e) for e in data.episodes] == lengths
    assert data.metadata["env_id"] == "CartPole-v1"
    first = data.episodes[0]
    np.testing.assert_array_equal(first.observations[1:], first.next_observations[:-1])
    assert first.terminated and not first.truncated and (first.rewards == 1).all()
    assert first.observations.shape == (lengths[0], 4) and first.actions.shape == (lengths[0],)


def test_time_limit_episodes_are_truncated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    lengths = _record("cartpole/short-v0", 4, max_steps=5)
    data = load_dataset("minari:cartpole/short-v0")
    assert lengths == [5, 5, 5, 5]  # random CartPole survives 5 steps
    assert all(e.truncated and not e.terminated for e in data.episodes)


def test_missing_and_broken_minari_datasets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    with pytest.raises(DatasetError, match=f"looked in {tmp_path}/mujoco/hopper/expert-v0"):
        load_dataset("minari:mujoco/hopper/expert-v0")
    assert not (tmp_path / "mujoco").exists()  # looking did not create folders
    broken = tmp_path / "cartpole" / "broken-v0" / "data"
    broken.mkdir(parents=True)
    (broken / "main_data.hdf5").write_text("not hdf5")
    with pytest.raises(DatasetError, match="could not read the dataset in"):
        load_dataset("minari:cartpole/broken-v0")


def test_env_kwargs_of_the_recording_are_named_in_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LunarLander-v3 is discrete unless made with continuous=True: data recorded on the
    continuous one is refused for the plain id, and the options the message gives build the
    env the data fits."""
    import re

    from rlformer.algos.dt.dataset_fit import check_dataset_fits
    from rlformer.config import load_config
    from rlformer.data.inspect import summarize_dataset
    from rlformer.rollout.env_factory import make_env

    minari = pytest.importorskip("minari")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    env = minari.DataCollector(gym.make("LunarLander-v3", continuous=True))
    env.reset(seed=0)
    env.action_space.seed(0)
    for _ in range(30):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()
    env.create_dataset("lunar/continuous-v0", algorithm_name="random", description="tests")
    data = load_dataset("minari:lunar/continuous-v0")
    assert data.env_kwargs == {"continuous": True}
    assert summarize_dataset(data).env_id == "LunarLander-v3 with continuous=True"  # dataset info

    def check(env_id: str, kwargs: dict[str, object]) -> None:
        made = make_env(env_id, kwargs)
        try:
            check_dataset_fits(data, made.observation_space, made.action_space, env_id)
        finally:
            made.close()

    with pytest.raises(DatasetError) as refused:
        check("LunarLander-v3", {})
    message = str(refused.value)
    assert "recorded on LunarLander-v3 with continuous=True, has 8-value observations" in message
    options = re.findall(r"--set (\S+?)[ )]", message)
    assert options == ["env.id=LunarLander-v3", "env.kwargs.continuous=true"]
    cfg = load_config(None, ["algo=dt", *options])
    check(cfg.env.id, cfg.env.kwargs)  # the advice builds an env the data fits


def _record_env(env: gym.Env, dataset_id: str, episodes: int) -> None:
    minari = pytest.importorskip("minari")
    collector = minari.DataCollector(env)
    collector.reset(seed=0)
    collector.action_space.seed(0)
    for _ in range(episodes):
        done = False
        while not done:
            _, _, term, trunc, _ = collector.step(collector.action_space.sample())
            done = term or trunc
        collector.reset()
    collector.create_dataset(
        dataset_id,
        algorithm_name="random",
        author="rlformer tests",
        author_email="tests@example.org",
        code_permalink="local",
        description="random episodes for rlformer's reader tests",
    )


def test_dict_observations_become_leaf_trees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MiniGrid's image and direction (its mission text filtered out, which Minari cannot
    store) come back as one array per leaf, fitting the env they were recorded on."""
    pytest.importorskip("minigrid")
    from rlformer.algos.dt.dataset_fit import check_dataset_fits

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    env = gym.wrappers.FilterObservation(
        gym.make("MiniGrid-Empty-5x5-v0", max_episode_steps=6), ["image", "direction"]
    )
    _record_env(env, "minigrid/empty-v0", 2)
    data = load_dataset("minari:minigrid/empty-v0")
    first = data.episodes[0]
    assert set(first.observations) == {"image", "direction"}
    assert first.observations["image"].shape == (6, 7, 7, 3)
    assert first.observations["image"].dtype == np.uint8
    np.testing.assert_array_equal(
        first.observations["direction"][1:], first.next_observations["direction"][:-1]
    )
    check_dataset_fits(data, env.observation_space, env.action_space, "MiniGrid-Empty-5x5-v0")


def test_text_leaves_are_left_out_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Text leaf (no encoder reads one) is dropped; the metadata says which."""
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    if "SpaceTestByName-v0" not in gym.registry:  # Minari stores the entry point as a string
        gym.register("SpaceTestByName-v0", entry_point="tests.space_envs:SpaceTestEnv")
    _record_env(gym.make("SpaceTestByName-v0", obs="text", action="multibinary"), "text-v0", 2)
    data = load_dataset("minari:text-v0")
    assert set(data.episodes[0].observations) == {"vector"}
    assert data.metadata["dropped_observation_keys"] == ["mission"]
    assert data.episodes[0].actions.shape[1:] == (3,)  # MultiBinary actions as they were
