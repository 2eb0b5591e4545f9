"""Velocity-hiding and action-subset wrappers: spaces, content, checker."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import rlformer_envs  # noqa: F401
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env
from rlformer_envs.wrappers import (
    HideObservationEntries,
    KeepActions,
    SuccessFromReward,
    cartpole_no_velocity,
    pendulum_no_velocity,
)


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


def test_spaces_keep_the_bounds_of_the_kept_entries() -> None:
    full = gym.make("CartPole-v1").observation_space
    space = cartpole_no_velocity().observation_space
    assert isinstance(full, spaces.Box) and isinstance(space, spaces.Box)
    np.testing.assert_array_equal(space.low, full.low[[0, 2]])
    np.testing.assert_array_equal(space.high, full.high[[0, 2]])
    assert space.dtype == np.float32
    pendulum = pendulum_no_velocity().observation_space
    assert isinstance(pendulum, spaces.Box)
    np.testing.assert_array_equal(pendulum.low, [-1.0, -1.0])
    np.testing.assert_array_equal(pendulum.high, [1.0, 1.0])


def test_wrapper_on_another_env() -> None:
    """Acrobot without its two angular velocities (entries 4 and 5)."""
    env = HideObservationEntries(gym.make("Acrobot-v1"), keep=[0, 1, 2, 3])
    full = gym.make("Acrobot-v1")
    obs, _ = env.reset(seed=5)
    obs_full, _ = full.reset(seed=5)
    np.testing.assert_array_equal(obs, obs_full[:4])
    assert env.observation_space.shape == (4,) and env.observation_space.contains(obs)
    with pytest.raises(TypeError):
        HideObservationEntries(gym.make("FrozenLake-v1"), keep=[0])


@pytest.mark.filterwarnings("ignore:.*is different from the unwrapped version")
@pytest.mark.filterwarnings("ignore:.*symmetric and normalized space")
def test_checker() -> None:
    check_env(cartpole_no_velocity(), skip_render_check=True)
    check_env(pendulum_no_velocity(), skip_render_check=True)


def test_lunar_lander_hides_its_three_velocities() -> None:
    """x, y, angle and leg contacts pass through unchanged; vx, vy and the spin are gone."""
    full, hidden = gym.make("LunarLander-v3"), gym.make("rlformer/LunarLanderNoVel-v0")
    obs_full, _ = full.reset(seed=4)
    obs, _ = hidden.reset(seed=4)
    for step in range(40):
        np.testing.assert_array_equal(obs, obs_full[[0, 1, 4, 6, 7]])
        action = step % 4
        obs_full, reward_full, *_ = full.step(action)
        obs, reward, *_ = hidden.step(action)
        assert reward == reward_full
    assert hidden.observation_space.shape == (5,)
    assert hidden.spec.max_episode_steps == 1000 and hidden.spec.reward_threshold == 200.0
    continuous = gym.make("rlformer/LunarLanderNoVel-v0", continuous=True)
    assert isinstance(continuous.action_space, spaces.Box)
    assert continuous.action_space.shape == (2,)


def test_keep_actions_plays_the_mapped_action_in_minigrid_memory() -> None:
    pytest.importorskip("minigrid")
    kept = KeepActions(gym.make("MiniGrid-MemoryS11-v0"), keep=[2, 0])
    reference = gym.make("MiniGrid-MemoryS11-v0")
    assert kept.action_space == spaces.Discrete(2)
    obs, _ = kept.reset(seed=5)
    ref_obs, _ = reference.reset(seed=5)
    for agent_action, env_action in [(0, 2), (1, 0), (1, 0), (0, 2), (0, 2)]:
        obs, reward, terminated, truncated, _ = kept.step(agent_action)
        ref_obs, ref_reward, ref_terminated, ref_truncated, _ = reference.step(env_action)
        np.testing.assert_array_equal(obs["image"], ref_obs["image"])
        assert (reward, terminated, truncated) == (ref_reward, ref_terminated, ref_truncated)
    assert tuple(kept.unwrapped.agent_pos) == tuple(reference.unwrapped.agent_pos)
    assert kept.unwrapped.agent_dir == reference.unwrapped.agent_dir


@pytest.mark.parametrize(
    ("keep", "message"), [([], "distinct"), ([1, 1], "distinct"), ([0, 2], "valid: 0..1")]
)
def test_keep_actions_rejects_bad_lists(keep: list[int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        KeepActions(gym.make("CartPole-v1"), keep=keep)


def test_keep_actions_needs_discrete_actions() -> None:
    with pytest.raises(TypeError, match="Discrete"):
        KeepActions(gym.make("Pendulum-v1"), keep=[0])


def _walk_to_the_end_and_turn(env: gym.Env, towards_success: bool) -> list[dict]:
    """Drive MiniGrid-MemoryS11 to the hallway's end, turn to one object's side and step in;
    the infos of every step."""
    memory = env.unwrapped
    middle = memory.height // 2
    infos = []
    while memory.agent_pos[0] < memory.width - 2:  # the vertical hallway's column
        infos.append(env.step(2)[4])  # forward (the agent starts facing east)
    target = memory.success_pos if towards_success else memory.failure_pos
    infos.append(env.step(0 if target[1] < middle else 1)[4])  # turn left (north) or right
    infos.append(env.step(2)[4])
    return infos


@pytest.mark.parametrize("towards_success", [True, False])
def test_success_from_reward_reports_minigrid_outcomes_at_the_end_only(
    towards_success: bool,
) -> None:
    pytest.importorskip("minigrid")
    env = SuccessFromReward(gym.make("MiniGrid-MemoryS11-v0"))
    env.reset(seed=3)
    infos = _walk_to_the_end_and_turn(env, towards_success)
    assert all("is_success" not in info for info in infos[:-1])
    assert infos[-1]["is_success"] is towards_success


def test_success_from_reward_counts_a_time_out_as_a_failure() -> None:
    pytest.importorskip("minigrid")
    env = SuccessFromReward(gym.make("MiniGrid-MemoryS11-v0", max_steps=3))
    env.reset(seed=3)
    outcomes = [env.step(0) for _ in range(3)]  # turning in place until time runs out
    assert [o[3] for o in outcomes] == [False, False, True]
    assert outcomes[-1][4]["is_success"] is False
