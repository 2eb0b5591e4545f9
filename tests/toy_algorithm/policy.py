"""The toy's policy: logits = W obs + b over a Discrete action space."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlformer.policies.base import PolicyInfo
from rlformer.runs.checkpoints import checkpoint_config, checkpoint_spaces, require_keys


class LinearPolicy:
    """Acts greedily, or samples from the softmax of its logits; it holds no state."""

    def __init__(
        self, observation_space: gym.Space, action_space: gym.Space, weights: dict, info: PolicyInfo
    ) -> None:
        self.observation_space, self.action_space, self.info = observation_space, action_space, info
        self.weight = weights["weight"].float()
        self.bias = weights["bias"].float()

    def initial_state(self, n: int, target_return: float | None = None) -> None:
        return None

    def logits(self, obs: Any) -> torch.Tensor:
        x = torch.as_tensor(np.asarray(obs, dtype=np.float32)).reshape(len(obs), -1)
        return x @ self.weight.T + self.bias

    def act(
        self, obs: Any, state: None, episode_start: np.ndarray, reward: Any = None,
        action_mask: Any = None, deterministic: bool = True, generator: Any = None,
    ) -> tuple[np.ndarray, None]:  # fmt: skip
        logits = self.logits(obs)
        if deterministic:
            index = logits.argmax(dim=1)
        else:
            index = torch.multinomial(logits.softmax(dim=1), 1, generator=generator)[:, 0]
        return index.numpy().astype(np.int64) + int(self.action_space.start), None


def load_linear_policy(payload: dict[str, Any], name: str) -> LinearPolicy:
    """A ``toy`` checkpoint as a policy."""
    require_keys(payload, name, "model")
    observation_space, action_space = checkpoint_spaces(payload, name)
    cfg = checkpoint_config(payload, name)
    info = PolicyInfo(name, "toy", training_env=cfg.env)
    return LinearPolicy(observation_space, action_space, payload["model"], info)
