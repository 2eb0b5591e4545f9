"""Actor-critic for PPO: observation encoders, torso(s) with memory, one action distribution.

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

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlformer.config import ModelConfig
from rlformer.core import Memory
from rlformer.networks.distributions import make_distribution
from rlformer.networks.encoders import ObservationEncoder
from rlformer.networks.normalization import Moments, RunningMeanStd, moments
from rlformer.networks.reconstruction import ReconstructionHead
from rlformer.networks.recurrent import RecurrentState, RecurrentTorso
from rlformer.networks.spaces import Tree, check_observation_space
from rlformer.networks.torso import GTrXLTorso, MLPTorso
from rlformer.networks.value_scaling import ValueScaling

_STATES = (Memory, RecurrentState)  # torso states with their own index / cat


@dataclass
class AgentState:
    """Recurrent state of an actor-critic: one memory per torso (None for memoryless torsos).

    With ``model.prev_action_reward`` it also holds each slot's previous action and reward
    (the rollout sets the reward after the env step with :meth:`with_reward`); a row whose
    episode starts ignores them.
    """

    actor: Memory | RecurrentState | None
    critic: Memory | RecurrentState | None = None
    prev_action: torch.Tensor | None = None  # [B, *action_shape]
    prev_reward: torch.Tensor | None = None  # [B] float32

    def parts(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))

    def _map(self, fn: Callable[[Any], Any]) -> AgentState:
        """Apply ``fn`` to every part that is present (memories and tensors)."""
        return AgentState(*(None if part is None else fn(part) for part in self.parts()))

    def index(self, rows: torch.Tensor | slice) -> AgentState:
        """The state of a subset of batch rows."""
        return self._map(lambda part: part.index(rows) if isinstance(part, _STATES) else part[rows])

    def to(self, device: torch.device | str) -> AgentState:
        return self._map(lambda part: part.to(device))

    def with_reward(self, reward: torch.Tensor | np.ndarray) -> AgentState:
        """This state with the reward that followed its action (no-op without the option)."""
        if self.prev_reward is None:
            return self
        copy = np.array(reward, dtype=np.float32)  # never a view into the caller's buffers
        value = torch.as_tensor(copy, device=self.prev_reward.device)
        return replace(self, prev_reward=value)

    @staticmethod
    def cat(states: list[AgentState]) -> AgentState:
        """Concatenate along the batch dimension (used to merge workers' fragments)."""
        parts = [s.parts() for s in states]
        merged = []
        for column in zip(*parts, strict=True):
            if column[0] is None:
                merged.append(None)
            elif isinstance(column[0], _STATES):
                merged.append(type(column[0]).cat(list(column)))
            else:
                merged.append(torch.cat(list(column)))
        return AgentState(*merged)


@dataclass(frozen=True)
class CriticView:
    """Which observation leaves (paths, see spaces.py) the actor and a centralised critic read.

    Multi-agent PPO's critic (MAPPO) reads the global state, which the actor must never see: it
    acts on its own observation alone, so that it can be deployed without the state. The
    critic then has its own encoder and torso and no previous action or reward.
    """

    actor: tuple[str, ...]
    critic: tuple[str, ...]


class ActOutput(NamedTuple):
    """What one rollout step needs to store."""

    action: torch.Tensor  # [B, *action_shape] (Box: the unclipped sample; see distributions.py)
    log_prob: torch.Tensor  # [B]
    value: torch.Tensor  # [B] a return (decoded from the head's units, see value_scaling.py)
    state: AgentState


class EvaluateOutput(NamedTuple):
    """Per-step quantities the PPO loss needs, recomputed under the current parameters."""

    log_prob: torch.Tensor  # [B, T]
    entropy: torch.Tensor  # [B, T]
    # [B, T] in the value head's units: returns, or their symlog or PopArt-normalised form
    # (model.value_scaling; ValueScaling.encode maps returns to them)
    value: torch.Tensor
    # [B, T] per-step loss of the observation decoder (model.reconstruction), else None
    reconstruction_error: torch.Tensor | None = None

    def from_step(self, start: int) -> EvaluateOutput:
        """Every per-step field from step ``start`` on (absent fields stay None)."""
        return EvaluateOutput(*(None if part is None else part[:, start:] for part in self))


def _orthogonal(layer: nn.Linear, gain: float) -> nn.Linear:
    # Orthogonal init with small output gains is the PPO implementation detail that keeps the
    # initial policy near-uniform (Andrychowicz et al. 2021, "What matters in on-policy RL").
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


def _rename_legacy_keys(
    module: nn.Module, state_dict: dict[str, Any], prefix: str, *_: Any
) -> None:
    """Weights saved before the distributions moved to distributions.py kept the Gaussian's
    log-std as ``log_std``; it is ``dist.log_std`` now."""
    if prefix + "log_std" in state_dict and prefix + "dist.log_std" not in state_dict:
        state_dict[prefix + "dist.log_std"] = state_dict.pop(prefix + "log_std")


class ActorCritic(nn.Module):
    """Policy and value function over a (possibly shared) torso.

    Token of one step = [encoded observation (every leaf, see encoders.py) ; previous action
    features ; previous reward] (the last two only with ``prev_action_reward``, zero at
    episode starts). Actions follow the distribution of the action space (distributions.py).
    """

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        cfg: ModelConfig,
        critic_view: CriticView | None = None,
    ):
        super().__init__()
        check_observation_space(observation_space)
        self.observation_space = observation_space
        self.action_space = action_space
        self.critic_view = critic_view
        actor_paths = None if critic_view is None else critic_view.actor
        self.encoder = ObservationEncoder(observation_space, cfg, paths=actor_paths)
        self.dist = make_distribution(action_space, cfg.log_std_init)
        self.prev_action_reward = cfg.prev_action_reward
        in_dim = self.encoder.out_dim
        if cfg.prev_action_reward:
            in_dim += self.dist.feature_dim + 1
        self.reward_norm = RunningMeanStd(()) if cfg.normalize_reward else None
        self.reward_clip = cfg.normalize_clip

        def make_torso() -> GTrXLTorso | RecurrentTorso | MLPTorso:
            if cfg.torso == "gtrxl":
                return GTrXLTorso(in_dim, cfg.core)
            if cfg.torso in ("lstm", "gru"):
                return RecurrentTorso(in_dim, cfg.torso, cfg.recurrent_hidden, cfg.recurrent_layers)
            return MLPTorso(in_dim, cfg.mlp_hidden)

        self.actor_torso = make_torso()
        self.critic_torso = None if cfg.shared_torso and critic_view is None else make_torso()
        # Built after the torsos, so that a model without it draws the same initial values.
        self.critic_encoder = None
        if critic_view is not None:
            self.critic_encoder = ObservationEncoder(
                observation_space, cfg, paths=critic_view.critic
            )
            in_dim = self.critic_encoder.out_dim
            self.critic_torso = make_torso()
        width = self.actor_torso.out_dim
        self.policy_head = _orthogonal(nn.Linear(width, self.dist.param_dim), 0.01)
        self.value_head = _orthogonal(nn.Linear(width, 1), 1.0)
        # Built last, so that the other weights draw the same initial values with or without it;
        # None adds no state-dict keys, so models without it load checkpoints that lack it.
        self.reconstruction = (
            ReconstructionHead(self.encoder, width) if cfg.reconstruction else None
        )
        # Buffers only (no parameters, so no initial values drawn); None for none / return_std.
        scaling = cfg.value_scaling
        self.value_scaling = (
            ValueScaling(scaling) if scaling not in (None, "none", "return_std") else None
        )
        self.register_load_state_dict_pre_hook(_rename_legacy_keys)
        self._compiled_step: Callable[..., Any] | None = None  # see compile_step

    def __getstate__(self) -> dict[str, Any]:
        # A compiled function neither pickles (Ray) nor deep-copies (export): copies run eager
        # until they are compiled themselves.
        state = dict(self.__dict__)
        state["_compiled_step"] = None
        return state

    def compile_step(self) -> None:
        """Run :meth:`act`'s network part through ``torch.compile`` from its next call.

        Sampling stays eager (it reads a ``torch.Generator``). Shapes are dynamic from the
        start: a rollout's batch grows by the final observations of time-limited episodes,
        and recompiling for each size costs more than the compiled steps save.
        """
        self._compiled_step = torch.compile(self._step_impl, dynamic=True)

    @property
    def continuous(self) -> bool:
        return isinstance(self.action_space, gym.spaces.Box)

    # ----------------------------------------------------------------- state
    def initial_state(self, batch_size: int, device: torch.device | str = "cpu") -> AgentState:
        critic = (
            None
            if self.critic_torso is None
            else self.critic_torso.initial_state(batch_size, device)
        )
        state = AgentState(self.actor_torso.initial_state(batch_size, device), critic)
        if self.prev_action_reward:
            state.prev_action = torch.zeros(
                batch_size, *self.dist.action_shape, dtype=self.dist.action_dtype, device=device
            )
            state.prev_reward = torch.zeros(batch_size, device=device)
        return state

    # ----------------------------------------------------------------- tokens
    def _features(
        self,
        obs: Tree,
        prev_action: torch.Tensor | None,
        prev_reward: torch.Tensor | None,
        episode_start: torch.Tensor,
    ) -> torch.Tensor:
        """Token features ``[*lead, in_dim]``; previous action/reward zeroed at episode starts."""
        x = self.encoder(obs)
        if not self.prev_action_reward:
            return x
        assert prev_action is not None and prev_reward is not None
        keep = (~episode_start.bool()).unsqueeze(-1).to(x.dtype)
        action = self.dist.features(prev_action.to(x.device)) * keep
        reward = prev_reward.to(x.device, x.dtype).unsqueeze(-1) * keep
        return torch.cat([x, action, reward], dim=-1)

    # ----------------------------------------------------------------- API
    @torch.no_grad()
    def act(
        self,
        obs: Tree,
        state: AgentState,
        episode_start: torch.Tensor,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
        action_mask: torch.Tensor | None = None,
    ) -> ActOutput:
        """One step for a batch of env slots; ``episode_start[b]`` marks a fresh episode.

        ``obs`` is a tensor (flat spaces) or a leaf dict of tensors (see spaces.py), batch first.
        ``action_mask [B, n]`` (bool) rules out the actions it marks False (distributions.py).
        """
        step = self._step_impl if self._compiled_step is None else self._compiled_step
        params, value, new_state = step(obs, state, episode_start, action_mask)
        action = self.dist.sample(params, deterministic, generator)
        log_prob, _ = self.dist.log_prob_entropy(params, action)
        return ActOutput(action, log_prob, value, self.remember_action(new_state, action))

    def remember_action(self, state: AgentState, action: torch.Tensor) -> AgentState:
        """``state`` (the step's next state) holding ``action`` as the previous action, with a
        zero reward until the env gives one (:meth:`AgentState.with_reward`); unchanged
        without ``model.prev_action_reward``."""
        if self.prev_action_reward:
            state.prev_action = action.to(self.dist.action_dtype)
            state.prev_reward = torch.zeros(action.shape[0], device=action.device)
        return state

    @torch.no_grad()
    def policy_step(
        self,
        obs: Tree,
        state: AgentState,
        episode_start: torch.Tensor,
        action_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, AgentState]:
        """Distribution parameters and next state of one step of the actor alone, for a trained
        policy that acts and never learns: a critic of its own (a centralised critic's encoder
        and torso, or ``shared_torso: false``) is not run, and its memory is carried unchanged
        (a state keeps its layout, whoever reads or stores it)."""
        _, latent, actor_mem = self._actor_step(obs, state, episode_start)
        return self._masked(self.policy_head(latent), action_mask), AgentState(
            actor_mem, state.critic
        )

    def _actor_step(
        self, obs: Tree, state: AgentState, episode_start: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, Memory | RecurrentState | None]:
        """Token features, the actor torso's latent and its next memory."""
        x = self._features(obs, state.prev_action, state.prev_reward, episode_start)
        latent, actor_mem = self.actor_torso.step(x, state.actor, episode_start)
        return x, latent, actor_mem

    def _masked(self, params: torch.Tensor, action_mask: torch.Tensor | None) -> torch.Tensor:
        return params if action_mask is None else self.dist.masked(params, action_mask)

    def _step_impl(
        self,
        obs: Tree,
        state: AgentState,
        episode_start: torch.Tensor,
        action_mask: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor, AgentState]:
        """Distribution parameters, values and next memory of one step: all of :meth:`act` but
        the sampling, which draws from a ``torch.Generator`` that a compiled graph cannot take."""
        x, latent, actor_mem = self._actor_step(obs, state, episode_start)
        if self.critic_torso is None:
            value_latent, critic_mem = latent, None
        else:
            critic_x = x if self.critic_encoder is None else self.critic_encoder(obs)
            value_latent, critic_mem = self.critic_torso.step(critic_x, state.critic, episode_start)
        params = self._masked(self.policy_head(latent), action_mask)
        value = self.value_head(value_latent).squeeze(-1)
        if self.value_scaling is not None:
            value = self.value_scaling.decode(value)
        return params, value, AgentState(actor_mem, critic_mem)

    def evaluate(
        self,
        obs: Tree,
        actions: torch.Tensor,
        state: AgentState,
        episode_start: torch.Tensor,
        rewards: torch.Tensor | None = None,
        action_mask: torch.Tensor | None = None,
    ) -> EvaluateOutput:
        """Log-probs, entropies and values of ``actions`` along sequences ``obs [B, T, ...]``.

        ``rewards [B, T]`` (as stored by the rollout) are needed with ``prev_action_reward``:
        step t's token holds action t-1 and reward t-1 (from ``state`` for t = 0).
        ``action_mask [B, T, n]``: the masks the rollout acted under, so that log-probabilities
        and entropies are those of the masked distribution it sampled from. With
        ``model.reconstruction`` it also returns each step's loss of decoding that step's
        observation from the actor's latent (reconstruction.py), for ``ppo.reconstruction_coef``.
        Values are in the value head's units (``model.value_scaling``; :meth:`act` decodes them
        to returns).
        """
        prev_action = prev_reward = None
        if self.prev_action_reward:
            if rewards is None or state.prev_action is None or state.prev_reward is None:
                raise ValueError("prev_action_reward needs the rewards and the start state's")
            prev_action = torch.cat([state.prev_action.unsqueeze(1), actions[:, :-1]], dim=1)
            prev_reward = torch.cat([state.prev_reward.unsqueeze(1), rewards[:, :-1]], dim=1)
        x = self._features(obs, prev_action, prev_reward, episode_start)
        latent, _ = self.actor_torso.sequence(x, state.actor, episode_start)
        if self.critic_torso is None:
            value_latent = latent
        else:
            critic_x = x if self.critic_encoder is None else self.critic_encoder(obs)
            value_latent, _ = self.critic_torso.sequence(critic_x, state.critic, episode_start)
        params = self.policy_head(latent)
        if action_mask is not None:
            params = self.dist.masked(params, action_mask)
        log_prob, entropy = self.dist.log_prob_entropy(params, actions)
        value = self.value_head(value_latent).squeeze(-1)
        if self.reconstruction is None:
            return EvaluateOutput(log_prob, entropy, value)
        target = self.reconstruction.target(self.encoder, obs)
        return EvaluateOutput(log_prob, entropy, value, self.reconstruction.error(latent, target))

    def env_action(self, action: torch.Tensor) -> np.ndarray:
        """Convert sampled actions ``[B, ...]`` to what ``env.step`` takes (Box: clipped)."""
        return self.dist.env_action(action.detach().cpu().numpy())

    # ----------------------------------------------------------------- normalisation
    def normalizers(self) -> dict[str, RunningMeanStd]:
        """Running statistics by name: ``obs/<leaf path>``, ``critic_obs/<leaf path>`` (the
        centralised critic's) and ``reward`` (when enabled)."""
        found = {f"obs/{path}": rms for path, rms in self.encoder.normalized_leaves().items()}
        if self.critic_encoder is not None:
            for path, rms in self.critic_encoder.normalized_leaves().items():
                found[f"critic_obs/{path}"] = rms
        if self.reward_norm is not None:
            found["reward"] = self.reward_norm
        return found

    def observation_moments(self, obs: Tree, rows: np.ndarray | None = None) -> dict[str, Moments]:
        """Moments of the normalised leaves of ``obs`` (arrays ``[*lead, ...]``), named as
        :meth:`normalizers` names them; ``rows``: a bool mask over the lead dimensions
        selecting the observations that count (multi-agent rows of absent agents do not)."""
        stats: dict[str, Moments] = {}
        for name, rms in self.normalizers().items():
            if name == "reward":
                continue
            path = name.partition("/")[2]
            leaf = obs[path] if isinstance(obs, dict) else obs
            if rows is not None:
                leaf = leaf[rows]
            stats[name] = moments(leaf, tuple(rms.mean.shape))
        return stats

    def merge_statistics(self, batch: dict[str, Moments]) -> None:
        """Fold a fragment's moments (see normalization.py) into the running statistics."""
        normalizers = self.normalizers()
        for name, seen in batch.items():
            normalizers[name].merge(seen)

    def scale_rewards(self, rewards: np.ndarray, unmerged: Moments | None = None) -> np.ndarray:
        """Rewards divided by the running return std and clipped (as is without the option);
        ``unmerged``: return moments to count in first (see :meth:`RunningMeanStd.scale`)."""
        rewards = np.asarray(rewards, dtype=np.float32)
        if self.reward_norm is None:
            return rewards
        scaled = rewards.astype(np.float64) * self.reward_norm.scale(unmerged)
        return np.clip(scaled, -self.reward_clip, self.reward_clip).astype(np.float32)

    def spec(self) -> dict[str, Any]:
        """Spaces needed to rebuild this model without an environment (stored in checkpoints)."""
        return {"observation_space": self.observation_space, "action_space": self.action_space}
