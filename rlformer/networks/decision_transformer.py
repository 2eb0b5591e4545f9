"""Decision Transformer (Chen et al. 2021) on rlformer's memory-enabled attention core.

Each step t contributes three tokens, in this order: return-to-go ``R_t``, state ``s_t``, action
``a_t`` — each embedded by its own linear layer plus a learned embedding of the episode timestep.
The 3K tokens of a K-step window go through :class:`~rlformer.core.MemoryCore` with its causal
sliding-window mask, and ``a_t`` is predicted from the output at the ``s_t`` token, which can see
``R_0..R_t, s_0..s_t, a_0..a_{t-1}`` but never ``a_t`` or anything later.

States are flat vectors, or (with an ``encoder``) observation trees read by PPO's per-leaf
:class:`~rlformer.networks.encoders.ObservationEncoder` (CNNs for images, one-hot discrete leaves);
actions are Box, Discrete, MultiDiscrete or MultiBinary, each with its own token and head
(:mod:`rlformer.networks.dt_spaces`).

With ``condition_on_return=False`` the same network is a behaviour-cloning baseline: every
return-to-go input is replaced by zero before it is embedded, so the tokens, attention and compute
are unchanged but no action can depend on a target (the DT paper's comparison with behaviour
cloning, without a second architecture to tune). With ``timestep_embedding=False`` every timestep
input is replaced by zero likewise: a model without an absolute clock, so that a plain DT cannot
infer from the step number what happened before its window.

Two ways to use it:

* plain DT: ``forward`` on a left-padded window with no memory (``core.memory_length`` >= 3K so
  the window never cuts the context);
* memory DT: consecutive K-step windows of one episode, passing the returned memory into the next
  call, so attention reaches further back than K (up to ``memory_length`` tokens per layer).

Example:
    >>> from rlformer.core import CoreConfig
    >>> dt = DecisionTransformer(state_dim=3, act_dim=2, discrete=False,
    ...                          core=CoreConfig(n_layers=1, d_model=16, n_heads=1, d_ff=32,
    ...                                          memory_length=12))
    >>> out = dt(torch.zeros(2, 4, 3), torch.zeros(2, 4, 2), torch.zeros(2, 4, 1),
    ...          torch.zeros(2, 4, dtype=torch.long))
    >>> out.action_preds.shape
    torch.Size([2, 4, 2])
"""

from __future__ import annotations

from typing import NamedTuple

import gymnasium as gym
import torch
from torch import nn

from rlformer.core import CoreConfig, Memory, MemoryCore
from rlformer.core.device import autocast_context
from rlformer.networks.distributions import (
    ActionDistribution,
    Bernoulli,
    Categorical,
    MultiCategorical,
)
from rlformer.networks.dt_spaces import ActionKind
from rlformer.networks.spaces import Tree, tree_first

TOKENS_PER_STEP = 3


LOG_STD_BOUNDS = (-5.0, 2.0)
"""Range of a stochastic DT's log standard deviation (that of the Online DT paper)."""


class DTOutput(NamedTuple):
    """Action predictions and the core's new memory.

    ``action_preds`` is what a deterministic policy plays: the action in [-1, 1] (continuous) or
    the logits (Discrete, MultiDiscrete, MultiBinary). A stochastic DT also returns the
    Gaussian it samples continuous actions from before the tanh squashing: ``action_mean`` and
    ``action_log_std`` (both None otherwise).
    """

    action_preds: torch.Tensor  # [B, K, act_dim]
    memory: Memory
    action_mean: torch.Tensor | None = None  # [B, K, act_dim], before tanh
    action_log_std: torch.Tensor | None = None  # [B, K, act_dim]


class DecisionTransformer(nn.Module):
    """Return-conditioned sequence model: (R, s, a) tokens -> action predicted at each s token."""

    def __init__(
        self,
        state_dim: int,
        act_dim: int,
        discrete: bool,
        core: CoreConfig,
        max_timestep: int = 4096,
        action_tanh: bool = True,
        stochastic: bool = False,
        *,
        action_kind: ActionKind | None = None,
        action_nvec: list[int] | None = None,
        encoder: nn.Module | None = None,
        condition_on_return: bool = True,
        timestep_embedding: bool = True,
    ) -> None:
        """``action_kind`` defaults to ``discrete`` or ``box`` as ``discrete`` says (a
        MultiDiscrete head also needs ``action_nvec``); ``encoder`` turns observation trees into
        ``state_dim`` features (None: states are flat vectors of ``state_dim`` values);
        ``condition_on_return=False`` zeroes every return-to-go input (behaviour cloning);
        ``timestep_embedding=False`` every timestep input (no absolute clock)."""
        super().__init__()
        self.condition_on_return = condition_on_return
        self.timestep_embedding = timestep_embedding
        kind: ActionKind = action_kind or ("discrete" if discrete else "box")
        self.action_kind = kind
        self.state_dim, self.act_dim, self.discrete = state_dim, act_dim, kind == "discrete"
        self.action_nvec = [act_dim] if action_nvec is None else [int(n) for n in action_nvec]
        if kind == "multidiscrete" and sum(self.action_nvec) != act_dim:
            raise ValueError(f"act_dim {act_dim} is not the sum of nvec {self.action_nvec}")
        self.stochastic = stochastic
        self.max_timestep = max_timestep
        d = core.d_model
        self.embed_return = nn.Linear(1, d)
        self.encoder = encoder
        self.embed_state = nn.Linear(state_dim, d)
        self.embed_action = self._action_embedding(d)
        self.embed_timestep = nn.Embedding(max_timestep, d)
        self.embed_norm = nn.LayerNorm(d)
        self.core = MemoryCore(core)
        head: list[nn.Module] = [nn.Linear(d, act_dim)]
        if action_tanh and kind == "box":
            head.append(nn.Tanh())  # continuous actions are normalised to [-1, 1]
        self.predict_action = nn.Sequential(*head)
        # Online DT: a state-dependent spread for continuous actions (logits already are a
        # distribution). Separate from predict_action so a DT checkpoint loads into it.
        self.predict_log_std: nn.Module | None = (
            nn.Linear(d, act_dim) if stochastic and kind == "box" else None
        )

    def _action_embedding(self, d: int) -> nn.Module:
        """The action token's layer: a lookup for indices (= linear on one-hots), linear on
        Box actions and on bits. A MultiDiscrete action sums its components' embeddings, kept
        in one table at each component's offset."""
        kind = self.action_kind
        if kind == "multidiscrete":
            offsets = torch.tensor([0, *self.action_nvec[:-1]]).cumsum(0)
            self.register_buffer("action_offsets", offsets, persistent=False)
        if kind in ("discrete", "multidiscrete"):
            return nn.Embedding(self.act_dim, d)
        return nn.Linear(self.act_dim, d)

    @property
    def action_distribution(self) -> ActionDistribution | None:
        """The distribution over the head's logits, None for Box actions: PPO's per-space
        distributions, whose log-probabilities and entropies sum over components."""
        kind = self.action_kind
        if kind == "discrete":
            return Categorical(gym.spaces.Discrete(self.act_dim))
        if kind == "multidiscrete":
            return MultiCategorical(gym.spaces.MultiDiscrete(self.action_nvec))
        if kind == "multibinary":
            return Bernoulli(gym.spaces.MultiBinary(self.act_dim))
        return None

    def initial_memory(self, batch_size: int, device: torch.device | str = "cpu") -> Memory:
        return self.core.initial_memory(batch_size, device=torch.device(device))

    def embed(
        self,
        states: Tree,
        actions: torch.Tensor,
        returns_to_go: torch.Tensor,
        timesteps: torch.Tensor,
    ) -> torch.Tensor:
        """Interleaved token embeddings ``[B, 3K, d]`` in (R_t, s_t, a_t) order; the return
        tokens embed zeros when the model does not condition on returns."""
        batch, steps = tree_first(states).shape[:2]
        if not self.condition_on_return:  # behaviour cloning: no target reaches the network
            returns_to_go = torch.zeros_like(returns_to_go)
        if not self.timestep_embedding:  # no clock: the step number cannot stand in for memory
            timesteps = torch.zeros_like(timesteps)
        time = self.embed_timestep(timesteps.clamp(0, self.max_timestep - 1))  # [B, K, d]
        features = states
        if self.encoder is not None:  # at the core's precision (bf16 on CUDA under "auto")
            with autocast_context(timesteps.device, self.core.cfg.precision):
                features = self.encoder(states).float()
        tokens = torch.stack(
            (
                self.embed_return(returns_to_go) + time,
                self.embed_state(features) + time,
                self.embed_actions(actions) + time,
            ),
            dim=2,
        )  # [B, K, 3, d]
        return self.embed_norm(tokens.reshape(batch, TOKENS_PER_STEP * steps, -1))  # [B, 3K, d]

    def embed_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """``[B, K, d]`` embeddings of model-space actions (see the module docstring)."""
        kind = self.action_kind
        if kind == "discrete":
            return self.embed_action(actions.long())
        if kind == "multidiscrete":
            return self.embed_action(actions.long() + self.action_offsets).sum(-2)
        return self.embed_action(actions if kind == "box" else actions.float())

    def forward(
        self,
        states: Tree,
        actions: torch.Tensor,
        returns_to_go: torch.Tensor,
        timesteps: torch.Tensor,
        mask: torch.Tensor | None = None,
        memory: Memory | None = None,
        episode_start: torch.Tensor | None = None,
    ) -> DTOutput:
        """Predict every step's action.

        Args:
            states: ``[B, K, state_dim]`` (normalised), or with an encoder a tree of
                ``[B, K, *leaf]`` arrays (:class:`~rlformer.networks.dt_spaces.StateLayout`).
            actions: ``[B, K, act_dim]`` floats (Box, MultiBinary), ``[B, K]`` indices
                (Discrete) or ``[B, K, components]`` indices (MultiDiscrete).
            returns_to_go: ``[B, K, 1]`` (already divided by the return scale).
            timesteps: ``[B, K]`` episode step indices.
            mask: ``[B, K]`` True for real steps, False for padding.
            memory: core memory from the previous window of the same episodes (memory DT).
            episode_start: ``[B]`` True where this window starts a new episode (memory DT).
        """
        batch, steps = tree_first(states).shape[:2]
        tokens = self.embed(states, actions, returns_to_go, timesteps)
        padding = None
        if mask is not None:
            padding = (~mask.bool()).repeat_interleave(TOKENS_PER_STEP, dim=1)  # [B, 3K]
        token_start = None
        if episode_start is not None:
            token_start = torch.zeros(
                batch, TOKENS_PER_STEP * steps, dtype=torch.bool, device=tokens.device
            )
            token_start[:, 0] = episode_start
        # Actions are read from the state tokens only, so the last layer computes just those.
        state_tokens = torch.arange(
            1, TOKENS_PER_STEP * steps, TOKENS_PER_STEP, device=tokens.device
        )
        out = self.core(
            tokens,
            memory=memory,
            episode_start=token_start,
            padding_mask=padding,
            output_index=state_tokens,
        )
        hidden = out.output  # [B, K, d]
        if self.predict_log_std is None:
            return DTOutput(self.predict_action(hidden), out.memory)
        mean = self.predict_action[0](hidden)
        squash = torch.tanh(self.predict_log_std(hidden))  # bounded smoothly, as in ODT
        low, high = LOG_STD_BOUNDS
        log_std = low + 0.5 * (high - low) * (squash + 1.0)
        return DTOutput(torch.tanh(mean), out.memory, mean, log_std)


def dt_loss(
    action_preds: torch.Tensor,
    actions: torch.Tensor,
    mask: torch.Tensor,
    discrete: bool | ActionKind,
    nvec: list[int] | None = None,
) -> torch.Tensor:
    """The imitation loss over real (unpadded) steps: MSE (continuous), cross-entropy
    (discrete), or per step the sum of the components' cross-entropies (MultiDiscrete, whose
    ``nvec`` it needs, and MultiBinary). ``discrete`` is a bool or the action kind."""
    kind = discrete if isinstance(discrete, str) else ("discrete" if discrete else "box")
    real = mask.bool()
    if kind == "discrete":
        return nn.functional.cross_entropy(action_preds[real], actions[real].long())
    if kind == "box":
        return (action_preds[real] - actions[real]).pow(2).mean()
    logits, target = action_preds[real].float(), actions[real]
    if kind == "multibinary":
        bits = nn.functional.binary_cross_entropy_with_logits(
            logits, target.float(), reduction="none"
        )
        return bits.sum(-1).mean()
    if nvec is None:
        raise ValueError("the loss of MultiDiscrete actions needs their nvec")
    parts = [
        nn.functional.cross_entropy(component, target[..., k].long())
        for k, component in enumerate(logits.split(nvec, dim=-1))
    ]
    return torch.stack(parts).sum()
