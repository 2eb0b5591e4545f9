"""Shared test settings: one torch thread (2-core machines), tiny configs, temp run roots."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
import torch

# Small models run 10-20x slower with 2 threads on a loaded 2-core machine.
torch.set_num_threads(1)
os.environ.setdefault("RAY_DEDUP_LOGS", "0")
# The key that seals checkpointed env states lives under XDG_CONFIG_HOME: keep the tests' key
# out of the user's home (subprocesses inherit it, so CLI runs share it with in-process ones).
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="rlformer-test-config-")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Check the Ray modules (below) and skip tests marked gpu when CUDA is absent."""
    _check_ray_modules(items)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# Under pytest-xdist (``make test`` runs two workers), the modules that hold a test marked ray
# form one scope: they run on one worker, one after another, so that no two Ray clusters (each
# told it owns both cores, with timeouts sized for that) start side by side. Every other module
# is a scope of its own, so that its module fixtures are built once. The scheduler sees only
# test ids, not marks, so the Ray modules are found by their text; the collection hook checks
# that every test marked ray lies in one of them.
TESTS = Path(__file__).parent
RAY_MODULES = frozenset(
    path.relative_to(TESTS.parent).as_posix()
    for path in TESTS.rglob("test_*.py")
    if "mark.ray" in path.read_text()
)


def _check_ray_modules(items: list[pytest.Item]) -> None:
    for item in items:
        module = item.nodeid.split("::")[0]
        if item.get_closest_marker("ray") and module not in RAY_MODULES:
            raise pytest.UsageError(f"{item.nodeid} is marked ray outside the modules found")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Scopes as above, scheduled by xdist's own scope scheduler."""
    from xdist.scheduler import LoadScopeScheduling

    class RayModulesTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::")[0]
            return "ray" if module in RAY_MODULES else module

    return RayModulesTogether(config, log)
