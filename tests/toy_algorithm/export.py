"""The toy's export step: the linear layer as a graph, with a categorical sampling entry."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from rlformer.export.metadata import common_metadata
from rlformer.export.spec import (
    BATCH,
    TensorSpec,
    input_valid,
    input_valid_spec,
    observation_specs,
)
from tests.toy_algorithm.policy import LinearPolicy


class LinearStep(nn.Module):
    def __init__(self, policy: LinearPolicy) -> None:
        super().__init__()
        self.register_buffer("weight", policy.weight.clone())
        self.register_buffer("bias", policy.bias.clone())
        self.n = int(policy.action_space.n)
        self.start = int(policy.action_space.start)
        self.leaves = {"": policy.observation_space}
        self.inputs = observation_specs(policy.observation_space, self.leaves)
        self.outputs = [
            TensorSpec("action", (BATCH,), "int64"),
            TensorSpec("logits", (BATCH, self.n), "float32"),
            input_valid_spec(),
        ]

    def mask_components(self) -> list[int]:
        return [self.n]

    def metadata(self, policy: Any) -> dict[str, Any]:
        sampling = {
            "distribution": "categorical",
            "logits": "logits",
            "nvec": [self.n],
            "start": [self.start],
            "shape": [],
            "dtype": "int64",
            "model_action_state": None,
        }
        return {**common_metadata(policy, self, "toy"), "sampling": sampling}

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        (obs,) = tensors  # the writer passes the inputs in order, as one variadic argument
        x = obs.reshape(obs.shape[0], -1).float()
        logits = x @ self.weight.T + self.bias
        return logits.argmax(dim=1) + self.start, logits, input_valid([obs], None, [self.n])


def export_step(policy: Any) -> LinearStep:
    if not isinstance(policy, LinearPolicy):
        raise TypeError(f"a toy policy is a LinearPolicy, not {type(policy).__name__}")
    return LinearStep(policy)
