"""Env faults on real Ray workers: named, bounded by the restart budget, checkpoints survive."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlformer.runs.directory import read_metrics
from rlformer.runs.training import RunFailed, resume, train
from tests.reliability.env_ids import register_test_envs
from tests.reliability.tiny import tiny_config

ray = pytest.importorskip("ray")
pytestmark = [pytest.mark.ray, pytest.mark.slow]

RAY = [
    "rollout.backend=ray",
    "rollout.num_workers=2",
    "rollout.envs_per_worker=2",
    "rollout.worker_cpus=0.25",
    "rollout.fragment_length=32",
]


@pytest.fixture(scope="module")
def ray_with_test_envs(local_ray: None) -> None:
    """The shared local Ray (tests/conftest.py), whose worker processes register the
    rlformer_test/* envs at start-up, and the same envs registered here."""
    register_test_envs()


def test_deterministic_env_bug_ends_with_its_message_after_the_budget(
    tmp_path: Path, ray_with_test_envs: None
) -> None:
    cfg = tiny_config(
        tmp_path,
        *RAY,
        "rollout.max_worker_restarts=2",
        "env.id=rlformer_test/Faulty-v0",
        "env.kwargs={mode: raise, fail_at: 3}",
    )
    with pytest.raises(RunFailed) as failure:
        train(cfg)
    message = str(failure.value)
    assert "restart budget rollout.max_worker_restarts=2 is used up" in message
    assert "env 'rlformer_test/Faulty-v0' raised ValueError: simulated bug" in message
    assert "on rollout worker" in message and "env slot 0" in message and "tiny.py:" in message


def test_nonfinite_env_data_on_a_worker_stops_at_once(
    tmp_path: Path, ray_with_test_envs: None
) -> None:
    cfg = tiny_config(
        tmp_path,
        *RAY,
        "env.id=rlformer_test/Faulty-v0",
        f"env.kwargs={json.dumps({'mode': 'nan_reward', 'fail_at': 4})}",
    )
    with pytest.raises(RunFailed, match="non-finite reward on rollout worker .* at step 4"):
        train(cfg)


def test_unpicklable_env_on_workers_warns_once_and_resumes(
    tmp_path: Path, ray_with_test_envs: None, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tiny_config(
        tmp_path,
        *RAY,
        "env.id=rlformer_test/Locked-v0",
        "env.kwargs={}",
        "ppo.total_steps=256",
        "run.checkpoint_every=1",
    )
    result = train(cfg)
    assert capsys.readouterr().err.count("cannot be pickled") == 1
    resume(result.run_dir, ["ppo.total_steps=512"])
    assert [r["step"] for r in read_metrics(result.run_dir)] == [128, 256, 384, 512]
