"""Tiny PPO configs and test envs for the reliability tests (seconds per run)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from rlformer.config import TrainConfig, load_config

TINY_OVERRIDES = [
    "env.id=rlformer/TMaze-v0",
    "env.kwargs.length=3",
    "rollout.envs_per_worker=4",
    "rollout.fragment_length=16",
    "model.core.n_layers=1",
    "model.core.d_model=16",
    "model.core.n_heads=2",
    "model.core.d_ff=32",
    "model.core.memory_length=8",
    "ppo.num_minibatches=2",
    "ppo.update_epochs=2",
    "eval.episodes=0",
    "run.progress=false",
]


def tiny_config(root: Path, *overrides: str) -> TrainConfig:
    """A 64-steps-per-iteration GTrXL-PPO run under ``root``."""
    return load_config(None, [*TINY_OVERRIDES, f"run.root={root}", *overrides])


class FaultyEnv(gym.Env):
    """A 2-action, 4-dim task that misbehaves on purpose at env step ``fail_at`` of an episode.

    mode "nan_obs" / "nan_reward": returns NaN there; "raise": raises ValueError there.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, mode: str = "raise", fail_at: int = 5, episode_length: int = 8) -> None:
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.mode, self.fail_at, self.episode_length = mode, fail_at, episode_length
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, 4).astype(np.float32), {}

    def step(self, action: Any) -> Any:
        self.t += 1
        obs = self.np_random.uniform(-1, 1, 4).astype(np.float32)
        reward = float(action)
        if self.t == self.fail_at:
            if self.mode == "raise":
                raise ValueError("simulated bug in the user's env")
            if self.mode == "nan_obs":
                obs[2] = np.nan
            if self.mode == "nan_reward":
                reward = float("inf")
        return obs, reward, self.t >= self.episode_length, False, {}


class LockedEnv(gym.Wrapper):
    """Holds a lock, which neither pickle nor cloudpickle can serialise (like a simulator
    handle or an open socket would)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.lock = threading.Lock()


def make_locked_cartpole(**kwargs: Any) -> gym.Env:
    return LockedEnv(gym.make("CartPole-v1", **kwargs))
