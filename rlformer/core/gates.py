"""GTrXL gating layers g(x, y): x is the skip stream, y the sub-layer output.

From Parisotto et al. 2019, "Stabilizing Transformers for Reinforcement Learning".

All gates map ``[..., d] x [..., d] -> [..., d]``. ``gate_bias`` (b_g) is initialised so the gated
block starts near the identity, which is what lets GTrXL learn reactive behaviour first.
"""

from __future__ import annotations

import torch
from torch import nn

from rlformer.core.config import GateType


class GRUGate(nn.Module):
    """r = σ(W_r y + U_r x); z = σ(W_z y + U_z x - b_g); ĥ = tanh(W_g y + U_g (r ⊙ x));
    g = (1 - z) ⊙ x + z ⊙ ĥ."""

    def __init__(self, width: int, gate_bias: float) -> None:
        super().__init__()
        self.w = nn.Linear(width, 3 * width, bias=False)  # W_r, W_z, W_g stacked
        self.u_rz = nn.Linear(width, 2 * width, bias=False)  # U_r, U_z stacked
        self.u_g = nn.Linear(width, width, bias=False)
        self.gate_bias = nn.Parameter(torch.full((width,), gate_bias))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        wr, wz, wg = self.w(y).chunk(3, dim=-1)
        ur, uz = self.u_rz(x).chunk(2, dim=-1)
        r = torch.sigmoid(wr + ur)
        z = torch.sigmoid(wz + uz - self.gate_bias)
        candidate = torch.tanh(wg + self.u_g(r * x))
        return (1 - z) * x + z * candidate


class InputGate(nn.Module):
    """g = σ(W_g x) ⊙ x + y."""

    def __init__(self, width: int, gate_bias: float) -> None:
        super().__init__()
        self.w = nn.Linear(width, width)
        nn.init.constant_(self.w.bias, gate_bias)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.w(x)) * x + y


class OutputGate(nn.Module):
    """g = x + σ(W_g x - b_g) ⊙ y."""

    def __init__(self, width: int, gate_bias: float) -> None:
        super().__init__()
        self.w = nn.Linear(width, width, bias=False)
        self.gate_bias = nn.Parameter(torch.full((width,), gate_bias))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + torch.sigmoid(self.w(x) - self.gate_bias) * y


class HighwayGate(nn.Module):
    """g = σ(W_g x + b_g) ⊙ x + (1 - σ(W_g x + b_g)) ⊙ y."""

    def __init__(self, width: int, gate_bias: float) -> None:
        super().__init__()
        self.w = nn.Linear(width, width, bias=False)
        self.gate_bias = nn.Parameter(torch.full((width,), gate_bias))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        carry = torch.sigmoid(self.w(x) + self.gate_bias)
        return carry * x + (1 - carry) * y


class SigmoidTanhGate(nn.Module):
    """g = x + σ(W_g y - b_g) ⊙ tanh(U_g y)."""

    def __init__(self, width: int, gate_bias: float) -> None:
        super().__init__()
        self.w = nn.Linear(width, width, bias=False)
        self.u = nn.Linear(width, width, bias=False)
        self.gate_bias = nn.Parameter(torch.full((width,), gate_bias))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + torch.sigmoid(self.w(y) - self.gate_bias) * torch.tanh(self.u(y))


GATES: dict[str, type[nn.Module]] = {
    "gru": GRUGate,
    "input": InputGate,
    "output": OutputGate,
    "highway": HighwayGate,
    "sigmoid_tanh": SigmoidTanhGate,
}


def make_gate(kind: GateType, width: int, gate_bias: float) -> nn.Module:
    return GATES[kind](width, gate_bias)
