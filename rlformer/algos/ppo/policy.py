"""PPO's actor-critics (GTrXL, LSTM, GRU, MLP torsos) as a :class:`~rlformer.policies.Policy`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlformer.config import TrainConfig
from rlformer.networks.actor_critic import ActorCritic, AgentState
from rlformer.networks.distributions import (
    ActionDistribution,
    Bernoulli,
    DiagGaussian,
    MultiCategorical,
)
from rlformer.networks.encoders import to_torch
from rlformer.networks.spaces import flatten_obs
from rlformer.policies.base import PolicyDistribution, PolicyInfo
from rlformer.runs.checkpoints import (
    CheckpointError,
    checkpoint_config,
    checkpoint_spaces,
    load_weights,
)


class ActorCriticPolicy:
    """A trained :class:`ActorCritic`; its state is the model's :class:`AgentState` (the torsos'
    memory plus, with ``model.prev_action_reward``, each row's previous action and reward)."""

    def __init__(
        self, model: ActorCritic, info: PolicyInfo, device: torch.device | str = "cpu"
    ) -> None:
        self.model = model.to(device).eval()
        self.device = torch.device(device)
        self.info = info
        self.observation_space: gym.Space = model.observation_space
        self.action_space: gym.Space = model.action_space

    def to(self, device: torch.device | str) -> ActorCriticPolicy:
        """Act on ``device`` (states from :meth:`initial_state` are made there too)."""
        self.device = torch.device(device)
        self.model.to(self.device)
        return self

    def initial_state(self, n: int, target_return: float | None = None) -> AgentState:
        return self.model.initial_state(n, self.device)

    @torch.no_grad()
    def act(
        self,
        obs: Any,
        state: AgentState,
        episode_start: np.ndarray,
        reward: np.ndarray | None = None,
        action_mask: np.ndarray | None = None,
        deterministic: bool = True,
        generator: torch.Generator | None = None,
    ) -> tuple[np.ndarray, AgentState]:
        if reward is not None:  # the previous-reward input, when the model has one
            state = state.with_reward(self.model.scale_rewards(np.asarray(reward)))
        mask = None if action_mask is None else torch.as_tensor(action_mask, device=self.device)
        if generator is not None and generator.device != self.device:
            generator = None  # a CPU generator cannot drive sampling on a GPU: global RNG
        params, next_state = self.model.policy_step(
            to_torch(flatten_obs(self.observation_space, obs), self.device),
            state,
            torch.as_tensor(np.asarray(episode_start, dtype=bool), device=self.device),
            mask,
        )
        action = self.model.dist.sample(params, deterministic, generator)
        return self.model.env_action(action), self.model.remember_action(next_state, action)

    @torch.no_grad()
    def distribution(
        self,
        obs: Any,
        state: AgentState,
        episode_start: np.ndarray,
        reward: np.ndarray | None = None,
        action_mask: np.ndarray | None = None,
    ) -> PolicyDistribution:
        model = self.model
        if reward is not None:
            state = state.with_reward(model.scale_rewards(np.asarray(reward)))
        mask = None if action_mask is None else torch.as_tensor(action_mask, device=self.device)
        params, next_state = model.policy_step(
            to_torch(flatten_obs(self.observation_space, obs), self.device),
            state,
            torch.as_tensor(np.asarray(episode_start, dtype=bool), device=self.device),
            mask,
        )
        # as act() leaves it after the most likely action
        next_state = model.remember_action(next_state, model.dist.sample(params, True, None))
        return distribution_of(model.dist, params.float().cpu(), next_state)


def distribution_of(
    dist: ActionDistribution, params: torch.Tensor, state: Any
) -> PolicyDistribution:
    """A :class:`PolicyDistribution` from a distribution head's parameters ``[B, param_dim]``."""
    if isinstance(dist, DiagGaussian):
        log_std = dist.log_std.detach().float().cpu().expand_as(params)
        return PolicyDistribution(
            "diag_gaussian", state, mean=params.numpy(), log_std=log_std.numpy()
        )
    if isinstance(dist, Bernoulli):
        return PolicyDistribution("bernoulli", state, logits=(params.numpy(),))
    sizes = dist.nvec if isinstance(dist, MultiCategorical) else [params.shape[-1]]
    logits = tuple(part.numpy() for part in params.split(sizes, dim=-1))
    return PolicyDistribution("categorical", state, logits=logits)


def actor_critic_from_payload(
    payload: dict[str, Any], path: str | Path
) -> tuple[ActorCritic, TrainConfig]:
    """Rebuild a PPO checkpoint's model; any inconsistency is a :class:`CheckpointError`."""
    cfg = checkpoint_config(payload, path)
    observation_space, action_space = checkpoint_spaces(payload, path)
    try:
        model = ActorCritic(observation_space, action_space, cfg.model)
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"{path}: cannot rebuild its model: {err}") from None
    load_weights(model, payload, path)
    return model, cfg


def actor_critic_policy(payload: dict[str, Any], name: str) -> ActorCriticPolicy:
    """The policy a PPO checkpoint (``kind: ppo``) holds."""
    model, cfg = actor_critic_from_payload(payload, name)
    return ActorCriticPolicy(model, PolicyInfo(name, "ppo", training_env=cfg.env))


def policy_for_network(network: Any) -> ActorCriticPolicy | None:
    """The policy acting with a bare actor-critic (a training run's current weights)."""
    if not isinstance(network, ActorCritic):
        return None
    return ActorCriticPolicy(network, PolicyInfo("model", "ppo"))
