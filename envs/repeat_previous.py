"""Repeat-previous: answer, at every step, the symbol that was shown k steps earlier."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class RepeatPreviousEnv(gym.Env[np.ndarray, np.int64]):
    """Repeat the symbol seen ``k`` steps ago.

    * Observation ``Box(n_symbols,)`` float32: one-hot of a symbol drawn uniformly each step.
    * Actions ``Discrete(n_symbols)``.
    * Reward: at step t (0-based, the observation shown before the action is symbol s_t) the
      action is scored against ``s_{t-k}``: ``+1`` if equal, else 0. The first ``k`` actions have
      nothing to repeat yet and are not scored (reward 0).
    * Episode: exactly ``episode_length`` actions, then terminated. ``info["accuracy"]`` is the
      fraction of scored answers that were right and ``info["is_success"]`` whether all were.
    * Optimum: return ``episode_length - k``. Chance / memoryless: ``1 / n_symbols``
      per scored step.
    """

    metadata = {"render_modes": []}

    def __init__(self, k: int = 3, n_symbols: int = 4, episode_length: int = 32) -> None:
        if k < 1 or n_symbols < 2 or episode_length <= k:
            raise ValueError(
                f"need k >= 1, n_symbols >= 2 and episode_length > k; got k={k}, "
                f"n_symbols={n_symbols}, episode_length={episode_length}"
            )
        self.k, self.n_symbols, self.episode_length = int(k), int(n_symbols), int(episode_length)
        self.observation_space = spaces.Box(0.0, 1.0, shape=(self.n_symbols,), dtype=np.float32)
        self.action_space = spaces.Discrete(self.n_symbols)
        self._symbols = np.zeros(self.episode_length, dtype=np.int64)
        self._t = 0
        self._correct = 0

    def _observation(self) -> np.ndarray:
        obs = np.zeros(self.n_symbols, dtype=np.float32)
        if self._t < self.episode_length:
            obs[self._symbols[self._t]] = 1.0
        return obs

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._symbols = self.np_random.integers(0, self.n_symbols, size=self.episode_length)
        self._t = 0
        self._correct = 0
        return self._observation(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        action = int(action)
        if not self.action_space.contains(action):
            raise ValueError(f"invalid action {action}; use 0..{self.n_symbols - 1}")
        reward = 0.0
        if self._t >= self.k and action == self._symbols[self._t - self.k]:
            reward = 1.0
            self._correct += 1
        self._t += 1
        terminated = self._t >= self.episode_length
        info: dict[str, Any] = {}
        if terminated:
            scored = self.episode_length - self.k
            info["accuracy"] = self._correct / scored
            info["is_success"] = self._correct == scored
        return self._observation(), reward, terminated, False, info
