"""Run-directory mechanics: atomic checkpoints, latest pointer, pruning, format checks, metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from rlformer.runs.directory import (
    CHECKPOINT_FORMAT,
    CheckpointError,
    MetricsLogger,
    latest_checkpoint,
    load_checkpoint,
    new_run_dir,
    read_metrics,
    save_checkpoint,
)


def test_save_points_latest_and_prunes(tmp_path: Path) -> None:
    run = new_run_dir(tmp_path, "demo")
    for step in (10, 20, 30, 40):
        save_checkpoint(run, step, {"value": torch.tensor(step)}, keep=2)
    names = sorted(p.name for p in (run / "checkpoints").glob("ckpt_*.pt"))
    assert names == ["ckpt_000000030.pt", "ckpt_000000040.pt"]
    assert latest_checkpoint(run).name == "ckpt_000000040.pt"
    assert int(load_checkpoint(run)["value"]) == 40
    assert not list((run / "checkpoints").glob(".*tmp")), "temp files must not be left behind"


def test_failed_write_keeps_previous_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = new_run_dir(tmp_path, "demo")
    save_checkpoint(run, 1, {"value": 1})
    real_save = torch.save

    def save_then_fail(obj: object, path: str) -> None:
        real_save(obj, path)
        with open(path, "r+b") as handle:  # a disk that filled up half-way
            handle.truncate(100)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", save_then_fail)
    with pytest.raises(OSError, match="No space"):
        save_checkpoint(run, 2, {"value": 2})
    assert load_checkpoint(run)["value"] == 1
    assert not (run / "checkpoints" / "ckpt_000000002.pt").exists()
    assert not list((run / "checkpoints").glob(".*tmp"))


def test_new_run_dirs_never_collide(tmp_path: Path) -> None:
    first, second = new_run_dir(tmp_path, "x"), new_run_dir(tmp_path, "x")
    assert first != second and first.is_dir() and second.is_dir()


def test_incompatible_or_foreign_checkpoints_are_clear_errors(tmp_path: Path) -> None:
    old = tmp_path / "old.pt"
    torch.save({"format": CHECKPOINT_FORMAT + 1}, old)
    with pytest.raises(CheckpointError, match="format"):
        load_checkpoint(old)
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="not a readable"):
        load_checkpoint(junk)
    with pytest.raises(TypeError, match="cannot go into a checkpoint"):
        save_checkpoint(new_run_dir(tmp_path, "x"), 1, {"space": object()})
    with pytest.raises(CheckpointError, match="no checkpoint yet"):
        load_checkpoint(new_run_dir(tmp_path, "empty"))
    with pytest.raises(CheckpointError, match="not found"):
        load_checkpoint(tmp_path / "missing")


def test_metrics_resume_drops_rows_after_checkpoint(tmp_path: Path) -> None:
    run = new_run_dir(tmp_path, "m")
    logger = MetricsLogger(run)
    for step in (100, 200, 300):
        logger.log(step, {"loss": step / 100})
    logger.close()
    resumed = MetricsLogger(run, resume_step=200)
    resumed.log(300, {"loss": 9.0})
    resumed.close()
    rows = read_metrics(run)
    assert [r["step"] for r in rows] == [100, 200, 300]
    assert rows[-1]["loss"] == 9.0
    assert (run / "tb").is_dir() and any((run / "tb").iterdir())
    assert json.loads((run / "metrics.jsonl").read_text().splitlines()[0])["loss"] == 1.0
