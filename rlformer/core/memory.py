"""Transformer-XL segment memory, one tensor for all layers.

``hidden[l]`` holds the last M states that *entered* layer l (layer 0: the input tokens; layer l:
the output of layer l-1). ``valid[b, m]`` is True when slot m holds a state of row b's current
episode that is not padding; attention never looks at invalid slots.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class Memory(NamedTuple):
    """Per-layer memory ``hidden [L, B, M, d]`` and slot validity ``valid [B, M]``."""

    hidden: torch.Tensor
    valid: torch.Tensor

    @staticmethod
    def empty(
        n_layers: int,
        batch: int,
        length: int,
        width: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> Memory:
        return Memory(
            torch.zeros(n_layers, batch, length, width, device=device, dtype=dtype),
            torch.zeros(batch, length, dtype=torch.bool, device=device),
        )

    @property
    def batch_size(self) -> int:
        return int(self.valid.shape[0])

    def index(self, rows: torch.Tensor | slice) -> Memory:
        """Memory of a subset of batch rows."""
        return Memory(self.hidden[:, rows], self.valid[rows])

    def reset(self, rows_mask: torch.Tensor) -> Memory:
        """Invalidate every slot of the rows where ``rows_mask`` is True."""
        return Memory(self.hidden, self.valid & ~rows_mask.to(self.valid.device)[:, None])

    def to(self, device: torch.device | str) -> Memory:
        return Memory(self.hidden.to(device), self.valid.to(device))

    def detach(self) -> Memory:
        return Memory(self.hidden.detach(), self.valid)

    @staticmethod
    def cat(memories: list[Memory]) -> Memory:
        """Concatenate along the batch dimension."""
        return Memory(
            torch.cat([m.hidden for m in memories], dim=1),
            torch.cat([m.valid for m in memories], dim=0),
        )
