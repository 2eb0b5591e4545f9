"""Partially observable versions of classic control tasks: velocities hidden."""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.envs.classic_control import CartPoleEnv, PendulumEnv


class HideObservationEntries(gym.ObservationWrapper):
    """Keep only the observation entries at ``keep`` (e.g. positions without velocities)."""

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


CARTPOLE_POSITIONS = (0, 2)  # cart position, pole angle (velocities 1 and 3 hidden)
PENDULUM_POSITIONS = (0, 1)  # cos(theta), sin(theta) (angular velocity 2 hidden)


def cartpole_no_velocity(**kwargs: object) -> gym.Env:
    """CartPole-v1 observing only cart position and pole angle."""
    return HideObservationEntries(CartPoleEnv(**kwargs), CARTPOLE_POSITIONS)  # type: ignore[arg-type]


def pendulum_no_velocity(**kwargs: object) -> gym.Env:
    """Pendulum-v1 observing only cos and sin of the angle."""
    return HideObservationEntries(PendulumEnv(**kwargs), PENDULUM_POSITIONS)  # type: ignore[arg-type]
