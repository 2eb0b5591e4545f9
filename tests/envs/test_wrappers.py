"""Velocity-hiding wrappers: spaces, observation content, checker."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import rlformer_envs  # noqa: F401
from gymnasium.utils.env_checker import check_env
from rlformer_envs.wrappers import cartpole_no_velocity, pendulum_no_velocity


def test_cartpole_keeps_position_and_angle() -> None:
    full, hidden = gym.make("CartPole-v1"), gym.make("rlformer/CartPoleNoVel-v0")
    obs_full, _ = full.reset(seed=3)
    obs, _ = hidden.reset(seed=3)
    np.testing.assert_array_equal(obs, obs_full[[0, 2]])
    for _ in range(5):
        obs_full, *_ = full.step(1)
        obs, *_ = hidden.step(1)
        np.testing.assert_array_equal(obs, obs_full[[0, 2]])
    assert hidden.observation_space.shape == (2,)
    assert hidden.spec.max_episode_steps == 500


def test_pendulum_keeps_cos_sin() -> None:
    env = gym.make("rlformer/PendulumNoVel-v0")
    obs, _ = env.reset(seed=0)
    assert obs.shape == (2,) and abs(obs[0] ** 2 + obs[1] ** 2 - 1) < 1e-5
    assert env.spec.max_episode_steps == 200


def test_checker() -> None:
    check_env(cartpole_no_velocity(), skip_render_check=True)
    check_env(pendulum_no_velocity(), skip_render_check=True)
