"""``rlformer serve`` as a process, embedded: it starts a Ray of its own whatever
``RAY_ADDRESS`` says, prints its URL once that URL answers, refuses a taken port in one line
before starting anything (another server's, or another program's), and stops cleanly."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import requests

from tests.serve.shared_serve import free_port
from tests.serve.test_serve_http import APPS, _checkpoint

pytestmark = [pytest.mark.slow, pytest.mark.ray]

START_TIMEOUT = 180


def serve_command(path: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "rlformer.cli", "serve", str(path), *args]


def serve_env(**values: str) -> dict[str, str]:
    """This environment without Ray's address and authentication settings, plus ``values``."""
    drop = ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **values}


def start_server(command: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    with log.open("w") as out:
        return subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


def wait_for(condition: Callable[[], bool], what: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.25)
    raise AssertionError(f"{what} within {START_TIMEOUT} s; log:\n{log.read_text()[-4000:]}")


def announced_url(server: subprocess.Popen, log: Path) -> str:
    """The URL of the startup line, once printed (the server must still be running)."""
    found: list[str] = []

    def printed() -> bool:
        assert server.poll() is None, f"rlformer serve exited:\n{log.read_text()[-4000:]}"
        lines = [line for line in log.read_text().splitlines() if line.startswith("serving ")]
        found.extend(line.split(" at ")[1].split()[0] for line in lines)
        return bool(found)

    wait_for(printed, "no startup line", log)
    return found[0]


def stop(server: subprocess.Popen, grace: float = 90) -> int:
    """SIGTERM, then whatever of its process group is left is killed; its exit status."""
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(grace)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(server.pid, signal.SIGKILL)
    return server.wait(10)


def refused(command: list[str], env: dict[str, str]) -> tuple[str, float]:
    """Run a server that must be refused: its one stderr line and how long it took."""
    started = time.monotonic()
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - started
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0], elapsed


def test_an_embedded_server_owns_its_port_and_ignores_ray_address(tmp_path: Path) -> None:
    path = _checkpoint(tmp_path, "lstm", APPS["lstm"][0])
    port, log = free_port(), tmp_path / "first.log"
    # an address where no cluster runs: a server that joined it could never start
    env = serve_env(RAY_ADDRESS=f"127.0.0.1:{free_port()}")
    first = start_server(serve_command(path, "--port", str(port)), log, env)
    try:
        url = announced_url(first, log)
        assert url == f"http://127.0.0.1:{port}/v1/"
        health = requests.get(url + "health", timeout=30)  # answering when announced
        assert health.status_code == 200 and health.json()["server_id"]
        server_id = health.json()["server_id"]

        line, elapsed = refused(serve_command(path, "--port", str(port)), serve_env())
        assert f"port {port}" in line and "--port" in line
        assert elapsed < 60, f"the refusal took {elapsed:.0f} s: something started first"

        with socket.socket() as other_program:
            other_port = free_port()
            other_program.bind(("127.0.0.1", other_port))
            other_program.listen()
            line, _ = refused(serve_command(path, "--port", str(other_port)), serve_env())
            assert f"port {other_port}" in line

        for _ in range(20):  # every call still reaches the first server
            again = requests.get(url + "health", timeout=30)
            assert again.status_code == 200 and again.json()["server_id"] == server_id
    finally:
        status = stop(first)
    assert status == 0, log.read_text()[-4000:]
    assert "graceful_shutdown failed" not in log.read_text()
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://127.0.0.1:{port}/v1/health", timeout=5)
