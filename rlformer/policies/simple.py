"""Policies that need no training: uniform random actions, and noise around another policy
(to turn one trained policy into medium- or replay-like data)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlformer.policies.base import Policy, PolicyInfo
from rlformer.policies.errors import PolicyError


class RandomPolicy:
    """Uniform actions from the action space (seeded, so recordings repeat); stateless.

    With an action mask, each row's action is drawn among its valid ones.
    """

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, seed: int) -> None:
        self.observation_space, self.action_space = observation_space, action_space
        self.action_space.seed(seed)
        self.info = PolicyInfo("random", "random")

    def initial_state(self, n: int, target_return: float | None = None) -> int:
        return n

    def act(
        self,
        obs: Any,
        state: int,
        episode_start: np.ndarray,
        reward: np.ndarray | None = None,
        action_mask: np.ndarray | None = None,
        deterministic: bool = True,
        generator: torch.Generator | None = None,
    ) -> tuple[np.ndarray, int]:
        """``len(episode_start)`` independent samples of the action space."""
        rows = len(episode_start)
        if action_mask is None:
            return np.stack([self.action_space.sample() for _ in range(rows)]), state
        masks = np.asarray(action_mask, dtype=np.int8)
        return np.stack(
            [self.action_space.sample(mask=_space_mask(self.action_space, m)) for m in masks]
        ), state


def _space_mask(space: gym.Space, mask: np.ndarray) -> Any:
    """A concatenated action mask in the form gymnasium's ``sample(mask=...)`` takes."""
    if isinstance(space, gym.spaces.MultiDiscrete):
        splits = np.cumsum(np.asarray(space.nvec).reshape(-1))[:-1]
        return tuple(np.split(mask, splits))
    return mask


class NoisyPolicy:
    """Perturbs another policy's actions.

    Box actions get Gaussian noise with standard deviation ``noise`` times half the action range
    (then clipped to the space); Discrete, MultiDiscrete and MultiBinary actions are replaced by a
    uniform one (all components at once) with probability ``noise`` (epsilon-greedy).
    Independently, with probability ``random_fraction`` an action is replaced by a uniformly
    random one: a mixture of the policy and a random policy. The state is the inner policy's.
    """

    def __init__(self, inner: Policy, noise: float, random_fraction: float, seed: int) -> None:
        space = inner.action_space
        kinds = (
            gym.spaces.Box,
            gym.spaces.Discrete,
            gym.spaces.MultiDiscrete,
            gym.spaces.MultiBinary,
        )
        if not isinstance(space, kinds):
            raise PolicyError(
                "action noise needs a Box, Discrete, MultiDiscrete or MultiBinary action space, "
                f"not {space}"
            )
        self.inner, self.space = inner, space
        self.observation_space, self.action_space = inner.observation_space, space
        self.info = inner.info
        self.noise, self.random_fraction = noise, random_fraction
        self.rng = np.random.default_rng(seed)

    def initial_state(self, n: int, target_return: float | None = None) -> Any:
        return self.inner.initial_state(n, target_return)

    def _uniform(self, count: int) -> np.ndarray:
        if isinstance(self.space, gym.spaces.Box):
            shape = (count, *self.space.shape)
            return self.rng.uniform(self.space.low, self.space.high, size=shape)
        if isinstance(self.space, gym.spaces.MultiDiscrete):
            nvec = np.asarray(self.space.nvec)
            return self.space.start + self.rng.integers(0, nvec, size=(count, *nvec.shape))
        if isinstance(self.space, gym.spaces.MultiBinary):
            return self.rng.integers(0, 2, size=(count, *self.space.shape))
        assert isinstance(self.space, gym.spaces.Discrete)
        actions: np.ndarray = self.space.start + self.rng.integers(0, self.space.n, size=count)
        return actions

    def act(
        self,
        obs: Any,
        state: Any,
        episode_start: np.ndarray,
        reward: np.ndarray | None = None,
        action_mask: np.ndarray | None = None,
        deterministic: bool = True,
        generator: torch.Generator | None = None,
    ) -> tuple[np.ndarray, Any]:
        """The inner policy's actions, perturbed and partly replaced."""
        if action_mask is not None:
            raise ValueError("action noise does not take action masks")
        actions, state = self.inner.act(
            obs, state, episode_start, reward, None, deterministic, generator
        )
        actions = np.asarray(actions)
        count = len(actions)
        replace = self.rng.random(count) < self.random_fraction  # [E]
        if isinstance(self.space, gym.spaces.Box):
            scale = (self.space.high - self.space.low) / 2.0
            actions = actions + self.rng.normal(size=actions.shape) * self.noise * scale
            actions = np.clip(actions, self.space.low, self.space.high)
        else:
            replace |= self.rng.random(count) < self.noise
        actions = np.where(
            replace.reshape(count, *([1] * (actions.ndim - 1))), self._uniform(count), actions
        )
        return actions.astype(self.space.dtype), state
