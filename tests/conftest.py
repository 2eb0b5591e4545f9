"""Shared test settings: one torch thread (2-core machines), tiny configs, temp run roots."""

from __future__ import annotations

import ast
import os
import tempfile
from collections.abc import Iterator
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
    """Check the Ray modules (below), run the shared Ray's tests together (further below) and
    skip tests marked gpu when CUDA is absent."""
    _check_ray_modules(items)
    _shared_ray_tests_first(items)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# Under pytest-xdist (``make test`` runs two workers), the tests marked ray form one scope: they
# run on one worker, one after another, so that no two Ray clusters (each told it owns both
# cores, with timeouts sized for that) start side by side. Every other test runs in a scope of
# its module (its module's tests outside the Ray scope), so that its module fixtures are built
# once. The scheduler sees only test ids, not marks, so the Ray tests are found in the modules'
# source: a module whose ``pytestmark`` names ray, or a test function or class whose decorators
# do. The collection hook checks that every test marked ray lies in the Ray scope.
TESTS = Path(__file__).parent
EVERY_TEST = "*"


def _is_ray_mark(node: ast.AST) -> bool:
    """Whether ``node`` (a decorator, a ``pytestmark`` value) mentions ``mark.ray``."""
    return any(
        isinstance(sub, ast.Attribute)
        and sub.attr == "ray"
        and isinstance(sub.value, ast.Attribute)
        and sub.value.attr == "mark"
        for sub in ast.walk(node)
    )


def _ray_tests(source: str) -> frozenset[str]:
    """The top-level names (test functions, classes) of a module marked ray, or EVERY_TEST."""
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            named = any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in targets)
            if named and node.value is not None and _is_ray_mark(node.value):
                return frozenset({EVERY_TEST})
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and any(
            _is_ray_mark(d) for d in node.decorator_list
        ):
            names.add(node.name)
    return frozenset(names)


RAY_TESTS = {
    path.relative_to(TESTS.parent).as_posix(): _ray_tests(path.read_text())
    for path in TESTS.rglob("test_*.py")
    if "mark.ray" in path.read_text()
}


def _in_ray_scope(nodeid: str) -> bool:
    module, *rest = nodeid.split("::")
    names = RAY_TESTS.get(module, frozenset())
    return EVERY_TEST in names or bool(rest) and rest[0].split("[")[0] in names


def _check_ray_modules(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("ray") and not _in_ray_scope(item.nodeid):
            raise pytest.UsageError(f"{item.nodeid} is marked ray outside the Ray tests found")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Scopes as above, scheduled by xdist's own scope scheduler."""
    from xdist.scheduler import LoadScopeScheduling

    class RayTestsTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "ray" if _in_ray_scope(nodeid) else nodeid.split("::")[0]

    return RayTestsTogether(config, log)


# The tests that need an embedded Ray in this process, and not a Ray of their own (one started
# by the code under test, a cluster, a CLI subprocess), share one: a 2-CPU local Ray started
# for the first of them and shut down after the last, through the fixture ``local_ray``.
# Workers see the repository (they import test modules: learners, envs of tests.reliability)
# and register the rlformer_test/* envs. Within the Ray scope its tests run first, one after
# another, so that it starts once and no test that starts a Ray of its own runs while it is up.
SHARED_RAY = "local_ray"
_shared_ray_started = False


def _uses_shared_ray(item: pytest.Item | None) -> bool:
    return item is not None and SHARED_RAY in getattr(item, "fixturenames", ())


def _shared_ray_tests_first(items: list[pytest.Item]) -> None:
    """Within the Ray scope, the shared Ray's tests first, each group in collection order."""
    slots = [i for i, item in enumerate(items) if _in_ray_scope(item.nodeid)]
    ordered = sorted((items[i] for i in slots), key=lambda item: not _uses_shared_ray(item))
    for i, item in zip(slots, ordered, strict=True):
        items[i] = item


def _start_shared_ray() -> None:
    global _shared_ray_started
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        return
    pythonpath = os.pathsep.join(p for p in (str(TESTS.parent), os.environ.get("PYTHONPATH")) if p)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        runtime_env={
            "env_vars": {"PYTHONPATH": pythonpath},
            "worker_process_setup_hook": "tests.reliability.tiny.register_test_envs",
        },
    )
    _shared_ray_started = True


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """The shared local Ray (above): up for every test that uses it, joined, never shut down
    by the tests themselves."""
    _start_shared_ray()
    yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After the last test in a row that uses the shared Ray (its fixtures torn down: Serve
    before Ray), shut it down."""
    global _shared_ray_started
    try:
        return (yield)
    finally:
        if _shared_ray_started and not _uses_shared_ray(nextitem):
            import ray

            if ray.is_initialized():
                ray.shutdown()
            _shared_ray_started = False
