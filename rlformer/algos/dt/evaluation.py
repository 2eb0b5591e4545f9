"""Return-conditioned episodes of a Decision Transformer policy.

:func:`run_return_conditioned` is evaluation: one episode per env, all in parallel, each aimed
at the same target return. :func:`play_return_conditioned` plays given envs once and keeps what
a trajectory buffer needs (the Online DT's rollouts): observations, the actions in the model's
space and the rewards. Both act through :meth:`DTPolicy.step`, the policy every other caller
uses too.
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

from rlformer.algos.dt.policy import DTPolicy, sampling_problem
from rlformer.config import EnvConfig
from rlformer.evaluation.runner import EpisodeResults, run_policy_episodes
from rlformer.networks.spaces import Tree, flatten_obs, tree_stack


@dataclass
class PlayedEpisode:
    """One return-conditioned episode as played: raw observations (flat float32 vectors, or
    trees of leaves as the env gives them), the model's actions ([-1, 1] when continuous,
    indices when discrete, bits as floats) and the rewards received."""

    observations: Tree  # [n, state_dim], or {leaf path: [n, *leaf]}
    actions: np.ndarray  # [n, act_dim] float, [n] or [n, components] int
    rewards: np.ndarray  # [n] float64
    terminated: bool
    truncated: bool
    success: float | None


@torch.no_grad()
def play_return_conditioned(
    policy: DTPolicy,
    envs: list[gym.Env],
    target_return: float,
    seeds: list[int | None],
    generator: torch.Generator | None = None,
    max_steps: int = 10_000,
) -> list[PlayedEpisode]:
    """One episode per env in parallel, conditioned on ``target_return``.

    Args:
        seeds: Reset seed per env (None: continue the env's own RNG).
        generator: Sample actions from the policy with it (an ODT's exploration); None plays
            the most likely action.
    """
    spec = envs[0].spec
    limit = min(max_steps, (spec.max_episode_steps if spec else None) or max_steps)
    n = len(envs)
    layout = policy.layout

    def row(obs: object) -> Tree:
        if layout.flat:
            return np.asarray(obs, np.float32).reshape(-1)
        assert layout.space is not None
        return flatten_obs(layout.space, obs)

    observations: list[list[Tree]] = [[] for _ in range(n)]
    actions: list[list[np.ndarray]] = [[] for _ in range(n)]
    rewards = np.zeros((n, limit), np.float64)
    lengths = np.zeros(n, np.int64)
    active = np.ones(n, dtype=bool)
    terminated = np.zeros(n, dtype=bool)
    successes: list[float | None] = [None] * n  # by env index
    latest = []
    for i, env in enumerate(envs):
        obs, _ = env.reset(seed=seeds[i])
        latest.append(row(obs))
        observations[i].append(latest[i])
    state = policy.initial_state(n, target_return)
    episode_start = np.ones(n, dtype=bool)
    last_reward = np.zeros(n, np.float64)
    for t in range(limit):
        step = policy.step(tree_stack(latest), state, episode_start, last_reward, None, generator)
        state, episode_start = step.state, np.zeros(n, dtype=bool)
        for i in np.flatnonzero(active):
            obs, reward, term, trunc, info = envs[i].step(step.env_actions[i])
            actions[i].append(step.model_actions[i])
            rewards[i, t] = last_reward[i] = reward
            lengths[i] += 1
            latest[i] = row(obs)
            if term or trunc:
                active[i] = False
                terminated[i] = bool(term)
                if "is_success" in info:
                    successes[i] = float(info["is_success"])
            else:
                observations[i].append(latest[i])
        if not active.any():
            break
    indices = getattr(policy.model, "action_kind", None) in ("discrete", "multidiscrete")
    dtype = np.int64 if policy.model.discrete or indices else np.float32
    return [
        PlayedEpisode(
            tree_stack(observations[i][: lengths[i]]),
            np.asarray(actions[i], dtype=dtype),
            rewards[i, : lengths[i]].copy(),
            bool(terminated[i]),
            not bool(terminated[i]),
            successes[i],
        )
        for i in range(n)
    ]


def run_return_conditioned(
    policy: DTPolicy,
    env_cfg: EnvConfig,
    target_return: float,
    episodes: int,
    seed: int = 0,
    deterministic: bool = True,
) -> EpisodeResults:
    """``episodes`` episodes in parallel (one env each), conditioned on ``target_return``; env
    ``i`` is reset with ``seed + i``.

    ``deterministic=False`` samples the actions (see :func:`sampling_problem`), from a generator
    seeded with ``seed``, so a sampled evaluation repeats exactly.
    """
    if not deterministic:
        problem = sampling_problem(policy.model)
        if problem is not None:
            raise ValueError(f"cannot sample actions: {problem}")
    return run_policy_episodes(
        policy, env_cfg, episodes, episodes, seed, deterministic, target_return
    )
