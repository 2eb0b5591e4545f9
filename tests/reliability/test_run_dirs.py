"""One process per run directory; unusable run roots are found before training starts."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlformer.runs.directory import RunDirError, RunLock, check_run_root
from rlformer.runs.training import train
from tests.reliability.tiny import tiny_config

HOLD = (
    "import sys, time; from rlformer.runs.directory import RunLock; "
    "RunLock(sys.argv[1]).acquire(); "
    "print('held', flush=True); time.sleep(60)"
)


def _hold_lock(run_dir: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run_dir)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_second_process_is_refused_and_a_killed_holder_frees_the_dir(tmp_path: Path) -> None:
    run_dir = train(tiny_config(tmp_path, "ppo.total_steps=64")).run_dir
    holder = _hold_lock(run_dir)
    try:
        with pytest.raises(RunDirError, match=f"in use by process {holder.pid}"):
            RunLock(run_dir).acquire()
        result = subprocess.run(
            [sys.executable, "-m", "rlformer.cli", "train", "--resume", str(run_dir)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 2
        assert f"in use by process {holder.pid}" in result.stderr
        assert "Traceback" not in result.stderr
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # The kernel dropped the dead holder's lock: no stale lock file blocks the directory.
    with RunLock(run_dir):
        pass


def test_unwritable_run_root_stops_before_training(tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("")
    with pytest.raises(RunDirError, match="not writable"):
        check_run_root(tmp_path / "a_file" / "runs")
    started = time.monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlformer.cli",
            "train",
            "--set",
            f"run.root={tmp_path / 'a_file' / 'runs'}",
            "--set",
            "env.id=CartPole-v1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    assert "run.root" in result.stderr and "not writable" in result.stderr
    assert "Traceback" not in result.stderr
    assert time.monotonic() - started < 120


def test_full_run_root_stops_before_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = shutil.disk_usage

    def nearly_full(path: str | Path) -> object:
        usage = real(path)
        return type(usage)(usage.total, usage.total - 10 * 2**20, 10 * 2**20)

    monkeypatch.setattr(shutil, "disk_usage", nearly_full)
    with pytest.raises(RunDirError, match="only 10 MiB free"):
        check_run_root(tmp_path)
    check_run_root(tmp_path, needed_bytes=2**20)  # enough for a smaller need
