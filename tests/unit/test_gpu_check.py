"""The GPU check script: on a machine without a GPU it records every part as unverified, and
its parts' code runs (a rehearsal on the CPU), so a GPU session's minutes are not spent on a
broken script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).parents[2]
SCRIPT = REPO / "scripts" / "gpu_check.py"


def gpu_check(*args: str, out: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(SCRIPT), "--out", str(out), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without a GPU")
def test_without_a_gpu_every_part_is_unverified(tmp_path: Path) -> None:
    result = gpu_check(out=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert report["machine"]["cuda"] is False and report["parts"]
    assert all(part["passed"] is None for part in report["parts"].values())
    page = (tmp_path / "gpu_check.md").read_text()
    assert page.count("| unverified |") == len(report["parts"])


@pytest.mark.slow
def test_a_rehearsal_runs_the_export_and_learner_parts_on_the_cpu(tmp_path: Path) -> None:
    parts = ("--parts", "export_on_cuda", "minatar_learner")
    result = gpu_check("--rehearse", *parts, out=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert report["rehearsal"] is True
    export = report["parts"]["export_on_cuda"]
    assert export["passed"] and export["actions_differing"] == 0 and export["steps"] > 0
    learner = report["parts"]["minatar_learner"]
    assert learner["gpu_learner"]["env_steps_per_s"] > 0 and learner["cpu_learner"]["iterations"]
