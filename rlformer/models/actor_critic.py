"""Actor-critic for PPO: observation encoding, torso(s) with memory, categorical or Gaussian head.

Two entry points, following the act-one-step / evaluate-sequences split:

* :meth:`ActorCritic.act` — rollout: one step per env slot, sampling with an explicit
  ``torch.Generator`` so each rollout worker's action noise is reproducible on its own;
* :meth:`ActorCritic.evaluate` — learner: whole sequences from the memory state stored at the
  sequence start, returning log-probs, entropies and values for every step.

Example:
    >>> import gymnasium as gym
    >>> from rlformer.config import ModelConfig
    >>> env = gym.make("CartPole-v1")
    >>> model = ActorCritic(env.observation_space, env.action_space, ModelConfig(torso="mlp"))
    >>> state = model.initial_state(1)
    >>> out = model.act(torch.zeros(1, 4), state, torch.ones(1, dtype=torch.bool))
    >>> out.action.shape
    torch.Size([1])
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlformer.config import ModelConfig
from rlformer.core import Memory
from rlformer.models.torso import GTrXLTorso, MLPTorso


@dataclass
class AgentState:
    """Recurrent state of an actor-critic: one memory per torso (None for memoryless torsos)."""

    actor: Memory | None
    critic: Memory | None = None

    def index(self, rows: torch.Tensor | slice) -> AgentState:
        """The state of a subset of batch rows."""
        return AgentState(
            *(None if m is None else m.index(rows) for m in (self.actor, self.critic))
        )

    def to(self, device: torch.device | str) -> AgentState:
        return AgentState(*(None if m is None else m.to(device) for m in (self.actor, self.critic)))

    @staticmethod
    def cat(states: list[AgentState]) -> AgentState:
        """Concatenate along the batch dimension (used to merge workers' fragments)."""

        def merge(parts: list[Memory | None]) -> Memory | None:
            return None if parts[0] is None else Memory.cat(parts)  # type: ignore[arg-type]

        return AgentState(merge([s.actor for s in states]), merge([s.critic for s in states]))


class ActOutput(NamedTuple):
    """What one rollout step needs to store."""

    action: torch.Tensor  # [B] (discrete) or [B, A] (continuous, unclipped sample)
    log_prob: torch.Tensor  # [B]
    value: torch.Tensor  # [B]
    state: AgentState


class EvaluateOutput(NamedTuple):
    """Per-step quantities the PPO loss needs, recomputed under the current parameters."""

    log_prob: torch.Tensor  # [B, T]
    entropy: torch.Tensor  # [B, T]
    value: torch.Tensor  # [B, T]


def observation_dim(space: gym.Space) -> int:
    """Size of the flat float vector an observation is encoded to."""
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gym.spaces.Box):
        return int(np.prod(space.shape))
    raise TypeError(f"observation space {space} is not supported (use Box or Discrete)")


def encode_observation(space: gym.Space, obs: torch.Tensor) -> torch.Tensor:
    """Flatten Box observations to float; one-hot Discrete ones. Leading dims are kept."""
    if isinstance(space, gym.spaces.Discrete):
        return nn.functional.one_hot((obs.long() - int(space.start)), int(space.n)).float()
    lead = obs.shape[: obs.dim() - len(space.shape)]
    return obs.reshape(*lead, -1).float()


def _orthogonal(layer: nn.Linear, gain: float) -> nn.Linear:
    # Orthogonal init with small output gains is the PPO implementation detail that keeps the
    # initial policy near-uniform (Andrychowicz et al. 2021, "What matters in on-policy RL").
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class ActorCritic(nn.Module):
    """Policy and value function over a (possibly shared) torso."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, cfg: ModelConfig):
        super().__init__()
        self.observation_space = observation_space
        self.action_space = action_space
        in_dim = observation_dim(observation_space)

        def make_torso() -> GTrXLTorso | MLPTorso:
            if cfg.torso == "gtrxl":
                return GTrXLTorso(in_dim, cfg.core)
            return MLPTorso(in_dim, cfg.mlp_hidden)

        self.actor_torso = make_torso()
        self.critic_torso = None if cfg.shared_torso else make_torso()
        width = self.actor_torso.out_dim

        if isinstance(action_space, gym.spaces.Discrete):
            self.continuous = False
            self.policy_head = _orthogonal(nn.Linear(width, int(action_space.n)), 0.01)
        elif isinstance(action_space, gym.spaces.Box):
            self.continuous = True
            act_dim = int(np.prod(action_space.shape))
            self.policy_head = _orthogonal(nn.Linear(width, act_dim), 0.01)
            self.log_std = nn.Parameter(torch.full((act_dim,), cfg.log_std_init))
        else:
            raise TypeError(f"action space {action_space} is not supported (use Discrete or Box)")
        self.value_head = _orthogonal(nn.Linear(width, 1), 1.0)

    # ----------------------------------------------------------------- state
    def initial_state(self, batch_size: int, device: torch.device | str = "cpu") -> AgentState:
        critic = (
            None
            if self.critic_torso is None
            else self.critic_torso.initial_state(batch_size, device)
        )
        return AgentState(self.actor_torso.initial_state(batch_size, device), critic)

    # ----------------------------------------------------------------- heads
    def _distribution_params(self, latent: torch.Tensor) -> torch.Tensor:
        return self.policy_head(latent)

    def _log_prob_entropy(
        self, params: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.continuous:
            std = self.log_std.exp()
            z = (action - params) / std
            log_prob = (-0.5 * z.pow(2) - self.log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
            entropy = (0.5 + 0.5 * math.log(2 * math.pi) + self.log_std).sum().expand_as(log_prob)
            return log_prob, entropy
        log_p = torch.log_softmax(params, dim=-1)
        log_prob = log_p.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
        entropy = -(log_p.exp() * log_p).sum(-1)
        return log_prob, entropy

    def _sample(
        self, params: torch.Tensor, deterministic: bool, generator: torch.Generator | None
    ) -> torch.Tensor:
        if self.continuous:
            if deterministic:
                return params
            noise = torch.randn(params.shape, generator=generator, device=params.device)
            return params + noise * self.log_std.exp()
        if deterministic:
            return params.argmax(-1)
        probs = torch.softmax(params, dim=-1)
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)

    # ----------------------------------------------------------------- API
    @torch.no_grad()
    def act(
        self,
        obs: torch.Tensor,
        state: AgentState,
        episode_start: torch.Tensor,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
    ) -> ActOutput:
        """One step for a batch of env slots; ``episode_start[b]`` marks a fresh episode."""
        x = encode_observation(self.observation_space, obs)
        latent, actor_mem = self.actor_torso.step(x, state.actor, episode_start)
        if self.critic_torso is None:
            value_latent, critic_mem = latent, None
        else:
            value_latent, critic_mem = self.critic_torso.step(x, state.critic, episode_start)
        params = self._distribution_params(latent)
        action = self._sample(params, deterministic, generator)
        log_prob, _ = self._log_prob_entropy(params, action)
        value = self.value_head(value_latent).squeeze(-1)
        return ActOutput(action, log_prob, value, AgentState(actor_mem, critic_mem))

    def evaluate(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        state: AgentState,
        episode_start: torch.Tensor,
    ) -> EvaluateOutput:
        """Log-probs, entropies and values of ``actions`` along sequences ``obs [B, T, ...]``."""
        x = encode_observation(self.observation_space, obs)
        latent, _ = self.actor_torso.sequence(x, state.actor, episode_start)
        if self.critic_torso is None:
            value_latent = latent
        else:
            value_latent, _ = self.critic_torso.sequence(x, state.critic, episode_start)
        log_prob, entropy = self._log_prob_entropy(self._distribution_params(latent), actions)
        return EvaluateOutput(log_prob, entropy, self.value_head(value_latent).squeeze(-1))

    def env_action(self, action: torch.Tensor) -> np.ndarray:
        """Convert a sampled action to what ``env.step`` takes (continuous actions are clipped)."""
        array = action.detach().cpu().numpy()
        if self.continuous:
            space = self.action_space
            assert isinstance(space, gym.spaces.Box)
            return (
                np.clip(array, space.low, space.high).reshape(-1, *space.shape).astype(space.dtype)
            )
        return array.astype(np.int64)

    def spec(self) -> dict[str, Any]:
        """Spaces needed to rebuild this model without an environment (stored in checkpoints)."""
        return {"observation_space": self.observation_space, "action_space": self.action_space}
