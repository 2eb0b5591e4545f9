"""Shared test settings: one torch thread (2-core machines), tiny configs, temp run roots."""

from __future__ import annotations

import os
import tempfile

import pytest
import torch

# Small models run 10-20x slower with 2 threads on a loaded 2-core machine.
torch.set_num_threads(1)
os.environ.setdefault("RAY_DEDUP_LOGS", "0")
# The key that seals checkpointed env states lives under XDG_CONFIG_HOME: keep the tests' key
# out of the user's home (subprocesses inherit it, so CLI runs share it with in-process ones).
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="rlformer-test-config-")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip tests marked gpu when CUDA is absent (they run on GPU machines)."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
