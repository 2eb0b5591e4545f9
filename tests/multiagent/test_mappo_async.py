"""Multi-agent runs with asynchronous Ray sampling (the next batch samples while the groups
learn): a run SIGKILLed after a checkpoint resumes, its batch in flight included, to the run
left alone, and the batches from older weights take the decoupled PPO update. Apart from
test_mappo_ray.py, whose tests share one embedded Ray: these start their own, through the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pettingzoo")
pytest.importorskip("ray")

from tests.multiagent.test_mappo_cli import (  # noqa: E402
    _rows,
    check_killed_run_resumes_to_the_run_left_alone,
)

ASYNC_RAY = [
    "rollout.backend=ray",
    "rollout.async_sampling=true",
    "rollout.num_workers=2",
    "rollout.envs_per_worker=2",
    "rollout.worker_cpus=0.5",
]


@pytest.mark.slow
@pytest.mark.ray
def test_killed_async_ray_team_run_resumes_to_the_run_left_alone(tmp_path: Path) -> None:
    straight = check_killed_run_resumes_to_the_run_left_alone(tmp_path, *ASYNC_RAY)
    rows = [r for r in _rows(straight) if "agent/ppo/behaviour_ratio_error_mean" in r]
    assert len(rows) >= 10  # every batch after the first comes from the previous weights
