"""Device selection and mixed precision: bf16 autocast on CUDA only.

On CPU, bf16 matmuls are far slower than fp32 on common hardware (about 1 vs 69 GFLOP/s measured on
our 2-core AVX2 machines), so autocast is a no-op there.
"""

from __future__ import annotations

import contextlib
from typing import Literal

import torch


def resolve_device(name: Literal["auto", "cpu", "cuda"] | str) -> torch.device:
    """``auto`` -> cuda when available else cpu; ``cuda`` without a GPU is a clear error.

    Resolving to CUDA also switches cuDNN to deterministic algorithms (:func:`deterministic_cudnn`).
    """
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            "device 'cuda' requested but torch sees no CUDA GPU; use device: auto or cpu"
        )
    if name not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {name!r}; use auto, cpu or cuda")
    if name == "cuda":
        deterministic_cudnn()
    return torch.device(name)


def deterministic_cudnn() -> None:
    """cuDNN's deterministic convolution algorithms, so a seeded CUDA run repeats exactly.

    Its default algorithms for a convolution's weight gradient may add in any order; a run
    killed and resumed on a GPU then drifted from the uninterrupted run in the fourth decimal
    (IMPALA CNN, PPO). Disabling the autotuner keeps the choice of algorithm fixed too.
    """
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def autocast_context(
    device: torch.device, precision: Literal["auto", "fp32", "bf16"] = "auto"
) -> contextlib.AbstractContextManager:
    """bf16 autocast for CUDA tensors under ``auto`` (or ``bf16``); plain fp32 otherwise.

    ``bf16`` on CPU is honoured but slow; ``fp32`` on CUDA keeps results equal (to float
    tolerance) to a CPU fp32 run, which PPO needs when CPU workers collect for a GPU learner.
    """
    use_bf16 = precision == "bf16" or (precision == "auto" and device.type == "cuda")
    if use_bf16:
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()
