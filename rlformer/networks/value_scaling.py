"""How the value head's outputs relate to returns, and the statistics that scale advantages
(``model.value_scaling``; reward normalisation itself is :class:`RunningMeanStd` on rewards).

The value head predicts in its own units; :meth:`ValueScaling.decode` turns its output into a
return (what the rollout stores and GAE reads) and :meth:`ValueScaling.encode` turns returns into
the head's units (the value loss's targets):

* ``symlog``: the head predicts ``symlog(return)`` (Hafner et al. 2023, "Robust predictions"),
  ``symlog(x) = sign(x) log(1 + |x|)``, decoded with its inverse ``symexp``;
* ``popart``: the head predicts ``(return - mu) / sigma`` (van Hasselt et al. 2016, "Learning
  values across many orders of magnitude"); each update first moves ``mu`` and ``sigma`` towards
  the batch's returns, then rescales the head's last layer so that its decoded outputs stay what
  they were ("Preserving outputs precisely"): ``w' = w sigma / sigma'``,
  ``b' = (sigma b + mu - mu') / sigma'``;
* ``percentile``: the head predicts returns as they are; advantages are divided by
  ``max(1, high - low)``, where ``low`` and ``high`` are exponential moving averages (decay 0.99,
  from 0) of the 5th and 95th percentiles of each update's returns (Hafner et al. 2023, "Return
  normalization"), in place of the per-minibatch standardisation of ``ppo.norm_adv``;
* ``symlog_percentile``: both of the above, DreamerV3's own pairing.

The statistics are buffers of the model, so they travel with the weights to the rollout workers
and into checkpoints; a model without them adds no state-dict keys.
"""

from __future__ import annotations

import torch
from torch import nn

PERCENTILE_DECAY = 0.99
"""Per-update decay of the percentile EMAs (DreamerV3's rate of 0.01)."""
PERCENTILES = (0.05, 0.95)
POPART_DECAY = 0.99
"""Per-update decay of PopArt's moments (bias-corrected, so the first update uses its batch's)."""
POPART_MIN_SIGMA = 1e-4
"""PopArt's scale is kept at least this (the paper clips sigma to [1e-4, 1e6])."""


def symlog(x: torch.Tensor) -> torch.Tensor:
    """``sign(x) * log(1 + |x|)``."""
    return torch.sign(x) * torch.log1p(x.abs())


def symexp(x: torch.Tensor) -> torch.Tensor:
    """``sign(x) * (exp(|x|) - 1)``, the inverse of :func:`symlog`."""
    return torch.sign(x) * torch.expm1(x.abs())


class ValueScaling(nn.Module):
    """The value head's units and the advantage scale of one ``model.value_scaling`` choice.

    Built only for the choices that need it (``percentile``, ``symlog``, ``symlog_percentile``,
    ``popart``); ``none`` and ``return_std`` use the head's outputs as returns.
    """

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.symlog = kind in ("symlog", "symlog_percentile")
        self.percentile = kind in ("percentile", "symlog_percentile")
        self.popart = kind == "popart"
        if self.percentile:
            # EMAs of the 5th and 95th return percentiles, from 0 as in DreamerV3.
            self.register_buffer("return_low", torch.zeros((), dtype=torch.float64))
            self.register_buffer("return_high", torch.zeros((), dtype=torch.float64))
        if self.popart:
            # Bias-corrected EMAs of the return's first and second moments.
            self.register_buffer("popart_mean", torch.zeros((), dtype=torch.float64))
            self.register_buffer("popart_square", torch.ones((), dtype=torch.float64))
            self.register_buffer("popart_updates", torch.zeros((), dtype=torch.float64))

    # ----------------------------------------------------------------- head units
    def popart_stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """PopArt's ``(mu, sigma)`` (float64): ``(0, 1)`` before its first update."""
        mean = self.popart_mean.clone()  # a copy: update() reads it after changing the buffer
        variance = (self.popart_square - mean.square()).clamp_min(0.0)
        return mean, variance.sqrt().clamp_min(POPART_MIN_SIGMA)

    def decode(self, head: torch.Tensor) -> torch.Tensor:
        """Returns from the head's outputs."""
        if self.symlog:
            return symexp(head)
        if self.popart:
            mean, sigma = self.popart_stats()
            return (head * sigma.to(head.dtype) + mean.to(head.dtype)).to(head.dtype)
        return head

    def encode(self, returns: torch.Tensor) -> torch.Tensor:
        """The head's outputs that decode to ``returns`` (the value loss's targets)."""
        if self.symlog:
            return symlog(returns)
        if self.popart:
            mean, sigma = self.popart_stats()
            return ((returns - mean.to(returns.dtype)) / sigma.to(returns.dtype)).to(returns.dtype)
        return returns

    # ----------------------------------------------------------------- statistics
    @torch.no_grad()
    def update(self, returns: torch.Tensor, head: nn.Linear) -> None:
        """Fold one update's ``returns`` (every step of its batch) into the statistics; for
        PopArt, rescale ``head`` so that its decoded outputs do not change."""
        flat = returns.detach().reshape(-1).to(torch.float64)
        if self.percentile:
            levels = torch.tensor(PERCENTILES, dtype=torch.float64, device=flat.device)
            low, high = torch.quantile(flat, levels)
            decay = PERCENTILE_DECAY
            self.return_low.copy_(decay * self.return_low + (1 - decay) * low)
            self.return_high.copy_(decay * self.return_high + (1 - decay) * high)
        if self.popart:
            old_mean, old_sigma = self.popart_stats()
            # Bias-corrected EMA: the raw EMAs start at 0 and are divided by 1 - decay^n.
            n = self.popart_updates + 1
            decay = POPART_DECAY
            raw = decay * (1 - decay ** (n - 1))  # raw EMA before this update = raw * estimate
            first = (raw * self.popart_mean + (1 - decay) * flat.mean()) / (1 - decay**n)
            second = (raw * self.popart_square + (1 - decay) * flat.square().mean()) / (
                1 - decay**n
            )
            self.popart_mean.copy_(first)
            self.popart_square.copy_(second)
            self.popart_updates.copy_(n)
            new_mean, new_sigma = self.popart_stats()
            weight = head.weight.double() * (old_sigma / new_sigma)
            bias = (old_sigma * head.bias.double() + old_mean - new_mean) / new_sigma
            head.weight.copy_(weight.to(head.weight.dtype))
            head.bias.copy_(bias.to(head.bias.dtype))

    def advantage_scale(self) -> float:
        """What advantages are divided by: ``max(1, high - low)`` (1 without percentiles)."""
        if not self.percentile:
            return 1.0
        return max(1.0, float(self.return_high - self.return_low))
