"""Finding non-finite values in losses, gradients and parameters, and naming where they are.

A NaN that reaches the optimiser silently destroys a run; a message that names the tensor and
the iteration tells the user whether the data, the learning rate or the model is at fault.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch
from torch import nn


class NonFiniteError(RuntimeError):
    """A NaN or infinity in a loss, gradient, parameter or env data; the message says where."""


def _describe(tensor: torch.Tensor) -> str:
    bad = tensor[~torch.isfinite(tensor)]
    count = int(bad.numel())
    return f"{float(bad.flatten()[0]):g} ({count} of {tensor.numel()} values non-finite)"


def nonfinite_loss(loss: torch.Tensor, parts: Mapping[str, torch.Tensor]) -> str | None:
    """``None`` when ``loss`` is finite, else the first of its terms ``parts`` that is not."""
    if bool(torch.isfinite(loss).all()):
        return None
    for name, value in parts.items():
        if not bool(torch.isfinite(value).all()):
            return f"{name} is {_describe(value.detach().reshape(-1))}"
    return f"the loss is {float(loss):g}"


def nonfinite_gradient(model: nn.Module, total_norm: torch.Tensor) -> str | None:
    """``None`` when the gradient norm is finite, else the first parameter with a bad gradient."""
    if bool(torch.isfinite(total_norm)):
        return None
    return (
        _first_bad((f"the gradient of {name}", p.grad) for name, p in model.named_parameters())
        or f"the gradient norm is {float(total_norm):g}"
    )


def nonfinite_parameter(model: nn.Module) -> str | None:
    """``None`` when every parameter is finite, else the first one that is not."""
    return _first_bad((f"parameter {name}", p.detach()) for name, p in model.named_parameters())


def _first_bad(named: Iterable[tuple[str, torch.Tensor | None]]) -> str | None:
    for name, tensor in named:
        if tensor is not None and not bool(torch.isfinite(tensor).all()):
            return f"{name} is {_describe(tensor.reshape(-1))}"
    return None
