"""Action sources for recording datasets: random, an rlformer run, or a stable-baselines3 model.

All share ``act(obs [E, ...], episode_start [E]) -> actions [E, ...]`` over a vector env, so the
recorder never branches on where actions come from. Memory policies (rlformer GTrXL, SB3
RecurrentPPO) keep their state per env slot and reset it at episode starts.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
import torch

from rlformer.data.errors import DatasetError


class ActionSource(Protocol):
    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray: ...


class RandomPolicy:
    """Uniform actions from the action space (seeded)."""

    def __init__(self, action_space: gym.Space, num_envs: int, seed: int) -> None:
        self.space = action_space
        self.space.seed(seed)
        self.num_envs = num_envs

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        return np.stack([self.space.sample() for _ in range(self.num_envs)])


class RlformerPolicy:
    """A trained rlformer agent from a run directory or checkpoint (its memory per env slot)."""

    def __init__(self, path: str, num_envs: int, seed: int, deterministic: bool = True) -> None:
        from rlformer.training import load_agent

        self.model, self.cfg, _ = load_agent(path)
        self.state = self.model.initial_state(num_envs)
        self.deterministic = deterministic
        self.generator = torch.Generator().manual_seed(seed)

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        out = self.model.act(
            torch.as_tensor(obs),
            self.state,
            torch.as_tensor(episode_start),
            deterministic=self.deterministic,
            generator=self.generator,
        )
        self.state = out.state
        return self.model.env_action(out.action)


# Policy module (as stored in the zip) -> algorithm class. On-policy algorithms (PPO, A2C) share
# ActorCriticPolicy in stable_baselines3.common.policies; loading either with PPO predicts the same.
SB3_ALGORITHMS = (
    ("recurrent", ("sb3_contrib", "RecurrentPPO")),
    (".sac.", ("stable_baselines3", "SAC")),
    (".td3.", ("stable_baselines3", "TD3")),
    (".dqn.", ("stable_baselines3", "DQN")),
    ("stable_baselines3.common.policies", ("stable_baselines3", "PPO")),
)


def sb3_algorithm_of(path: Path) -> Any:
    """The SB3 class that saved ``path``, read from the policy module named in the zip."""
    try:
        with zipfile.ZipFile(path) as archive:
            data = json.loads(archive.read("data"))
    except (OSError, KeyError, zipfile.BadZipFile, json.JSONDecodeError) as err:
        raise DatasetError(f"{path}: not a stable-baselines3 model zip ({err})") from None
    module = str(data.get("policy_class", {}).get("__module__", ""))
    for key, (package, name) in SB3_ALGORITHMS:
        if key in module:
            return getattr(__import__(package, fromlist=[name]), name)
    raise DatasetError(f"{path}: unknown stable-baselines3 policy module {module!r}")


class SB3Policy:
    """A stable-baselines3 / sb3-contrib model loaded through its own ``load``."""

    def __init__(self, path: str, deterministic: bool = True) -> None:
        file = Path(path)
        if not file.is_file():
            raise DatasetError(f"{file}: stable-baselines3 model file not found")
        self.model = sb3_algorithm_of(file).load(file, device="cpu")
        self.state: Any = None
        self.deterministic = deterministic

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        action, self.state = self.model.predict(
            obs, state=self.state, episode_start=episode_start, deterministic=self.deterministic
        )
        return action


class NoisyPolicy:
    """Perturbs another source: Gaussian noise (Box) or epsilon-random actions (Discrete), and
    with probability ``random_fraction`` a uniformly random action (for replay-like mixtures)."""

    def __init__(
        self,
        inner: ActionSource,
        action_space: gym.Space,
        noise: float,
        random_fraction: float,
        seed: int,
    ) -> None:
        self.inner, self.space = inner, action_space
        self.noise, self.random_fraction = noise, random_fraction
        self.rng = np.random.default_rng(seed)
        self.space.seed(seed + 1)

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        actions = np.asarray(self.inner.act(obs, episode_start)).copy()
        count = len(actions)
        if isinstance(self.space, gym.spaces.Box):
            scale = (self.space.high - self.space.low) / 2.0
            actions = actions + self.rng.normal(size=actions.shape) * self.noise * scale
            actions = np.clip(actions, self.space.low, self.space.high).astype(self.space.dtype)
            replace = self.rng.random(count) < self.random_fraction
        else:
            replace = self.rng.random(count) < max(self.noise, self.random_fraction)
        for i in np.flatnonzero(replace):
            actions[i] = self.space.sample()
        return actions
