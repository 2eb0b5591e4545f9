"""The one batch vocabulary between rollout workers and learners.

A :class:`Fragment` is ``F`` consecutive steps of ``E`` env slots. Arrays are time-major
``[F, E, ...]``; ``state`` is each slot's memory *at the fragment start*, which is what lets the
learner re-run the fragment as one sequence and reproduce the rollout's log-probs exactly.

Timing convention for step ``t`` of slot ``e``:
``obs[t]`` was observed, ``episode_start[t]`` says it is the first observation of an episode,
``actions[t]`` was taken, ``rewards[t]`` received, and ``terminated[t]`` / ``truncated[t]`` say
the episode ended on that step; ``action_masks[t]`` (with ``env.action_mask``) says which
actions ``obs[t]`` allowed. For a truncated step, ``truncation_values[t]`` holds the value of
the final observation (0 elsewhere) so that GAE can bootstrap through time limits.

With ``ppo.memory_gradient_steps = B > 0`` a fragment also carries a :class:`Prefix`: the last
``B`` steps each slot took *before* the fragment, with the memory at their start, so the learner
can recompute the memory the fragment starts from with gradient (see ``learners/ppo.py``).

``obs`` is one array for flat observation spaces and a dict from leaf path to array for Dict /
Tuple spaces (see :mod:`rlformer.networks.spaces`); images stay uint8. ``rewards`` are what the
model was fed as previous rewards (scaled when ``model.normalize_reward`` is on, with the
statistics the worker had); ``env_rewards`` are the env's own, which the learner scales afresh
for the returns. ``statistics`` holds the moments of what the workers saw, merged in worker
order, for the running normalisation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rlformer.networks.actor_critic import AgentState
from rlformer.networks.normalization import Moments, merge_moments
from rlformer.networks.spaces import Tree, tree_stack


@dataclass
class Prefix:
    """The ``B`` steps before a fragment (time-major ``[B, E, ...]``) and the memory at their
    start. Before a slot's first fragment the prefix is all episode starts, which the model
    treats as nothing remembered."""

    obs: Tree
    actions: np.ndarray
    rewards: np.ndarray
    episode_start: np.ndarray
    state: AgentState

    @staticmethod
    def concat(prefixes: list[Prefix]) -> Prefix:
        def cat(name: str) -> np.ndarray:
            return np.concatenate([getattr(p, name) for p in prefixes], axis=1)

        return Prefix(
            obs=tree_stack([p.obs for p in prefixes], lambda parts: np.concatenate(parts, axis=1)),
            actions=cat("actions"),
            rewards=cat("rewards"),
            episode_start=cat("episode_start"),
            state=AgentState.cat([p.state for p in prefixes]),
        )


@dataclass
class Fragment:
    """Fixed-length rollout of ``E`` env slots (see the module docstring for timing)."""

    obs: Tree  # [F, E, *obs_shape] (a leaf dict of those for Dict / Tuple spaces)
    actions: np.ndarray  # [F, E] or [F, E, A]
    log_probs: np.ndarray  # [F, E] float32
    values: np.ndarray  # [F, E] float32
    rewards: np.ndarray  # [F, E] float32, as the model saw them
    env_rewards: np.ndarray  # [F, E] float32, unscaled
    terminated: np.ndarray  # [F, E] bool
    truncated: np.ndarray  # [F, E] bool
    episode_start: np.ndarray  # [F, E] bool
    truncation_values: np.ndarray  # [F, E] float32
    last_value: np.ndarray  # [E] value of the observation after the fragment
    state: AgentState  # memory at the fragment start, batch = E
    policy_version: int
    worker_index: int
    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)
    episode_successes: list[float] = field(default_factory=list)
    sample_seconds: float = 0.0  # time the worker spent stepping envs + policy (overhead metrics)
    statistics: dict[str, Moments] = field(default_factory=dict)  # see normalization.py
    prefix: Prefix | None = None  # the steps before, with ppo.memory_gradient_steps > 0
    action_masks: np.ndarray | None = None  # [F, E, n] bool, with env.action_mask
    # [F, E] bool: which steps are data; a multi-agent row is not while its agent is absent
    # (not yet joined, or finished before the others). None: every step.
    valid: np.ndarray | None = None

    @property
    def length(self) -> int:
        return int(self.rewards.shape[0])

    @property
    def num_envs(self) -> int:
        return int(self.rewards.shape[1])

    @staticmethod
    def concat(fragments: list[Fragment]) -> Fragment:
        """Merge fragments of equal length and policy version along the env axis."""
        versions = {f.policy_version for f in fragments}
        if len(versions) != 1:
            raise ValueError(f"refusing to merge fragments of different policy versions {versions}")

        def cat(name: str, axis: int) -> np.ndarray:
            return np.concatenate([getattr(f, name) for f in fragments], axis=axis)

        statistics: dict[str, Moments] = {}
        for fragment in fragments:  # in worker order: both backends merge identically
            for key, value in fragment.statistics.items():
                statistics[key] = (
                    merge_moments(statistics[key], value) if key in statistics else value
                )
        time_major = [
            "actions",
            "log_probs",
            "values",
            "rewards",
            "env_rewards",
            "terminated",
            "truncated",
            "episode_start",
            "truncation_values",
        ]
        return Fragment(
            obs=tree_stack([f.obs for f in fragments], lambda parts: np.concatenate(parts, axis=1)),
            **{name: cat(name, 1) for name in time_major},
            last_value=cat("last_value", 0),
            state=AgentState.cat([f.state for f in fragments]),
            policy_version=fragments[0].policy_version,
            worker_index=-1,
            episode_returns=[r for f in fragments for r in f.episode_returns],
            episode_lengths=[n for f in fragments for n in f.episode_lengths],
            episode_successes=[s for f in fragments for s in f.episode_successes],
            sample_seconds=max(f.sample_seconds for f in fragments),
            statistics=statistics,
            prefix=(
                Prefix.concat([f.prefix for f in fragments if f.prefix is not None])
                if fragments[0].prefix is not None
                else None
            ),
            action_masks=cat("action_masks", 1) if fragments[0].action_masks is not None else None,
            valid=cat("valid", 1) if fragments[0].valid is not None else None,
        )
