"""The real CLI with Ray: a killed run with asynchronous Ray sampling resumes to the identical
result, and a wrong cluster address fails fast. Apart from test_train_cli.py so that the test
scheduler's Ray worker runs only the tests that start a cluster (tests/conftest.py); the wrong
address starts none, so it is not marked ray and runs on any worker."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.cli.test_train_cli import check_killed_run_resumes_to_identical_result, rlformer

# Asynchronous sampling keeps a batch in flight across each checkpoint; it must come back.
ASYNC_RAY = ["--set", "rollout.backend=ray", "--set", "rollout.async_sampling=true"]


@pytest.mark.slow
@pytest.mark.ray
def test_killed_async_ray_run_resumes_to_identical_result(tmp_path: Path) -> None:
    check_killed_run_resumes_to_identical_result(tmp_path, backend=ASYNC_RAY)


def test_unreachable_ray_cluster_fails_fast_with_the_fix(tmp_path: Path) -> None:
    """A wrong rollout.ray_address is one clear error, not minutes of Ray retrying in silence."""
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = rlformer(
        "train",
        str(Path(__file__).parents[2] / "configs" / "quickstart.yaml"),
        "--set",
        f"run.root={tmp_path / 'runs'}",
        "--set",
        f"rollout.ray_address=127.0.0.1:{port}",
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode != 0
    assert f"no Ray cluster answers at 127.0.0.1:{port}" in result.stderr
    assert "rollout.ray_address: null" in result.stderr
    assert "Traceback" not in result.stderr
