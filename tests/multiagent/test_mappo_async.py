"""Multi-agent runs with asynchronous sampling on a ``ray start`` cluster (the next batch
samples while the groups learn): a run SIGKILLed after a checkpoint resumes, its batch in flight
included, to the run left alone, and the batches from older weights take the decoupled PPO
update. Apart from test_mappo_ray.py, whose tests share one embedded Ray."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pettingzoo")
pytest.importorskip("ray")

from tests.multiagent.test_mappo_cli import (  # noqa: E402
    _rows,
    check_killed_run_resumes_to_the_run_left_alone,
)
from tests.serve.test_cluster import ray_head  # noqa: E402

ASYNC_RAY = [
    "rollout.backend=ray",
    "rollout.async_sampling=true",
    "rollout.num_workers=2",
    "rollout.envs_per_worker=2",
    "rollout.worker_cpus=0.5",
]


@pytest.mark.slow
@pytest.mark.ray
def test_killed_async_team_run_on_a_cluster_resumes_to_the_run_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ray_head(tmp_path) as (address, token):
        monkeypatch.setenv("RAY_AUTH_MODE", "token")  # the CLI runs inherit the token
        monkeypatch.setenv("RAY_AUTH_TOKEN", token)
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
        extra = [*ASYNC_RAY, f"rollout.ray_address={address}"]
        straight = check_killed_run_resumes_to_the_run_left_alone(tmp_path, *extra)
    rows = [r for r in _rows(straight) if "agent/ppo/behaviour_ratio_error_mean" in r]
    assert len(rows) >= 10  # every batch after the first comes from the previous weights
