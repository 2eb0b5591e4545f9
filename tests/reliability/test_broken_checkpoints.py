"""Truncated, empty or garbage checkpoints: resume falls back, eval says so in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rlformer.runs.checkpoints import CheckpointError, checkpoint_candidates, load_checkpoint
from rlformer.runs.training import resume, train
from tests.reliability.tiny import tiny_config

DAMAGE = {
    "truncated": lambda data: data[: len(data) // 3],
    "zero-byte": lambda data: b"",
    "garbage": lambda data: bytes(range(256)) * 40,
}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run with checkpoints after iterations 2, 3 and 4 (keep 3)."""
    root = tmp_path_factory.mktemp("runs")
    cfg = tiny_config(root, "ppo.total_steps=256", "run.checkpoint_every=1")
    return train(cfg).run_dir


def _copy_run(run_dir: Path, dest: Path) -> Path:
    subprocess.run(["cp", "-a", str(run_dir), str(dest)], check=True)
    return dest


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_resume_skips_a_broken_latest_with_a_warning(
    finished_run: Path, tmp_path: Path, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _copy_run(finished_run, tmp_path / "run")
    newest = checkpoint_candidates(run)[0]
    assert newest.name == "ckpt_000000256.pt"
    newest.write_bytes(DAMAGE[damage](newest.read_bytes()))
    older = load_checkpoint(run)
    assert older["iteration"] == 3
    assert f"skipped {newest}" in capsys.readouterr().err
    result = resume(run, ["ppo.total_steps=320"])
    assert result.iterations == 5
    assert load_checkpoint(run)["iteration"] == 5


def test_garbage_latest_pointer_falls_back_to_the_newest_file(
    finished_run: Path, tmp_path: Path
) -> None:
    run = _copy_run(finished_run, tmp_path / "run")
    (run / "checkpoints" / "latest").write_bytes(b"\xff\xfe../../etc/passwd")
    assert checkpoint_candidates(run)[0].name == "ckpt_000000256.pt"
    assert load_checkpoint(run)["iteration"] == 4


def test_all_checkpoints_broken_is_one_clear_error(finished_run: Path, tmp_path: Path) -> None:
    run = _copy_run(finished_run, tmp_path / "run")
    for path in (run / "checkpoints").glob("ckpt_*.pt"):
        path.write_bytes(b"")
    with pytest.raises(CheckpointError, match="empty file"):
        load_checkpoint(run)


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_eval_of_a_broken_file_is_one_line(finished_run: Path, tmp_path: Path, damage: str) -> None:
    broken = tmp_path / "broken.pt"
    broken.write_bytes(DAMAGE[damage](checkpoint_candidates(finished_run)[0].read_bytes()))
    result = subprocess.run(
        [sys.executable, "-m", "rlformer.cli", "eval", str(broken), "--episodes", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {broken}"), result.stderr


def test_checkpoint_without_expected_entries_is_a_clear_error(tmp_path: Path) -> None:
    from rlformer.policies import load_policy

    path = tmp_path / "partial.pt"
    torch.save({"format": 2, "kind": "ppo", "model": {}}, path)
    with pytest.raises(CheckpointError, match="no 'config' entry"):
        load_policy(path)
    torch.save({"format": 2, "kind": "ppo", "config": {"ppo": {"gamma": 7}}}, path)
    with pytest.raises(CheckpointError, match="does not validate"):
        load_policy(path)
