"""Devices to run core tests on: CPU always, CUDA when present."""

from __future__ import annotations

import pytest
import torch

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> torch.device:
    if request.param == "cuda":
        # Exact comparisons need full fp32 matmuls (TF32 would add ~1e-3 noise).
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    return torch.device(request.param)
