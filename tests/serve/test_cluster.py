"""``rlformer serve --address`` on a real Ray cluster: a head node started with ``ray start``
(its own temp dir, ports and authentication token, so that no other Ray on the machine is
touched or found), the CLI joining it, and a session acting through HTTP like a separate run."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from rlformer.policies import load_policy
from tests.serve.shared_serve import free_port
from tests.serve.test_serve_http import APPS, _checkpoint, _episodes, _run_session
from tests.serve.test_state_blob import reference

pytestmark = [pytest.mark.slow, pytest.mark.ray]

START_TIMEOUT = 240


def _stop(proc: subprocess.Popen, grace: float = 60) -> None:
    """SIGTERM to a process started in its own session, then SIGKILL to its whole group
    (``ray start --block`` ends the processes it started when it gets SIGTERM)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # leftovers of this group only
    proc.wait(10)


def _wait_for(condition: object, what: str, log: Path, timeout: float = START_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.5)
    raise AssertionError(f"{what} within {timeout} s; log:\n{log.read_text()[-4000:]}")


def _env(**values: str) -> dict[str, str]:
    """This environment without Ray's address and authentication settings, plus ``values``."""
    drop = ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **values}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A one-node Ray cluster (:func:`ray_head`); its address and token."""
    with ray_head(tmp_path) as head:
        yield head


HEAD_ATTEMPTS = 2
HEAD_PORT_FLAGS = (
    "node-manager-port",
    "object-manager-port",
    "ray-client-server-port",
    "dashboard-port",
    "dashboard-agent-listen-port",
    "dashboard-agent-grpc-port",
    "metrics-export-port",
    "runtime-env-agent-port",
)


@contextlib.contextmanager
def ray_head(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A one-node Ray cluster (2 CPUs) started with ``ray start --head --block`` and token
    authentication (Ray's default when a token exists); its address and token.

    A head that does not come up is started once more, on new ports: under the suite's load
    ``ray start`` can give up on its raylet after its fixed 30 s, and a port found free can be
    taken before Ray binds it. Neither is what the tests here are about."""
    token = secrets.token_hex(32)
    env = _env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    for attempt in range(1, HEAD_ATTEMPTS + 1):
        temp_dir = Path(tempfile.mkdtemp(prefix="rfc", dir="/tmp"))  # short: Ray's socket paths
        log = tmp_path / f"head-{attempt}.log"
        port = free_port()
        command = [
            str(Path(sys.executable).with_name("ray")),
            *("start", "--head", f"--port={port}", "--num-cpus=2", f"--temp-dir={temp_dir}"),
            *("--include-dashboard=false", "--disable-usage-stats", "--block"),
            *(f"--{flag}={free_port()}" for flag in HEAD_PORT_FLAGS),
        ]
        with log.open("w") as out:
            head = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        try:
            try:
                _wait_for_head(head, log)
            except AssertionError as failure:
                if attempt == HEAD_ATTEMPTS:
                    raise AssertionError(f"{failure}\n{_ray_logs(temp_dir)}") from None
                continue
            yield f"127.0.0.1:{port}", token
            return
        finally:
            # A head node given SIGTERM spends ~30 s stopping gracefully; this cluster is the
            # test's own (its own temp dir and process group), so a short grace then SIGKILL.
            _stop(head, grace=5)
            shutil.rmtree(temp_dir, ignore_errors=True)


def _wait_for_head(head: subprocess.Popen, log: Path, timeout: float = START_TIMEOUT) -> None:
    """Until ``ray start`` says the head runs; an AssertionError once it exits or times out."""
    deadline = time.monotonic() + timeout
    while "Ray runtime started" not in log.read_text():
        if head.poll() is not None or time.monotonic() > deadline:
            ended = "exited" if head.poll() is not None else f"still starting after {timeout} s"
            raise AssertionError(
                f"the head node did not start ({ended}); log:\n{log.read_text()[-4000:]}"
            )
        time.sleep(0.5)


def _ray_logs(temp_dir: Path, tail: int = 1500) -> str:
    """The ends of the raylet's and GCS's error logs under ``temp_dir`` (why a node failed)."""
    parts = []
    for name in ("raylet.err", "raylet.out", "gcs_server.err", "gcs_server.out"):
        for path in temp_dir.glob(f"session_*/logs/{name}"):
            parts.append(f"--- {name}:\n{path.read_text(errors='replace')[-tail:]}")
    return "\n".join(parts) or f"(no raylet or GCS logs under {temp_dir})"


def test_serve_joins_a_cluster_given_by_address(cluster: tuple[str, str], tmp_path: Path) -> None:
    address, token = cluster
    path = _checkpoint(tmp_path, "lstm", APPS["lstm"][0])
    http_port, log = free_port(), tmp_path / "serve.log"
    command = [
        *(sys.executable, "-m", "rlformer.cli", "serve", str(path)),
        *("--address", address, "--port", str(http_port), "--replicas", "2"),
    ]
    # Ray never sends a token to an explicit address unless told to: one line saying so
    refused = subprocess.run(
        command, env=_env(RAY_AUTH_TOKEN=token), capture_output=True, text=True, timeout=300
    )
    assert refused.returncode != 0 and "RAY_AUTH_MODE=token" in refused.stderr, refused.stderr
    env = _env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    with log.open("w") as out:
        server = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    url = f"http://127.0.0.1:{http_port}"

    def healthy() -> bool:
        assert server.poll() is None, f"rlformer serve exited:\n{log.read_text()[-4000:]}"
        try:
            return requests.get(f"{url}/v1/health", timeout=5).status_code == 200
        except requests.RequestException:  # not listening yet, or still deploying
            return False

    try:
        _wait_for(healthy, "the app did not answer /v1/health", log)
        steps = _episodes(3)
        assert _run_session(url, "on-cluster", steps, 0) == reference(load_policy(path), steps)
        health = requests.get(f"{url}/v1/health", timeout=30).json()
        assert health["replicas"] == 2 and health["sessions"] == 1
    finally:
        _stop(server)
    assert server.returncode is not None


def test_servers_on_a_cluster_keep_to_their_own_application(
    cluster: tuple[str, str], tmp_path: Path
) -> None:
    """Two servers share the cluster's one Serve under their own names and routes; a taken
    name is refused in one line (every refusal: ``tests/serve/test_cluster_slot.py``);
    stopping one deletes only its own application; without ``--address`` a server runs on a
    Ray of its own even when ``RAY_ADDRESS`` names the cluster."""
    from tests.serve.test_serve_cli import announced_url, refused, serve_command, start_server
    from tests.serve.test_serve_cli import stop as stop_server

    address, token = cluster
    env = _env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    path = _checkpoint(tmp_path, "lstm", APPS["lstm"][0])
    port, other_port = free_port(), free_port()
    on_cluster = ("--address", address, "--port", str(port))
    first_log, second_log, own_log = (tmp_path / f"{n}.log" for n in ("a", "b", "own"))
    first = start_server(serve_command(path, *on_cluster), first_log, env)
    servers = [first]
    try:
        first_url = announced_url(first, first_log)
        assert first_url == f"http://127.0.0.1:{port}/v1/"
        line, _ = refused(serve_command(path, *on_cluster), env)
        assert "'rlformer' already runs" in line and "--name" in line

        second = start_server(
            serve_command(path, *on_cluster, "--name", "b", "--route-prefix", "/b"), second_log, env
        )
        servers.append(second)
        second_url = announced_url(second, second_log)
        assert second_url == f"http://127.0.0.1:{port}/b/v1/"
        ids = {
            requests.get(u + "health", timeout=30).json()["server_id"]
            for u in (first_url, second_url)
        }
        assert len(ids) == 2
        assert stop_server(second) == 0, second_log.read_text()[-4000:]
        assert requests.get(second_url + "health", timeout=30).status_code == 404
        assert requests.get(first_url + "health", timeout=30).status_code == 200

        own_env = {**env, "RAY_ADDRESS": address}
        own = start_server(serve_command(path, "--port", str(other_port)), own_log, own_env)
        servers.append(own)
        assert announced_url(own, own_log) == f"http://127.0.0.1:{other_port}/v1/"
        assert stop_server(own) == 0, own_log.read_text()[-4000:]
        steps = _episodes(5)
        expected = reference(load_policy(path), steps)
        assert _run_session(f"http://127.0.0.1:{port}", "still-here", steps, 0) == expected
    finally:
        for server in servers:
            stop_server(server)
