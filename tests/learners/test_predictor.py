"""The stable-baselines3 predict() interface, exercised by SB3's own evaluate_policy."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import rlformer_envs  # noqa: F401
import torch
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from rlformer.config import ModelConfig
from rlformer.core import CoreConfig
from rlformer.networks.actor_critic import ActorCritic
from rlformer.policies import Predictor


def _oracle_like_model() -> ActorCritic:
    """A GTrXL policy whose memory matters: random weights, deterministic actions."""
    env = gym.make("rlformer/TMaze-v0", length=4)
    torch.manual_seed(0)
    core = CoreConfig(n_layers=1, d_model=16, n_heads=2, d_ff=32, memory_length=8)
    return ActorCritic(env.observation_space, env.action_space, ModelConfig(core=core))


def test_predict_matches_act_and_resets_memory() -> None:
    model = _oracle_like_model()
    predictor = Predictor(model)
    obs = np.random.default_rng(0).random((3, 3)).astype(np.float32)
    action, state = predictor.predict(obs, deterministic=True)
    assert action.shape == (3,) and state.actor.valid[:, -1].all()
    action2, state2 = predictor.predict(obs, state, np.zeros(3, bool), deterministic=True)
    assert state2.actor.valid[:, -2:].all()
    # episode_start=True forgets the memory: same as a fresh start.
    fresh, _ = predictor.predict(obs, None, None, deterministic=True)
    restarted, state3 = predictor.predict(obs, state2, np.ones(3, bool), deterministic=True)
    np.testing.assert_array_equal(fresh, restarted)
    assert state3.actor.valid.sum(1).tolist() == [1, 1, 1]
    single, _ = predictor.predict(obs[0], deterministic=True)
    assert np.ndim(single) == 0


def test_sb3_evaluate_policy_runs_our_policy() -> None:
    predictor = Predictor(_oracle_like_model())
    venv = make_vec_env("rlformer/TMaze-v0", n_envs=2, env_kwargs={"length": 4}, seed=0)
    mean, std = evaluate_policy(predictor, venv, n_eval_episodes=10, deterministic=True)
    # T-Maze returns are 0 or 1 per episode.
    assert 0.0 <= mean <= 1.0 and 0.0 <= std <= 0.5
    rewards, lengths = evaluate_policy(
        predictor, venv, n_eval_episodes=6, return_episode_rewards=True
    )
    # Passive corridor of 4, junction, then a turn or the time limit (4 + 1 + slack 10).
    assert len(rewards) == 6 and all(5 <= n <= 15 for n in lengths)
    assert set(rewards) <= {0.0, 1.0}
