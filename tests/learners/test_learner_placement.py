"""Where learner actors run: ``learner.resources`` places them on the nodes offering a custom
resource (a real two-node cluster of two ``ray start`` processes, the driver on the head),
``learner.device: cuda`` reserves a GPU per actor and leaves the driver and the rollout workers
on CPUs."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from rlformer.algos.ppo.algorithm import build_model
from rlformer.algos.ppo.data_parallel import ParallelPPOLearner, make_ppo_learner
from rlformer.learners.learner_group import (
    LearnerError,
    actor_options,
    learner_device,
    learner_placement,
    ray_init_options,
)
from rlformer.rollout.ray_collector import RolloutError
from tests.learners.test_parallel_learners import (
    _assert_same_update,
    _fragment,
    _one_learner_update,
)
from tests.learners.test_ppo_memory import _config

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT = 240
RAY_PORTS = (
    "node-manager-port",
    "object-manager-port",
    "dashboard-agent-listen-port",
    "dashboard-agent-grpc-port",
    "metrics-export-port",
    "runtime-env-agent-port",
)


def test_cuda_learners_reserve_a_gpu_each_and_a_driver_on_the_cpu_keeps_none() -> None:
    cfg = _config(
        "rlformer/TMaze-v0",
        **{"learner.device": "cuda", "learner.resources": "{learner_node: 1}"},
    )
    assert cfg.learner.on_ray and cfg.learner.num_learners == 1  # placed: an actor even alone
    cpu = torch.device("cpu")
    device = learner_device(cfg, cpu)
    assert device == torch.device("cuda")
    placement = learner_placement(cfg.learner, device)
    assert placement == {"cpus": 1.0, "gpus": 1, "resources": {"learner_node": 1.0}}
    assert actor_options(**placement) == {
        "num_cpus": 1.0,
        "num_gpus": 1,
        "max_restarts": 0,
        "resources": {"learner_node": 1.0},
    }
    # The driver builds its learner without touching CUDA: the replicas check it on their node.
    learner = make_ppo_learner(build_model(cfg), cfg, cpu, 3)
    assert isinstance(learner, ParallelPPOLearner) and learner.device.type == "cuda"
    assert next(learner.model.parameters()).device == cpu  # it feeds the CPU rollout workers
    # Rollout workers reserve CPUs only, whatever the learners' device.
    assert learner_placement(cfg.learner, cpu)["gpus"] == 0
    default = _config("rlformer/TMaze-v0")
    assert not default.learner.on_ray and learner_device(default, cpu) == cpu


def test_placement_an_embedded_ray_cannot_give_is_refused_at_once() -> None:
    """Custom resources (and GPUs on a machine without one) exist only on a cluster: without
    rollout.ray_address the learners would wait for them until the start-up timeout."""
    placed = _config("rlformer/TMaze-v0", **{"learner.resources": "{learner_node: 1}"})
    with pytest.raises(LearnerError, match=r"^learner.resources=\{'learner_node': 1.0\} asks"):
        ray_init_options(placed)
    joined = _config(
        "rlformer/TMaze-v0",
        **{"learner.resources": "{learner_node: 1}", "rollout.ray_address": "127.0.0.1:1"},
    )
    with pytest.raises(RolloutError, match="127.0.0.1:1"):  # the cluster is asked, no refusal
        ray_init_options(joined)
    if not torch.cuda.is_available():
        cuda = _config("rlformer/TMaze-v0", **{"learner.device": "cuda"})
        with pytest.raises(LearnerError, match="this machine has no CUDA GPU"):
            ray_init_options(cuda)


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_one_cuda_learner_actor_gives_the_cpu_update(local_ray: None) -> None:
    """A learner actor on the GPU (fp32, PPO's default precision) steps as the CPU learner."""
    cfg, model, fragment = _fragment("gtrxl", **{"learner.device": "cuda"})
    reference, metrics_one = _one_learner_update(cfg, model, fragment, k=1)
    learner = ParallelPPOLearner(copy.deepcopy(model), cfg, torch.device("cpu"), 3)
    learner.start()
    try:
        metrics = learner.update(fragment)
        _assert_same_update(reference, learner, metrics_one, metrics)
    finally:
        learner.close()


# ------------------------------------------------------------------ a two-node cluster


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop(proc: subprocess.Popen, grace: float = 60) -> None:
    """SIGTERM to a ``ray start --block`` started in its own session (it ends what it started),
    then SIGKILL to that process group only."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)


def _wait_for(proc: subprocess.Popen, log: Path, text: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        if text in log.read_text():
            return
        time.sleep(0.5)
    raise AssertionError(f"ray start did not report {text!r}; log:\n{log.read_text()[-4000:]}")


def _env(**values: str) -> dict[str, str]:
    """This environment without Ray's address and authentication settings, plus ``values``."""
    drop = ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **values}


def _ray_start(log: Path, env: dict[str, str], *flags: str) -> subprocess.Popen:
    command = [
        str(Path(sys.executable).with_name("ray")),
        "start",
        "--block",
        "--disable-usage-stats",
        *flags,
        *(f"--{flag}={_free_port()}" for flag in RAY_PORTS),
    ]
    with log.open("w") as out:
        return subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


@pytest.fixture
def two_nodes(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A head node with one CPU and a second node with one CPU and ``learner_node: 2``, each a
    ``ray start`` process with its own temp dir and ports and one authentication token; the
    head's address and the environment a driver joins it with."""
    token = secrets.token_hex(32)
    env = _env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    port = _free_port()
    address = f"127.0.0.1:{port}"
    dirs = [Path(tempfile.mkdtemp(prefix="rfl", dir="/tmp")) for _ in range(2)]  # short paths
    nodes: list[subprocess.Popen] = []
    try:
        head_flags = ("--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false")
        nodes.append(_ray_start(tmp_path / "head.log", env, *head_flags, f"--temp-dir={dirs[0]}"))
        _wait_for(nodes[0], tmp_path / "head.log", "Ray runtime started")
        worker_flags = (
            f"--address={address}",
            "--num-cpus=1",
            f"--resources={json.dumps({'learner_node': 2})}",
            f"--temp-dir={dirs[1]}",
        )
        nodes.append(_ray_start(tmp_path / "worker.log", env, *worker_flags))
        _wait_for(nodes[1], tmp_path / "worker.log", "Ray runtime started")
        yield address, env
    finally:
        for node in reversed(nodes):
            _stop(node)
        for path in dirs:
            shutil.rmtree(path, ignore_errors=True)


def place_learners(address: str) -> None:
    """The driver (a process of its own: Ray keeps the first authentication token a process
    reads): two learners placed by ``learner.resources`` on a cluster, one update equal to one
    learner's; prints the driver's node, the learners' nodes and the nodes' resources."""
    import ray

    cfg, model, fragment = _fragment(
        "gtrxl",
        **{
            "learner.num_learners": "2",
            "learner.cpus_per_learner": "0.5",
            "learner.resources": "{learner_node: 1}",
            "learner.timeout_s": "120",
            "rollout.ray_address": address,
        },
    )
    reference, metrics_one = _one_learner_update(cfg, model, fragment, k=1)
    learners = ParallelPPOLearner(copy.deepcopy(model), cfg, torch.device("cpu"), 3)
    learners.start()  # joins the cluster as rollout.ray_address says
    try:
        assert learners.group is not None
        placed = learners.group.node_ids()
        # The all-reduce works on the learners' node: the step is the one-learner step.
        _assert_same_update(reference, learners, metrics_one, learners.update(fragment))
        where = {
            "driver": ray.get_runtime_context().get_node_id(),
            "learners": placed,
            "resources": {n["NodeID"]: n["Resources"] for n in ray.nodes() if n["Alive"]},
        }
    finally:
        learners.close()
    print(json.dumps(where))


@pytest.mark.ray
@pytest.mark.slow
def test_learners_placed_by_a_custom_resource_run_on_another_node(
    two_nodes: tuple[str, dict[str, str]],
) -> None:
    address, env = two_nodes
    code = f"from {__name__} import place_learners; place_learners({address!r})"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    where = json.loads(done.stdout.strip().splitlines()[-1])
    resources, driver, placed = where["resources"], where["driver"], where["learners"]
    assert len(resources) == 2 and len(placed) == 2
    assert len(set(placed)) == 1 and placed[0] != driver
    assert "learner_node" in resources[placed[0]] and "learner_node" not in resources[driver]
