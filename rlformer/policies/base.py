"""The one concept everything that acts with a trained agent goes through: :class:`Policy`.

Evaluation, ``rlformer collect``, ``predict()``, the Online DT's rollouts and export all drive a
policy the same way, with the state held by the caller, never inside the policy object::

    state = policy.initial_state(num_envs)
    obs, _ = envs.reset(seed=...)
    episode_start, reward = np.ones(num_envs, bool), None
    while ...:
        actions, state = policy.act(obs, state, episode_start, reward)
        obs, reward, terminated, truncated, _ = envs.step(actions)
        episode_start = terminated | truncated

Because the state is explicit data (per-layer memory and its validity, LSTM h/c, a Decision
Transformer's context), many clients' states can be batched into one call, moved between
processes and written into an exported graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np
import torch

from rlformer.config import EnvConfig
from rlformer.policies.errors import PolicyError as PolicyError  # importable from here too

PolicyState = Any
"""A policy's per-row state: opaque to callers, but plain data (tensors / arrays / None)."""


@dataclass
class PolicyInfo:
    """What callers need to know about a policy beyond its spaces.

    Attributes:
        name: How the user named it (run directory, checkpoint, ``sb3:FILE.zip``, ``random``).
        kind: Where it came from: a checkpoint kind (``ppo``, ``dt``), ``sb3``, ``random``.
        training_env: The env it was trained on, with its imports and wrappers (None if unknown).
        return_conditioned: Its episodes are conditioned on a target return
            (``initial_state(n, target_return=...)``; a Decision Transformer).
        default_targets: Target returns its training config evaluated (return-conditioned only).
        dataset_returns: Episode-return statistics of its training data, when recorded.
        sampling_problem: Why ``deterministic=False`` cannot sample it, or None when it can.
    """

    name: str
    kind: str
    training_env: EnvConfig | None = None
    return_conditioned: bool = False
    default_targets: list[float] = field(default_factory=list)
    dataset_returns: dict[str, float] | None = None
    sampling_problem: str | None = None


@runtime_checkable
class Policy(Protocol):
    """Acts on a batch of env slots, each row with its own state.

    ``act`` takes batched observations as a Gymnasium vector env gives them (Dict / Tuple
    observations as dicts / tuples of batched arrays) and returns actions in the env's format.
    ``episode_start[b]`` is True on the first step of row b's episode: the row's state is reset
    there. ``reward`` is each row's reward for its previous action (None on the first call;
    needed by policies that take the previous reward, and by return-conditioned ones).
    ``action_mask`` is ``[B, n]`` booleans (the components' masks concatenated for
    MultiDiscrete actions); actions it marks False are never taken. ``generator`` seeds sampling
    (``deterministic=False``) so that a sampled evaluation repeats exactly.
    """

    observation_space: gym.Space
    action_space: gym.Space
    info: PolicyInfo

    def initial_state(self, n: int, target_return: float | None = None) -> PolicyState:
        """The state of ``n`` rows before their first step (``target_return``: for
        return-conditioned policies, the return their episodes aim for; others ignore it)."""
        ...

    def act(
        self,
        obs: Any,
        state: PolicyState,
        episode_start: np.ndarray,
        reward: np.ndarray | None = None,
        action_mask: np.ndarray | None = None,
        deterministic: bool = True,
        generator: torch.Generator | None = None,
    ) -> tuple[np.ndarray, PolicyState]:
        """Env-format actions for every row and the rows' next state."""
        ...


@dataclass(frozen=True)
class PolicyDistribution:
    """What a policy would act from at one step, for every row (numpy arrays, batch first).

    ``kind`` says which fields are set:

    * ``categorical`` (Discrete, MultiDiscrete): ``logits``, one ``[B, n_k]`` array per
      component; actions an action mask rules out sit at the lowest float (probability 0);
    * ``bernoulli`` (MultiBinary): ``logits``, one ``[B, bits]`` array;
    * ``diag_gaussian`` (a PPO Box policy): ``mean`` and ``log_std`` ``[B, act_dim]``, of the
      sample before the env's clipping;
    * ``tanh_gaussian`` (an online DT): ``mean`` and ``log_std`` of the Gaussian before tanh;
    * ``deterministic`` (a DT regressing continuous actions): ``mean`` is the action, in
      [-1, 1] for bounded spaces.

    ``state`` is the rows' next state after their most likely action (what
    ``act(..., deterministic=True)`` returns).
    """

    kind: str
    state: PolicyState
    logits: tuple[np.ndarray, ...] = ()
    mean: np.ndarray | None = None
    log_std: np.ndarray | None = None


@runtime_checkable
class DistributionPolicy(Policy, Protocol):
    """A :class:`Policy` that also shows the distribution it acts from (rlformer's own PPO
    and Decision Transformer policies, and their exports)."""

    def distribution(
        self,
        obs: Any,
        state: PolicyState,
        episode_start: np.ndarray,
        reward: np.ndarray | None = None,
        action_mask: np.ndarray | None = None,
    ) -> PolicyDistribution:
        """The rows' action distribution at this step (arguments as for ``act``)."""
        ...
