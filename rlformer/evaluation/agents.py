"""Anything ``rlformer eval`` can evaluate, behind one interface.

An rlformer run (GTrXL-PPO or Decision Transformer) or a stable-baselines3 model is loaded once
and then played on any task whose observation and action spaces match its own, so one command
can put several agents on several tasks into one table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
import numpy as np
import torch

from rlformer.config import EnvConfig
from rlformer.evaluation.runner import ActionSource, PolicyActions
from rlformer.rollout.env_factory import EnvError, env_from_config

AgentKind = Literal["ppo", "dt", "sb3"]


@dataclass
class Agent:
    """A loaded policy plus what evaluation needs to know about it."""

    name: str  # as given on the command line
    kind: AgentKind
    observation_space: gym.Space
    action_space: gym.Space
    training_env: EnvConfig | None  # None for stable-baselines3 models
    # Reactive agents (PPO, SB3): (vector slots, deterministic, seed) -> action source.
    make_source: Callable[[int, bool, int], ActionSource] | None = None
    dt_policy: Any = None  # DTPolicy for return-conditioned agents
    default_targets: list[float] = field(default_factory=list)
    # Episode-return statistics of the DT's training data (min, max, mean, ...), if recorded.
    dataset_returns: dict[str, float] | None = None


def load_eval_agent(spec: str | Path, trust: bool = False) -> Agent:
    """Load ``RUN_DIR``, a checkpoint file, or ``sb3:PATH.zip``.

    rlformer checkpoints are read without unpickling and SB3 zips through an allow-list,
    unless ``trust`` (see :mod:`rlformer.checkpoints`, :mod:`rlformer.data.sb3_safe`).
    """
    text = str(spec)
    if text.startswith("sb3:"):
        return _load_sb3(text, trust)
    from rlformer.checkpoints import load_checkpoint

    payload = load_checkpoint(text, trust)
    _require_finite_weights(payload, text)
    if payload.get("kind") == "dt":
        return _load_dt(text, payload)
    return _load_ppo(text, payload)


def _require_finite_weights(payload: dict[str, Any], name: str) -> None:
    """A :class:`CheckpointError` for NaN / inf weights (a damaged file or a diverged run),
    which would otherwise act at random or fail mid-evaluation when sampling an action."""
    from rlformer.checkpoints import CheckpointError

    weights = payload.get("model")
    if not isinstance(weights, dict):
        return  # the model loader reports a missing or malformed entry
    bad = [
        key
        for key, value in weights.items()
        if isinstance(value, torch.Tensor)
        and value.is_floating_point()
        and not bool(torch.isfinite(value).all())
    ]
    if bad:
        more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
        raise CheckpointError(
            f"{name}: its weights hold NaN or inf ({bad[0]}{more}); the file is damaged or the "
            "run diverged"
        )


def _load_sb3(text: str, trust: bool) -> Agent:
    from rlformer.data.policies import SB3Policy

    path = text.removeprefix("sb3:")
    probe = SB3Policy(path, trust=trust)  # raises a clear error for a missing or unsafe file

    def make_source(slots: int, deterministic: bool, seed: int) -> ActionSource:
        source = SB3Policy(path, deterministic=deterministic, trust=trust)
        source.model.set_random_seed(seed)
        return source

    return Agent(
        text,
        "sb3",
        probe.model.observation_space,
        probe.model.action_space,
        None,
        make_source=make_source,
    )


def _load_ppo(text: str, payload: dict[str, Any]) -> Agent:
    from rlformer.training import agent_from_payload

    model, cfg = agent_from_payload(payload, text)

    def make_source(slots: int, deterministic: bool, seed: int) -> ActionSource:
        return PolicyActions(model, slots, deterministic, seed)

    return Agent(
        text,
        "ppo",
        model.observation_space,
        model.action_space,
        cfg.env,
        make_source=make_source,
    )


def _load_dt(text: str, payload: dict[str, Any]) -> Agent:
    from rlformer.algos.dt import load_dt_policy
    from rlformer.checkpoints import checkpoint_spaces

    policy, cfg = load_dt_policy(payload, text)
    observation_space, action_space = checkpoint_spaces(payload, text)
    return Agent(
        text,
        "dt",
        observation_space,
        action_space,
        cfg.env,
        dt_policy=policy,
        default_targets=list(cfg.dt.target_returns),
        dataset_returns=payload.get("dataset_returns"),
    )


def space_mismatch(agent: Agent, env_cfg: EnvConfig) -> str | None:
    """Why ``agent`` cannot act in ``env_cfg`` (a sentence), or None when the spaces match."""
    env = env_from_config(env_cfg)
    try:
        problems = []
        if not _same_space(agent.observation_space, env.observation_space):
            problems.append(
                f"observations {_describe(env.observation_space)}, "
                f"agent expects {_describe(agent.observation_space)}"
            )
        if not _same_space(agent.action_space, env.action_space):
            problems.append(
                f"actions {_describe(env.action_space)}, "
                f"agent expects {_describe(agent.action_space)}"
            )
    finally:
        env.close()
    return f"{env_cfg.id} has " + " and ".join(problems) if problems else None


def check_fits(agent: Agent, env_cfg: EnvConfig) -> None:
    """Raise :class:`EnvError` when ``agent`` cannot act in ``env_cfg``."""
    reason = space_mismatch(agent, env_cfg)
    if reason is not None:
        raise EnvError(f"{agent.name} cannot be evaluated there: {reason}")


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
