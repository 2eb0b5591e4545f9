"""The Decision Transformer loop keeps the same promises: signals checkpoint, NaN stops."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import torch

import rlformer.algos.dt.learner as dt_module
from rlformer.config import TrainConfig, load_config
from rlformer.data.d4rl_format import write_d4rl
from rlformer.data.synthetic import tmaze_walks
from rlformer.runs.checkpoints import load_checkpoint
from rlformer.runs.directory import read_metrics
from rlformer.runs.signals import Interrupted
from rlformer.runs.training import RunFailed, resume, train


@pytest.fixture(scope="module")
def walks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "walks.hdf5"
    write_d4rl(path, tmaze_walks(4, 40, seed=0, p_correct=0.75), {"env_id": "rlformer/TMaze-v0"})
    return path


def _config(data: Path, root: Path, *extra: str) -> TrainConfig:
    return load_config(
        None,
        [
            "algo=dt",
            "env.id=rlformer/TMaze-v0",
            "env.kwargs.length=4",
            f"dt.dataset={data}",
            "dt.context=3",
            "dt.batch_size=8",
            "dt.train_steps=40",
            "dt.log_every=2",
            "dt.core.n_layers=1",
            "dt.core.d_model=16",
            "dt.core.d_ff=32",
            "dt.core.dropout=0.0",
            "eval.episodes=0",
            "run.checkpoint_every=100",
            f"run.root={root}",
            "run.progress=false",
            *extra,
        ],
    )


def _signal_at_step(monkeypatch: pytest.MonkeyPatch, step: int, sig: signal.Signals) -> None:
    real = dt_module.DTLearner.update

    def update(self, windows):  # noqa: ANN001, ANN202 - same signature as DTLearner.update
        metrics = real(self, windows)
        if self.step == step:
            os.kill(os.getpid(), sig)
        return metrics

    monkeypatch.setattr(dt_module.DTLearner, "update", update)


def test_signal_mid_run_checkpoints_and_resume_matches(
    walks: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    straight = train(_config(walks, tmp_path / "straight")).run_dir
    _signal_at_step(monkeypatch, 13, signal.SIGTERM)
    with pytest.raises(Interrupted) as stopped:
        train(_config(walks, tmp_path / "stopped"))
    assert stopped.value.exit_code == 143
    run_dir = stopped.value.run_dir
    # The run finishes its iteration (dt.log_every = 2 steps) before it checkpoints and stops.
    assert load_checkpoint(run_dir)["learner"]["step"] == 14
    monkeypatch.undo()
    resume(run_dir)
    a, b = load_checkpoint(straight)["model"], load_checkpoint(run_dir)["model"]
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert read_metrics(straight) == read_metrics(run_dir)


def test_nonfinite_dt_loss_stops_or_is_skipped(
    walks: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = dt_module.dt_loss
    calls = 0

    def poisoned(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        nonlocal calls
        calls += 1
        loss = real(*args, **kwargs)
        return loss * float("nan") if calls == 7 else loss

    monkeypatch.setattr(dt_module, "dt_loss", poisoned)
    with pytest.raises(RunFailed, match="loss/action is nan .* in DT gradient step 7"):
        train(_config(walks, tmp_path / "stop", "run.checkpoint_every=1"))
    (run_dir,) = (tmp_path / "stop").iterdir()
    assert load_checkpoint(run_dir)["learner"]["step"] == 6
    calls = 0
    result = train(_config(walks, tmp_path / "skip", "run.nonfinite=skip"))
    rows = read_metrics(result.run_dir)
    assert rows[-1]["nonfinite/skipped_steps"] == 1.0
    for tensor in load_checkpoint(result.run_dir)["model"].values():
        assert torch.isfinite(tensor).all()
