"""NaN/inf values and broken envs stop a run with a message that says where; nothing is lost."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

import rlformer.algos.ppo.learner as ppo_module
from rlformer.runs.checkpoints import load_checkpoint
from rlformer.runs.directory import read_metrics
from rlformer.runs.training import RunFailed, resume, train
from tests.reliability.env_ids import register_test_envs
from tests.reliability.tiny import tiny_config


@pytest.fixture(autouse=True)
def _test_envs() -> None:
    register_test_envs()


def _nan_loss_on_call(monkeypatch: pytest.MonkeyPatch, calls: set[int]) -> None:
    """Make ``ppo_loss`` return NaN on the given (1-based) calls."""
    real = ppo_module.ppo_loss
    count = 0

    def flaky(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - same signature as ppo_loss
        nonlocal count
        count += 1
        loss, metrics = real(*args, **kwargs)
        if count in calls:
            metrics["loss/value"] = torch.tensor(float("nan"))
            loss = loss + metrics["loss/value"]
        return loss, metrics

    monkeypatch.setattr(ppo_module, "ppo_loss", flaky)


def test_nonfinite_loss_stops_and_keeps_the_last_good_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 2 epochs x 2 minibatches = 4 loss calls per iteration: call 10 is iteration 3.
    _nan_loss_on_call(monkeypatch, {10})
    cfg = tiny_config(tmp_path, "ppo.total_steps=320", "run.checkpoint_every=1")
    with pytest.raises(RunFailed) as failure:
        train(cfg)
    message = str(failure.value)
    assert "loss/value is nan" in message and "PPO update 3, epoch 1, minibatch 2" in message
    (run_dir,) = tmp_path.iterdir()
    payload = load_checkpoint(run_dir)
    assert payload["iteration"] == 2
    for tensor in payload["model"].values():
        assert torch.isfinite(tensor).all()
    rows = read_metrics(run_dir)
    assert [r["step"] for r in rows] == [64, 128]  # nothing logged for the failed iteration
    assert all(math.isfinite(v) for row in rows for v in row.values())
    # Fixed (here: the fault is gone), the run resumes from that checkpoint and finishes.
    monkeypatch.undo()
    assert resume(run_dir).iterations == 5


def test_skip_mode_counts_skipped_updates_and_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _nan_loss_on_call(monkeypatch, {2, 3, 6})
    cfg = tiny_config(tmp_path, "ppo.total_steps=128", "run.nonfinite=skip")
    result = train(cfg)
    rows = read_metrics(result.run_dir)
    assert [r["nonfinite/skipped_minibatches"] for r in rows] == [2.0, 1.0]
    for tensor in load_checkpoint(result.run_dir)["model"].values():
        assert torch.isfinite(tensor).all()


@pytest.mark.parametrize(("mode", "what"), [("nan_obs", "observation"), ("nan_reward", "reward")])
def test_nonfinite_env_data_names_env_slot_and_step(tmp_path: Path, mode: str, what: str) -> None:
    cfg = tiny_config(
        tmp_path,
        "env.id=rlformer_test/Faulty-v0",
        f"env.kwargs={json.dumps({'mode': mode, 'fail_at': 5})}",
    )
    with pytest.raises(RunFailed) as failure:
        train(cfg)
    message = str(failure.value)
    assert f"non-finite {what}" in message
    assert "rollout worker 0, env slot 0, at step 5 of its episode" in message
    assert "rlformer_test/Faulty-v0" in message


def test_env_exception_names_env_worker_slot_and_line(tmp_path: Path) -> None:
    cfg = tiny_config(
        tmp_path, "env.id=rlformer_test/Faulty-v0", "env.kwargs={mode: raise, fail_at: 3}"
    )
    with pytest.raises(RunFailed) as failure:
        train(cfg)
    message = str(failure.value)
    assert "env 'rlformer_test/Faulty-v0' raised ValueError: simulated bug" in message
    assert "in step() on rollout worker 0, env slot 0" in message
    assert "tiny.py:" in message and "in step" in message


def test_unpicklable_env_warns_once_and_resumes_with_fresh_episodes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tiny_config(
        tmp_path,
        "env.id=rlformer_test/Locked-v0",
        "env.kwargs={}",
        "ppo.total_steps=192",
        "run.checkpoint_every=1",
    )
    result = train(cfg)
    err = capsys.readouterr().err
    assert err.count("cannot be pickled") == 1
    assert "resumed run starts fresh episodes" in err
    resumed = resume(result.run_dir, ["ppo.total_steps=320"])
    assert resumed.iterations == 5
    assert [r["step"] for r in read_metrics(result.run_dir)] == [64, 128, 192, 256, 320]
