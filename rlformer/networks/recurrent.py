"""LSTM and GRU torsos: the in-house recurrent baselines, on exactly the same PPO as GTrXL.

They follow the torso convention of :mod:`rlformer.networks.torso` (``step`` for rollouts,
``sequence`` for training from the state stored at the fragment start), so a comparison with
GTrXL differs in the torso only. The state is zeroed in every row where an episode starts.

``sequence`` runs cuDNN-style multi-step calls between episode boundaries: the time axis is cut
at every step where some row starts an episode, those rows' state is zeroed there, and each piece
goes through ``nn.LSTM`` / ``nn.GRU`` at once. That equals stepping token by token (tested), which
is what keeps the PPO ratio at 1 in the first epoch.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn


class RecurrentState(NamedTuple):
    """Hidden state ``h [layers, B, H]`` and, for an LSTM, cell state ``c`` (else None)."""

    h: torch.Tensor
    c: torch.Tensor | None = None

    def index(self, rows: torch.Tensor | slice) -> RecurrentState:
        return RecurrentState(self.h[:, rows], None if self.c is None else self.c[:, rows])

    def to(self, device: torch.device | str) -> RecurrentState:
        return RecurrentState(self.h.to(device), None if self.c is None else self.c.to(device))

    def reset(self, rows_mask: torch.Tensor) -> RecurrentState:
        """Zero the state of the rows where ``rows_mask [B]`` is True."""
        keep = (~rows_mask).to(self.h.dtype)[None, :, None]
        return RecurrentState(self.h * keep, None if self.c is None else self.c * keep)

    @staticmethod
    def cat(states: list[RecurrentState]) -> RecurrentState:
        """Concatenate along the batch dimension."""
        c = None if states[0].c is None else torch.cat([s.c for s in states], dim=1)
        return RecurrentState(torch.cat([s.h for s in states], dim=1), c)


class RecurrentTorso(nn.Module):
    """Linear embedding, then a (multi-layer) LSTM or GRU."""

    def __init__(self, in_dim: int, kind: str, hidden: int, layers: int) -> None:
        super().__init__()
        if kind not in ("lstm", "gru"):
            raise ValueError(f"recurrent torso must be lstm or gru, got {kind!r}")
        self.kind = kind
        self.embed = nn.Linear(in_dim, hidden)
        cell = nn.LSTM if kind == "lstm" else nn.GRU
        self.rnn = cell(hidden, hidden, num_layers=layers, batch_first=True)
        self.layers = layers
        self.out_dim = hidden

    def initial_state(self, batch_size: int, device: torch.device | str = "cpu") -> RecurrentState:
        zeros = torch.zeros(self.layers, batch_size, self.out_dim, device=device)
        return RecurrentState(zeros, zeros.clone() if self.kind == "lstm" else None)

    def _run(self, x: torch.Tensor, state: RecurrentState) -> tuple[torch.Tensor, RecurrentState]:
        # x: [B, T, H]; nn.LSTM wants (h, c), nn.GRU wants h.
        if self.kind == "lstm":
            out, (h, c) = self.rnn(x, (state.h.contiguous(), state.c.contiguous()))
            return out, RecurrentState(h, c)
        out, h = self.rnn(x, state.h.contiguous())
        return out, RecurrentState(h)

    def step(
        self, x: torch.Tensor, state: RecurrentState, episode_start: torch.Tensor
    ) -> tuple[torch.Tensor, RecurrentState]:
        out, state = self._run(self.embed(x)[:, None], state.reset(episode_start))
        return out[:, 0], state

    def step_unfused(
        self, x: torch.Tensor, state: RecurrentState, episode_start: torch.Tensor
    ) -> tuple[torch.Tensor, RecurrentState]:
        """:meth:`step` in plain products and gates, for export.

        ONNX exporters turn ``nn.LSTM`` into ONNX's LSTM operator, and the graph torch 2.11's
        exporter wrote for it was refused by onnxruntime 1.30 (a transpose of the wrong rank);
        products, sigmoids and tanhs export alike on every version. The GRU keeps the fused
        call, whose export onnxruntime runs. Equal to :meth:`step` up to float rounding
        (tested), not bit for bit, so rollouts and training keep the fused call.
        """
        if self.kind != "lstm":
            return self.step(x, state, episode_start)
        state = state.reset(episode_start)
        inputs = self.embed(x)
        hs, cs = [], []
        for layer in range(self.layers):
            gates = (
                inputs @ getattr(self.rnn, f"weight_ih_l{layer}").T
                + getattr(self.rnn, f"bias_ih_l{layer}")
                + state.h[layer] @ getattr(self.rnn, f"weight_hh_l{layer}").T
                + getattr(self.rnn, f"bias_hh_l{layer}")
            )
            i, f, g, o = gates.chunk(4, dim=-1)  # nn.LSTM's gate order
            c = torch.sigmoid(f) * state.c[layer] + torch.sigmoid(i) * torch.tanh(g)
            inputs = torch.sigmoid(o) * torch.tanh(c)
            hs.append(inputs)
            cs.append(c)
        return inputs, RecurrentState(torch.stack(hs), torch.stack(cs))

    def sequence(
        self, x: torch.Tensor, state: RecurrentState, episode_start: torch.Tensor
    ) -> tuple[torch.Tensor, RecurrentState]:
        tokens = self.embed(x)  # [B, T, H]
        steps = tokens.shape[1]
        # Cut the time axis where some row starts an episode (t = 0 always starts a piece).
        starts = episode_start.any(dim=0).nonzero().flatten().tolist()
        bounds = sorted({0, *starts, steps})
        pieces = []
        for begin, end in zip(bounds[:-1], bounds[1:], strict=True):
            state = state.reset(episode_start[:, begin])
            out, state = self._run(tokens[:, begin:end], state)
            pieces.append(out)
        return torch.cat(pieces, dim=1), state
