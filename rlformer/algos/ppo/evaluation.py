"""Evaluating a training run's current actor-critic (the final and periodic evaluations)."""

from __future__ import annotations

import torch

from rlformer.algos.ppo.policy import ActorCriticPolicy
from rlformer.config import EnvConfig
from rlformer.evaluation.runner import EpisodeResults, run_policy_episodes
from rlformer.networks.actor_critic import ActorCritic
from rlformer.policies.base import PolicyInfo


def run_episodes(
    model: ActorCritic,
    env_cfg: EnvConfig,
    episodes: int,
    num_envs: int = 8,
    deterministic: bool = True,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> EpisodeResults:
    """Play ``episodes`` full episodes with a bare actor-critic (a training run's current
    weights); see :func:`run_policy_episodes`."""
    policy = ActorCriticPolicy(model, PolicyInfo("model", "ppo"), device)
    return run_policy_episodes(policy, env_cfg, episodes, num_envs, seed, deterministic)
