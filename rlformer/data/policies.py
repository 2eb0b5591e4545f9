"""Action sources for recording datasets: random, an rlformer run, or a stable-baselines3 model.

All share ``act(obs [E, ...], episode_start [E]) -> actions [E, ...]`` over a vector env of E
slots, so the recorder never branches on where actions come from. Memory policies (rlformer
GTrXL, sb3-contrib RecurrentPPO) keep their state per env slot and reset it at episode starts.
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
    """Anything that picks one action per env slot.

    ``episode_start[e]`` is True on the first step of a new episode in slot ``e``, which is
    where a memory policy must forget what it saw before.
    """

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray: ...


class RandomPolicy:
    """Uniform actions from the action space (seeded, so recordings repeat)."""

    def __init__(self, action_space: gym.Space, num_envs: int, seed: int) -> None:
        self.space = action_space
        self.space.seed(seed)
        self.num_envs = num_envs

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        """``num_envs`` independent samples of the action space."""
        return np.stack([self.space.sample() for _ in range(self.num_envs)])


class RlformerPolicy:
    """A trained rlformer PPO agent from a run directory or checkpoint (memory per env slot)."""

    def __init__(
        self,
        path: str,
        num_envs: int,
        seed: int,
        deterministic: bool = True,
        trust: bool = False,
    ) -> None:
        from rlformer.checkpoints import load_checkpoint
        from rlformer.training import agent_from_payload

        payload = load_checkpoint(path, trust)
        kind = payload.get("kind", "ppo")
        if kind != "ppo":
            raise DatasetError(
                f"{path}: a {kind!r} checkpoint; `rlformer collect` records from PPO runs, "
                "stable-baselines3 models (sb3:FILE.zip) or random"
            )
        self.model, self.cfg = agent_from_payload(payload, path)
        self.model.eval()
        self.state = self.model.initial_state(num_envs)
        self.deterministic = deterministic
        self.generator = torch.Generator().manual_seed(seed)

    def act(self, obs: Any, episode_start: np.ndarray) -> np.ndarray:
        """One step of the agent; its memory is reset in slots where an episode starts."""
        from rlformer.models.encoders import to_torch
        from rlformer.models.spaces import flatten_obs

        out = self.model.act(
            to_torch(flatten_obs(self.model.observation_space, obs)),
            self.state,
            torch.as_tensor(episode_start),
            deterministic=self.deterministic,
            generator=self.generator,
        )
        self.state = out.state
        return self.model.env_action(out.action)

    def observe_reward(self, reward: np.ndarray) -> None:
        """The reward for the last actions (the agent's previous-reward input, if it has one)."""
        self.state = self.state.with_reward(self.model.scale_rewards(reward))


# Policy module named in the zip's ``data`` json -> algorithm that can load it. Algorithms that
# share a policy class predict identically whichever of them loads the file: PPO, A2C and TRPO
# all save stable_baselines3.common.policies.ActorCriticPolicy.
SB3_ALGORITHMS: tuple[tuple[str, str, str], ...] = (
    ("sb3_contrib.common.recurrent.", "sb3_contrib", "RecurrentPPO"),
    ("sb3_contrib.common.maskable.", "sb3_contrib", "MaskablePPO"),
    ("sb3_contrib.tqc.", "sb3_contrib", "TQC"),
    ("sb3_contrib.qrdqn.", "sb3_contrib", "QRDQN"),
    ("stable_baselines3.sac.", "stable_baselines3", "SAC"),
    ("stable_baselines3.td3.", "stable_baselines3", "TD3"),
    ("stable_baselines3.dqn.", "stable_baselines3", "DQN"),
    ("stable_baselines3.common.policies", "stable_baselines3", "PPO"),
)


def _algorithm(package: str, name: str) -> Any:
    return getattr(__import__(package, fromlist=[name]), name)


def sb3_policy_module(path: Path) -> str:
    """The module of the policy class recorded in an SB3 zip (``''`` when not recorded)."""
    try:
        with zipfile.ZipFile(path) as archive:
            data = json.loads(archive.read("data"))
    except (OSError, KeyError, zipfile.BadZipFile, json.JSONDecodeError) as err:
        raise DatasetError(f"{path}: not a stable-baselines3 model zip ({err})") from None
    policy = data.get("policy_class", {})
    return str(policy.get("__module__", "")) if isinstance(policy, dict) else ""


def load_sb3_model(path: Path, trust: bool = False) -> Any:
    """Load an SB3 / sb3-contrib model, choosing the class from the zip's policy module.

    An unknown module (a custom policy) falls back to trying every known algorithm in turn.
    Unless ``trust``, the zip's pickled entries are decoded with an allow-list first
    (:mod:`rlformer.data.sb3_safe`), so a crafted file cannot run code.
    """
    module = sb3_policy_module(path)
    options: dict[str, Any] = {"device": "cpu"}
    if not trust:
        from rlformer.data.sb3_safe import safe_custom_objects

        options["custom_objects"] = safe_custom_objects(path)
    for prefix, package, name in SB3_ALGORITHMS:
        if module.startswith(prefix):
            return _algorithm(package, name).load(path, **options)
    failures = []
    for _, package, name in SB3_ALGORITHMS:
        try:
            return _algorithm(package, name).load(path, **options)
        except Exception as err:  # each algorithm rejects foreign files its own way
            failures.append(f"{name}: {type(err).__name__}")
    raise DatasetError(
        f"{path}: no stable-baselines3 algorithm could load it (policy module {module!r}; "
        f"tried {', '.join(failures)})"
    )


class SB3Policy:
    """A stable-baselines3 / sb3-contrib model driven through its own ``predict``."""

    def __init__(self, path: str, deterministic: bool = True, trust: bool = False) -> None:
        file = Path(path)
        if not file.is_file():
            raise DatasetError(f"{file}: stable-baselines3 model file not found")
        self.model = load_sb3_model(file, trust)
        self.state: Any = None  # LSTM states of RecurrentPPO, None otherwise
        self.deterministic = deterministic

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        """``predict`` for all slots; recurrent models reset their state where episodes start."""
        action, self.state = self.model.predict(
            obs, state=self.state, episode_start=episode_start, deterministic=self.deterministic
        )
        return np.asarray(action)


class NoisyPolicy:
    """Perturbs another source to make medium- and replay-like data from one policy.

    Box actions get Gaussian noise with standard deviation ``noise`` times half the action range
    (then clipped to the space); Discrete actions are replaced by a uniform one with probability
    ``noise`` (epsilon-greedy). Independently, with probability ``random_fraction`` an action
    is replaced by a uniformly random one — a mixture of the policy and a random policy.
    """

    def __init__(
        self,
        inner: ActionSource,
        action_space: gym.Space,
        noise: float,
        random_fraction: float,
        seed: int,
    ) -> None:
        if not isinstance(action_space, (gym.spaces.Box, gym.spaces.Discrete)):
            raise DatasetError(
                f"action noise needs a Box or Discrete action space, not {action_space}"
            )
        self.inner, self.space = inner, action_space
        self.noise, self.random_fraction = noise, random_fraction
        self.rng = np.random.default_rng(seed)

    def _uniform(self, count: int) -> np.ndarray:
        if isinstance(self.space, gym.spaces.Box):
            shape = (count, *self.space.shape)
            return self.rng.uniform(self.space.low, self.space.high, size=shape)
        assert isinstance(self.space, gym.spaces.Discrete)
        return self.space.start + self.rng.integers(0, self.space.n, size=count)

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        """The inner policy's actions, perturbed and partly replaced."""
        actions = np.asarray(self.inner.act(obs, episode_start))
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
        return actions.astype(self.space.dtype)
