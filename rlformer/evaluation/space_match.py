"""Whether a policy can act in an env: the same observation and action spaces.

One command can put several policies on several tasks into one table; a pair whose spaces
differ is skipped (a suite) or refused (one task) with the spaces named.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rlformer.config import EnvConfig
from rlformer.policies.base import Policy
from rlformer.rollout.env_factory import EnvError, env_from_config


def space_mismatch(policy: Policy, env_cfg: EnvConfig) -> str | None:
    """Why ``policy`` cannot act in ``env_cfg`` (a sentence), or None when the spaces match."""
    env = env_from_config(env_cfg)
    try:
        problems = []
        if not _same_space(policy.observation_space, env.observation_space):
            problems.append(
                f"observations {_describe(env.observation_space)}, "
                f"agent expects {_describe(policy.observation_space)}"
            )
        if not _same_space(policy.action_space, env.action_space):
            problems.append(
                f"actions {_describe(env.action_space)}, "
                f"agent expects {_describe(policy.action_space)}"
            )
    finally:
        env.close()
    return f"{env_cfg.id} has " + " and ".join(problems) if problems else None


def check_fits(policy: Policy, env_cfg: EnvConfig) -> None:
    """Raise :class:`EnvError` when ``policy`` cannot act in ``env_cfg``."""
    reason = space_mismatch(policy, env_cfg)
    if reason is not None:
        raise EnvError(f"{policy.info.name} cannot be evaluated there: {reason}")


def _same_space(a: gym.Space, b: gym.Space) -> bool:
    if isinstance(a, gym.spaces.Discrete) and isinstance(b, gym.spaces.Discrete):
        return int(a.n) == int(b.n)
    if isinstance(a, gym.spaces.Box) and isinstance(b, gym.spaces.Box):
        return a.shape == b.shape
    if isinstance(a, gym.spaces.MultiDiscrete) and isinstance(b, gym.spaces.MultiDiscrete):
        return np.array_equal(a.nvec, b.nvec)
    if isinstance(a, gym.spaces.Dict) and isinstance(b, gym.spaces.Dict):
        return list(a.spaces) == list(b.spaces) and all(
            _same_space(a[key], b[key]) for key in a.spaces
        )
    if isinstance(a, gym.spaces.Tuple) and isinstance(b, gym.spaces.Tuple):
        return len(a.spaces) == len(b.spaces) and all(
            _same_space(x, y) for x, y in zip(a.spaces, b.spaces, strict=True)
        )
    return type(a) is type(b) and a.shape == b.shape


def _describe(space: gym.Space) -> str:
    if isinstance(space, gym.spaces.Discrete):
        return f"Discrete({int(space.n)})"
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple, gym.spaces.MultiDiscrete)):
        return str(space)
    return f"{type(space).__name__}{tuple(np.shape(space.sample()))}"
