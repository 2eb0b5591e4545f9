"""Shared test settings: one torch thread (2-core machines), tiny configs, temp run roots."""

from __future__ import annotations

import ast
import atexit
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

# Small models run 10-20x slower with 2 threads on a loaded 2-core machine.
torch.set_num_threads(1)
# Subprocesses (CLI runs, Ray workers) start with one OpenMP thread too.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")
# Serve's HTTP proxy gets 60 s to start, not 5: under the suite's load its process can take
# longer, and Serve then kills it and ``serve.start`` fails (rlformer.serve.launch says more).
os.environ.setdefault("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", "60")
# Ray's metrics collection (Prometheus export) is two thirds of an idle Serve instance's CPU and
# two fifths of an idle Ray's; no test reads those metrics, and the suite is CPU-bound.
os.environ.setdefault("RAY_enable_metrics_collection", "0")
# A new Ray starts one idle worker process per CPU ahead of any task (and again for its first
# driver): 2-4 s of CPU for each of the suite's Ray starts (a bare ray.init: 7.5-9.6 s of CPU
# with them, 5.6 s without), for workers no test asks for: the tests' actors carry runtime
# environments of their own, which the prestarted workers do not have.
os.environ.setdefault("RAY_enable_worker_prestart", "0")
os.environ.setdefault("RAY_prestart_worker_first_driver", "0")
# One scratch folder per test process, removed when it exits. The key that seals checkpointed
# env states lives under XDG_CONFIG_HOME: keep the tests' key out of the user's home
# (subprocesses inherit it, so CLI runs share it with in-process ones). SB3's logger makes a
# folder per model trained unless SB3_LOGDIR names one.
_SCRATCH = Path(tempfile.mkdtemp(prefix="rlformer-tests-"))
atexit.register(shutil.rmtree, _SCRATCH, ignore_errors=True)
os.environ["XDG_CONFIG_HOME"] = str(_SCRATCH / "config")
os.environ.setdefault("SB3_LOGDIR", str(_SCRATCH / "sb3"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Check the Ray modules (below), start the long modules first, run the shared Ray's tests
    together (further below) and skip tests marked gpu when CUDA is absent."""
    _check_ray_modules(items)
    _long_modules_first(items)
    _shared_ray_tests_first(items)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# Under pytest-xdist (``make test`` runs several workers), the tests that use the shared local Ray
# (below) form two scopes: the modules that serve in-process over HTTP (on one Serve instance,
# tests/serve/shared_serve.py), and the others (learner groups, rollouts, faults). Each scope
# runs on one worker, one test after another, so that its Ray starts once. Apart, neither is
# the suite's critical path (in a fresh-clone run on 2 cores, 17 and 22 of the suite's 107
# worker-minutes; as one scope, 36 on one worker). With them go the other Ray tests of their
# modules (run after the shared Ray is shut down), so that a module's fixtures are built once.
# Every other module is a scope of its own, Ray tests included: each of
# those starts its own Ray (an embedded one, a ``ray start`` cluster, a CLI subprocess), and every
# Ray started here or by rlformer asks for a new local instance (``address="local"``) or names its
# cluster, so Rays side by side never join each other. Two local Rays started together share the
# dashboard agent's fixed port (52365): the second runs without an agent, which neither Serve nor
# the tests need. The scheduler sees only test ids, not marks or fixtures, so the modules are read
# from source: a module whose ``pytestmark`` names ray, or a test function or class whose
# decorators do; a module that names the shared Ray's fixture. The collection hook checks both
# readings.
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


SHARED_RAY = "local_ray"
_SOURCES = {
    path.relative_to(TESTS.parent).as_posix(): path.read_text() for path in TESTS.rglob("test_*.py")
}
RAY_TESTS = {
    module: _ray_tests(source) for module, source in _SOURCES.items() if "mark.ray" in source
}
SHARED_RAY_MODULES = frozenset(
    module for module, source in _SOURCES.items() if SHARED_RAY in source and module in RAY_TESTS
)


def _in_ray_scope(nodeid: str) -> bool:
    module, *rest = nodeid.split("::")
    names = RAY_TESTS.get(module, frozenset())
    return EVERY_TEST in names or bool(rest) and rest[0].split("[")[0] in names


SERVING_MODULES = frozenset(m for m in SHARED_RAY_MODULES if "serve_port()" in _SOURCES[m])


def _in_shared_ray_scope(nodeid: str) -> bool:
    return nodeid.split("::")[0] in SHARED_RAY_MODULES


def _shared_ray_scope(nodeid: str) -> str:
    """Which of the two shared-Ray scopes (above) a test of a shared-Ray module belongs to."""
    return f"{SHARED_RAY}:serve" if nodeid.split("::")[0] in SERVING_MODULES else SHARED_RAY


def _check_ray_modules(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("ray") and not _in_ray_scope(item.nodeid):
            raise pytest.UsageError(f"{item.nodeid} is marked ray outside the Ray tests found")
        if _uses_shared_ray(item) and not _in_shared_ray_scope(item.nodeid):
            raise pytest.UsageError(
                f"{item.nodeid} uses {SHARED_RAY} outside a Ray module that names it"
            )


def _long_modules_first(items: list[pytest.Item]) -> None:
    """The shared Ray's scopes, then the other Ray modules, then modules with slow tests, then
    the rest, each in collection order. xdist hands out the scopes with the most tests first
    (the two shared ones lead, and the third worker starts on large modules of quick tests
    rather than on a third Ray) and keeps this order among scopes of equal size, so that of
    two equal modules the longer starts first."""
    slow = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")}

    def rank(item: pytest.Item) -> int:
        module = item.nodeid.split("::")[0]
        if _in_shared_ray_scope(item.nodeid):
            return 0
        return 1 if module in RAY_TESTS else 2 if module in slow else 3

    items.sort(key=rank)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Scopes as above, scheduled by xdist's own scope scheduler."""
    from xdist.scheduler import LoadScopeScheduling

    class RayTestsTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if _in_shared_ray_scope(nodeid):
                return _shared_ray_scope(nodeid)
            return nodeid.split("::")[0]

    return RayTestsTogether(config, log)


# The tests that need an embedded Ray in this process, and not a Ray of their own (one started
# by the code under test, a cluster, a CLI subprocess), share one: a 2-CPU local Ray started
# for the first of them and shut down after the last, through the fixture ``local_ray``.
# Workers see the repository (they import test modules: learners, envs of tests.reliability)
# and register the rlformer_test/* envs. Within the shared scope its tests run first, one after
# another, so that it starts once and no test of that worker starts a Ray of its own while it
# is up (in-process Rays cannot be two).
_shared_ray_started = False


def _uses_shared_ray(item: pytest.Item | None) -> bool:
    return item is not None and SHARED_RAY in getattr(item, "fixturenames", ())


def _shared_ray_tests_first(items: list[pytest.Item]) -> None:
    """Within the shared scopes, the shared Ray's tests first (the serving modules' last among
    them), then the modules' other Ray tests, each group in collection order."""
    slots = [i for i, item in enumerate(items) if _in_shared_ray_scope(item.nodeid)]

    def order(item: pytest.Item) -> tuple[bool, bool]:
        return not _uses_shared_ray(item), item.nodeid.split("::")[0] in SERVING_MODULES

    ordered = sorted((items[i] for i in slots), key=order)
    for i, item in zip(slots, ordered, strict=True):
        items[i] = item


def _init_local_ray() -> None:
    """A new 2-CPU local Ray in this process, its workers set up as the tests need."""
    import ray

    pythonpath = os.pathsep.join(p for p in (str(TESTS.parent), os.environ.get("PYTHONPATH")) if p)
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        runtime_env={
            "env_vars": {"PYTHONPATH": pythonpath},
            "worker_process_setup_hook": "tests.reliability.env_ids.register_test_envs",
        },
    )


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """The shared local Ray (above): up for every test that uses it, joined, never shut down
    by the tests themselves."""
    global _shared_ray_started
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        _init_local_ray()
        _shared_ray_started = True
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


# RLFORMER_TEST_TIMELINE=FILE: each test's worker, start and end appended to FILE as JSON lines
# (setup and teardown included), to see which tests overlap and where a worker waits.
_TIMELINE = os.environ.get("RLFORMER_TEST_TIMELINE")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    started = time.time()
    try:
        return (yield)
    finally:
        if _TIMELINE:
            row = {
                "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
                "test": item.nodeid,
                "start": round(started, 2),
                "end": round(time.time(), 2),
                "load": round(os.getloadavg()[0], 2),
            }
            with open(_TIMELINE, "a") as timeline:
                timeline.write(json.dumps(row) + "\n")
