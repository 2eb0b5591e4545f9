"""Decision Transformer (Chen et al. 2021) on rlformer's memory-enabled attention core.

Each step t contributes three tokens, in this order: return-to-go ``R_t``, state ``s_t``, action
``a_t`` — each embedded by its own linear layer plus a learned embedding of the episode timestep.
The 3K tokens of a K-step window go through :class:`~rlformer.core.MemoryCore` with its causal
sliding-window mask, and ``a_t`` is predicted from the output at the ``s_t`` token, which can see
``R_0..R_t, s_0..s_t, a_0..a_{t-1}`` but never ``a_t`` or anything later.

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

import torch
from torch import nn

from rlformer.core import CoreConfig, Memory, MemoryCore

TOKENS_PER_STEP = 3


LOG_STD_BOUNDS = (-5.0, 2.0)
"""Range of a stochastic DT's log standard deviation (that of the Online DT paper)."""


class DTOutput(NamedTuple):
    """Action predictions and the core's new memory.

    ``action_preds`` is what a deterministic policy plays: the action in [-1, 1] (continuous) or
    the logits (discrete). A stochastic DT also returns the Gaussian it samples from before the
    tanh squashing: ``action_mean`` and ``action_log_std`` (both None for a plain DT).
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
    ) -> None:
        super().__init__()
        self.state_dim, self.act_dim, self.discrete = state_dim, act_dim, discrete
        self.stochastic = stochastic
        self.max_timestep = max_timestep
        d = core.d_model
        self.embed_return = nn.Linear(1, d)
        self.embed_state = nn.Linear(state_dim, d)
        # Discrete actions arrive as indices and are embedded by lookup (= linear on one-hot).
        self.embed_action: nn.Module = (
            nn.Embedding(act_dim, d) if discrete else nn.Linear(act_dim, d)
        )
        self.embed_timestep = nn.Embedding(max_timestep, d)
        self.embed_norm = nn.LayerNorm(d)
        self.core = MemoryCore(core)
        head: list[nn.Module] = [nn.Linear(d, act_dim)]
        if action_tanh and not discrete:
            head.append(nn.Tanh())  # continuous actions are normalised to [-1, 1]
        self.predict_action = nn.Sequential(*head)
        # Online DT: a state-dependent spread for continuous actions (discrete logits already
        # are a distribution). Separate from predict_action so a DT checkpoint loads into it.
        self.predict_log_std: nn.Module | None = (
            nn.Linear(d, act_dim) if stochastic and not discrete else None
        )

    def initial_memory(self, batch_size: int, device: torch.device | str = "cpu") -> Memory:
        return self.core.initial_memory(batch_size, device=torch.device(device))

    def embed(
        self,
        states: torch.Tensor,
        actions: torch.Tensor,
        returns_to_go: torch.Tensor,
        timesteps: torch.Tensor,
    ) -> torch.Tensor:
        """Interleaved token embeddings ``[B, 3K, d]`` in (R_t, s_t, a_t) order."""
        batch, steps = states.shape[:2]
        time = self.embed_timestep(timesteps.clamp(0, self.max_timestep - 1))  # [B, K, d]
        action_in = actions.long() if self.discrete else actions
        tokens = torch.stack(
            (
                self.embed_return(returns_to_go) + time,
                self.embed_state(states) + time,
                self.embed_action(action_in) + time,
            ),
            dim=2,
        )  # [B, K, 3, d]
        return self.embed_norm(tokens.reshape(batch, TOKENS_PER_STEP * steps, -1))  # [B, 3K, d]

    def forward(
        self,
        states: torch.Tensor,
        actions: torch.Tensor,
        returns_to_go: torch.Tensor,
        timesteps: torch.Tensor,
        mask: torch.Tensor | None = None,
        memory: Memory | None = None,
        episode_start: torch.Tensor | None = None,
    ) -> DTOutput:
        """Predict every step's action.

        Args:
            states: ``[B, K, state_dim]`` (normalised).
            actions: ``[B, K, act_dim]`` floats, or ``[B, K]`` indices when discrete.
            returns_to_go: ``[B, K, 1]`` (already divided by the return scale).
            timesteps: ``[B, K]`` episode step indices.
            mask: ``[B, K]`` True for real steps, False for padding.
            memory: core memory from the previous window of the same episodes (memory DT).
            episode_start: ``[B]`` True where this window starts a new episode (memory DT).
        """
        batch, steps = states.shape[:2]
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
    action_preds: torch.Tensor, actions: torch.Tensor, mask: torch.Tensor, discrete: bool
) -> torch.Tensor:
    """MSE (continuous) or cross-entropy (discrete) over real (unpadded) steps only."""
    real = mask.bool()
    if discrete:
        return nn.functional.cross_entropy(action_preds[real], actions[real].long())
    return (action_preds[real] - actions[real]).pow(2).mean()
