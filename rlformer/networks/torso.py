"""Torsos: the part of a policy that turns observation features into a latent.

Both torsos share one calling convention so the actor-critic never branches on the kind:

* ``step(x [B, in], state, episode_start [B]) -> (latent [B, out], state)`` — one env step;
* ``sequence(x [B, T, in], state, episode_start [B, T]) -> (latent [B, T, out], state)`` — training.

For :class:`GTrXLTorso` the state is the core's :class:`~rlformer.core.Memory`; the core guarantees
that ``sequence`` from a stored start state equals ``step`` applied token by token, which is what
makes the PPO ratio exactly 1 in the first epoch. :class:`MLPTorso` has no state (``None``).
"""

from __future__ import annotations

import torch
from torch import nn

from rlformer.core import CoreConfig, Memory, MemoryCore


class GTrXLTorso(nn.Module):
    """Linear observation embedding followed by the memory-enabled attention core."""

    def __init__(self, in_dim: int, core_cfg: CoreConfig) -> None:
        super().__init__()
        self.embed = nn.Linear(in_dim, core_cfg.d_model)
        self.core = MemoryCore(core_cfg)
        self.out_dim = core_cfg.d_model

    def initial_state(self, batch_size: int, device: torch.device | str = "cpu") -> Memory:
        return self.core.initial_memory(batch_size, device=torch.device(device))

    def step(
        self, x: torch.Tensor, state: Memory, episode_start: torch.Tensor
    ) -> tuple[torch.Tensor, Memory]:
        out = self.core.step(self.embed(x), memory=state, episode_start=episode_start)
        return out.output, out.memory

    def sequence(
        self, x: torch.Tensor, state: Memory, episode_start: torch.Tensor
    ) -> tuple[torch.Tensor, Memory]:
        out = self.core(self.embed(x), memory=state, episode_start=episode_start)
        return out.output, out.memory


class MLPTorso(nn.Module):
    """Memoryless baseline: an MLP applied to each step independently."""

    def __init__(self, in_dim: int, hidden: list[int]) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = in_dim
        for size in hidden:
            layers += [nn.Linear(width, size), nn.Tanh()]
            width = size
        self.net = nn.Sequential(*layers)
        self.out_dim = width

    def initial_state(self, batch_size: int, device: torch.device | str = "cpu") -> None:
        return None

    def step(
        self, x: torch.Tensor, state: None, episode_start: torch.Tensor
    ) -> tuple[torch.Tensor, None]:
        return self.net(x), None

    def sequence(
        self, x: torch.Tensor, state: None, episode_start: torch.Tensor
    ) -> tuple[torch.Tensor, None]:
        return self.net(x), None
