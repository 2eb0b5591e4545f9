"""Steps that are not data: a multi-agent row while its agent is absent (``Fragment.valid``).

The PPO loss averages its terms over the valid steps only and standardises the advantages over
them; the invalid steps' targets are first set where every term is finite and carries no
gradient, so that whatever an absent row holds cannot reach the update.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rlformer.networks.actor_critic import EvaluateOutput

Average = Callable[[torch.Tensor], torch.Tensor]


def neutral_targets(
    out: EvaluateOutput,
    valid: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    old_values: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """The batch's targets with the invalid steps' set where their terms are finite and carry
    no gradient (ratio 1, zero advantage, no value error): masking by multiplication alone would
    turn an infinite ratio from whatever an absent row holds into NaN."""
    log_prob, value = out.log_prob.detach(), out.value.detach()
    return {
        "old_log_probs": torch.where(valid, old_log_probs, log_prob),
        "advantages": torch.where(valid, advantages, torch.zeros_like(advantages)),
        "returns": torch.where(valid, returns, value),
        "old_values": torch.where(valid, old_values, value),
    }


def masked_mean(valid: torch.Tensor) -> Average:
    """The mean over the steps ``valid`` marks (1 where none is, so an empty batch averages 0)."""
    weights = valid.to(torch.float32)
    count = weights.sum().clamp_min(1.0)
    return lambda term: (term * weights).sum() / count


def masked_moments(
    advantages: torch.Tensor, valid: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and std of the valid steps' advantages ((0, 1), no scaling, for fewer than two)."""
    values = advantages[valid]
    if values.numel() <= 1:
        return torch.zeros((), device=advantages.device), torch.ones((), device=advantages.device)
    return values.mean(), values.std()
