"""Partially observable versions of classic control tasks: velocities hidden.

With only positions visible, a policy must estimate velocities from consecutive observations,
which makes these cheap memory benchmarks where the fully observed task is already solved
(the "-P" variants of Ni et al. 2022, "Recurrent Model-Free RL Can Be a Strong Baseline").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.envs.classic_control import CartPoleEnv, PendulumEnv


class HideObservationEntries(gym.ObservationWrapper):
    """Keep only the observation entries at ``keep`` (e.g. positions without velocities).

    Works on any env with a 1-D ``Box`` observation; the new space keeps the bounds and dtype of
    the kept entries, so space checks and normalisers see the true ranges. Actions, rewards and
    episode ends are the wrapped env's.

    Args:
        env: The env to wrap.
        keep: Indices of the observation entries to keep, in the order they will appear.

    Raises:
        TypeError: If the observation space is not a 1-D ``Box``.
    """

    def __init__(self, env: gym.Env, keep: Sequence[int]) -> None:
        super().__init__(env)
        box = env.observation_space
        if not isinstance(box, spaces.Box) or len(box.shape) != 1:
            raise TypeError(f"HideObservationEntries needs a 1-D Box observation, got {box}")
        self.keep = np.asarray(keep, dtype=np.int64)
        self.observation_space = spaces.Box(
            box.low[self.keep],
            box.high[self.keep],
            dtype=box.dtype,  # type: ignore[arg-type]
        )

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return observation[self.keep]


class KeepActions(gym.ActionWrapper):
    """Offer only the ``Discrete`` actions at ``keep``: agent action ``i`` plays ``keep[i]``.

    For tasks whose action set carries actions that never do anything, such as MiniGrid's Memory
    tasks, where only turning and moving forward have an effect (pickup, drop, toggle and done
    change nothing there). Dropping them leaves the task, its rewards and its optimum as they
    are, but random exploration no longer spends four sevenths of its steps standing still.

    Args:
        env: The env to wrap; its action space must be ``Discrete``.
        keep: The wrapped env's actions to offer, in the order the agent will index them.

    Raises:
        TypeError: If the action space is not ``Discrete``.
        ValueError: If ``keep`` is empty, repeats an action or names one the env lacks.
    """

    def __init__(self, env: gym.Env, keep: Sequence[int]) -> None:
        super().__init__(env)
        space = env.action_space
        if not isinstance(space, spaces.Discrete):
            raise TypeError(f"KeepActions needs a Discrete action space, got {space}")
        valid = range(int(space.start), int(space.start + space.n))
        if not keep or len(set(keep)) != len(keep) or any(a not in valid for a in keep):
            raise ValueError(
                f"KeepActions: keep={list(keep)} must list distinct actions of {space} "
                f"(valid: {valid.start}..{valid.stop - 1})"
            )
        self.keep = [int(a) for a in keep]
        self.action_space = spaces.Discrete(len(self.keep))

    def action(self, action: int) -> int:
        return self.keep[int(action)]


class SuccessFromReward(gym.Wrapper):
    """Report ``info["is_success"]`` when an episode ends: it terminated with a positive reward.

    MiniGrid tasks reward only reaching the goal (``1 - 0.9 * steps / max_steps``) and give 0 for
    failing (the wrong object, lava, time-out), so a return's size mixes success with speed; a
    success rate is what MiniGrid results are reported in. Evaluation reads ``is_success``
    (``success_rate``), as it does for envs that report it themselves. A truncated episode is a
    failure. Observations, actions and rewards pass through unchanged.
    """

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            info = {**info, "is_success": bool(terminated and float(reward) > 0)}
        return obs, reward, terminated, truncated, info


CARTPOLE_POSITIONS = (0, 2)  # cart position, pole angle (velocities 1 and 3 hidden)
PENDULUM_POSITIONS = (0, 1)  # cos(theta), sin(theta) (angular velocity 2 hidden)
# x, y, angle, leg contacts (linear velocities 2-3 and angular velocity 5 hidden; the entries
# rl-baselines3-zoo's LunarLanderNoVel masks)
LUNAR_LANDER_POSITIONS = (0, 1, 4, 6, 7)


def cartpole_no_velocity(**kwargs: object) -> gym.Env:
    """CartPole-v1 observing only cart position and pole angle (``rlformer/CartPoleNoVel-v0``).

    * Observation ``Box(2,)`` float32: ``[x, theta]`` (cart and pole velocities hidden).
    * Actions ``Discrete(2)``: push left / right. Reward ``+1`` per step.
    * Episode end: pole beyond 12 degrees or cart off track (terminated); 500 steps (truncated,
      set by the registration).
    * Optimum 500. Uniform random ~25; pushing towards the pole's lean (memoryless) ~41
      (measured over 100 seeds). Balancing to 500 needs velocities inferred from history.
    """
    return HideObservationEntries(CartPoleEnv(**kwargs), CARTPOLE_POSITIONS)  # type: ignore[arg-type]


def pendulum_no_velocity(**kwargs: object) -> gym.Env:
    """Pendulum-v1 observing only cos and sin of the angle (``rlformer/PendulumNoVel-v0``).

    * Observation ``Box(2,)`` float32: ``[cos(theta), sin(theta)]`` (angular velocity hidden).
    * Actions ``Box(1,)`` torque in ``[-2, 2]``.
      Reward ``-(theta**2 + 0.1 * theta_dot**2 + 0.001 * torque**2)`` per step.
    * Episode end: 200 steps (truncated, set by the registration); never terminates.
    * Optimum: about -150 (well-trained SAC/TD3 on the fully observed task). Uniform random
      torque ~ -1200 (measured over 50 seeds). Swinging up needs the velocity, i.e. memory.
    """
    return HideObservationEntries(PendulumEnv(**kwargs), PENDULUM_POSITIONS)  # type: ignore[arg-type]


def lunar_lander_no_velocity(**kwargs: object) -> gym.Env:
    """LunarLander-v3 without its velocities (``rlformer/LunarLanderNoVel-v0``).

    * Observation ``Box(5,)`` float32: ``[x, y, angle, left leg contact, right leg contact]``
      (horizontal, vertical and angular velocity hidden).
    * Actions: ``Discrete(4)`` (noop, left, main, right engine), or ``Box(2,)`` with
      ``continuous=True``; every other LunarLander keyword (gravity, wind, ...) passes through.
    * Rewards and episode ends are LunarLander's: +100/-100 for landing/crashing, shaping for
      distance, speed and tilt, fuel costs; 1000 steps (truncated, set by the registration).
    * Solved at 200 (the fully observed task's threshold). Landing softly needs the descent
      speed, which only a memory of past positions can supply.

    Needs Box2D (``pip install "gymnasium[box2d]"``, part of rlformer's dependencies); the
    import happens here so that the other tasks work without it.
    """
    from gymnasium.envs.box2d.lunar_lander import LunarLander

    return HideObservationEntries(LunarLander(**kwargs), LUNAR_LANDER_POSITIONS)  # type: ignore[arg-type]
