"""predict(), evaluation and recording on every action space and on Dict observations."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import tests.space_envs  # noqa: F401  (registers SpaceTest-v0)
from rlformer.algos.ppo.evaluation import run_episodes
from rlformer.config import EnvConfig, ModelConfig
from rlformer.core import CoreConfig
from rlformer.data.recorder import collect_dataset
from rlformer.networks.actor_critic import ActorCritic
from rlformer.networks.spaces import leaf_spaces
from rlformer.policies import Predictor

ACTIONS = ["discrete", "box", "multidiscrete", "multibinary"]


def _model(env: gym.Env, prev: bool = True) -> ActorCritic:
    torch.manual_seed(0)
    core = CoreConfig(n_layers=1, d_model=16, n_heads=2, d_ff=32, memory_length=8)
    cfg = ModelConfig(core=core, cnn="impala", cnn_features=8, prev_action_reward=prev)
    return ActorCritic(env.observation_space, env.action_space, cfg)


@pytest.mark.parametrize("action", ACTIONS)
def test_predict_on_dict_observations_gives_env_actions(action: str) -> None:
    envs = gym.vector.SyncVectorEnv(
        [lambda: gym.make("SpaceTest-v0", obs="dict", action=action) for _ in range(3)]
    )
    predictor = Predictor(_model(envs.envs[0]))
    obs, _ = envs.reset(seed=0)
    actions, state = predictor.predict(obs, deterministic=False)
    for _ in range(8):  # through episode ends: the env asserts every action is in its space
        obs, reward, term, trunc, _ = envs.step(actions)
        actions, state = predictor.predict(obs, state, term | trunc, reward=reward)
    assert len(actions) == 3
    single_env = envs.envs[0]
    single, _ = predictor.predict(single_env.reset(seed=1)[0], deterministic=True)
    assert single_env.action_space.contains(single)
    envs.close()


@pytest.mark.parametrize("action", ACTIONS)
def test_evaluation_and_recording_on_every_action_space(tmp_path: Path, action: str) -> None:
    cfg = EnvConfig(id="SpaceTest-v0", kwargs={"obs": "dict", "action": action})
    env = gym.make(cfg.id, **cfg.kwargs)
    results = run_episodes(_model(env), cfg, episodes=4, num_envs=2, deterministic=False)
    assert len(results.returns) == 4 and all(3 <= n <= 6 for n in results.lengths)
    dataset = collect_dataset(
        "random",
        cfg.id,
        30,
        tmp_path / "d.hdf5",
        num_envs=2,
        env_kwargs=cfg.kwargs,
        progress=False,
    )
    episode = dataset.episodes[0]
    # Dict observations are recorded leaf by leaf, each in its own shape and dtype
    leaves = leaf_spaces(env.observation_space)
    assert set(episode.observations) == set(leaves)
    for path, leaf in leaves.items():
        recorded = np.asarray(episode.observations[path])
        assert recorded.shape[1:] == leaf.shape and recorded.dtype == leaf.dtype, path
    assert all(
        env.action_space.contains(np.asarray(a).astype(env.action_space.dtype))
        for a in episode.actions
    )


def test_statistics_are_frozen_in_evaluation() -> None:
    cfg = EnvConfig(id="SpaceTest-v0", kwargs={"obs": "dict", "action": "discrete"})
    env = gym.make(cfg.id, **cfg.kwargs)
    torch.manual_seed(0)
    core = CoreConfig(n_layers=1, d_model=16, n_heads=2, d_ff=32, memory_length=8)
    model_cfg = ModelConfig(
        core=core,
        cnn="impala",
        cnn_features=8,
        normalize_obs=True,
        normalize_reward=True,
        prev_action_reward=True,
    )
    model = ActorCritic(env.observation_space, env.action_space, model_cfg)
    rng = np.random.default_rng(0)
    model.merge_statistics(
        {"obs/vector": (10.0, rng.normal(size=2), rng.random(2) * 10), "reward": (10.0, 0.5, 3.0)}
    )
    before = {k: v.clone() for k, v in model.state_dict().items()}
    run_episodes(model, cfg, episodes=3, num_envs=2, deterministic=False)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
