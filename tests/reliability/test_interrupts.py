"""SIGINT / SIGTERM through the real CLI: checkpoint, clean exit, resume equals a straight run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from rlformer.runs.checkpoints import load_checkpoint
from tests.reliability.tiny import TINY_OVERRIDES

STEPS = ["ppo.total_steps=2560", "run.checkpoint_every=1000"]  # 40 iterations, 1 final checkpoint


def _args(root: Path, *extra: str) -> list[str]:
    sets = [*TINY_OVERRIDES, *STEPS, f"run.root={root}", *extra]
    return [arg for item in sets for arg in ("--set", item)]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "rlformer.cli", *args]


def _start_and_signal(
    root: Path, signals: list[signal.Signals], *extra: str, min_rows: int = 3
) -> subprocess.CompletedProcess:
    """Start a run, wait for ``min_rows`` logged iterations, send ``signals`` one by one.

    Further signals are sent once the run has acknowledged the first (two pending signals of
    one kind would reach the process as one).
    """
    root.mkdir(parents=True, exist_ok=True)
    log = root.parent / f"{root.name}.stderr"
    with open(log, "w") as err_file:
        proc = subprocess.Popen(
            _cli("train", *_args(root, *extra)), stdout=subprocess.PIPE, stderr=err_file, text=True
        )
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # wait until it has logged a few iterations
            metrics = list(root.glob("*/metrics.jsonl"))
            if metrics and len(metrics[0].read_text().splitlines()) >= min_rows:
                break
            time.sleep(0.01)
        first, *more = signals
        proc.send_signal(first)
        while " received: " not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.01)
        for sig in more:
            proc.send_signal(sig)
        out, _ = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, log.read_text())


def _rows(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if not k.startswith("time/")} for row in rows]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_signal_checkpoints_then_resume_equals_straight_run(
    tmp_path: Path, sig: signal.Signals
) -> None:
    straight = subprocess.run(
        _cli("train", *_args(tmp_path / "straight")), capture_output=True, text=True, timeout=600
    )
    assert straight.returncode == 0, straight.stderr

    stopped = _start_and_signal(tmp_path / "stopped", [sig])
    assert stopped.returncode == 128 + sig, f"finished before the signal?\n{stopped.stderr}"
    (run_dir,) = (tmp_path / "stopped").iterdir()
    assert f"stopped by {sig.name} after iteration" in stopped.stderr
    assert f"rlformer train --resume {run_dir}" in stopped.stderr
    assert "Traceback" not in stopped.stderr
    payload = load_checkpoint(run_dir)
    stopped_at = payload["iteration"]
    assert 3 <= stopped_at < 40
    assert len(_rows(run_dir)) == stopped_at  # every finished iteration logged, nothing lost

    resumed = subprocess.run(
        _cli("train", "--resume", str(run_dir)), capture_output=True, text=True, timeout=600
    )
    assert resumed.returncode == 0, resumed.stderr
    (straight_dir,) = (tmp_path / "straight").iterdir()
    a, b = load_checkpoint(straight_dir)["model"], load_checkpoint(run_dir)["model"]
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert _rows(straight_dir) == _rows(run_dir)


@pytest.mark.slow
def test_second_signal_stops_at_once(tmp_path: Path) -> None:
    # Iterations of 16384 env steps take seconds, so the second signal lands inside one.
    long_iterations = ["rollout.fragment_length=4096", "ppo.total_steps=163840"]
    stopped = _start_and_signal(
        tmp_path, [signal.SIGINT, signal.SIGINT], *long_iterations, min_rows=1
    )
    assert stopped.returncode == 130
    assert "second SIGINT: stopping now" in stopped.stderr
    assert "Traceback" not in stopped.stderr


def test_a_signal_late_in_an_iteration_stops_after_the_next_checkpoint(tmp_path: Path) -> None:
    """A signal that lands after an iteration decided not to checkpoint (here: in the
    per-iteration callback, the last step before the loop looks at the stop flag) is acted on
    one iteration later, after that iteration's checkpoint: never "checkpoint written" with
    none written."""
    from rlformer.runs.signals import Interrupted
    from rlformer.runs.training import train
    from tests.reliability.tiny import tiny_config

    def signal_at_two(iteration: int, metrics: dict) -> None:
        if iteration == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    cfg = tiny_config(tmp_path, *STEPS, "run.progress=false")
    with pytest.raises(Interrupted) as stopped:
        train(cfg, on_iteration=signal_at_two)
    assert "after iteration 3/40, checkpoint written" in str(stopped.value)
    (run_dir,) = tmp_path.iterdir()
    assert load_checkpoint(run_dir)["iteration"] == len(_rows(run_dir)) == 3
