"""The installed ``rlformer`` console script, run as a user runs it: from the folder holding
their env module, with no PYTHONPATH. Training (on an embedded Ray's workers too), evaluation
of the run, export and evaluation of the export all import ``myenvs`` from that folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_spaces_cli import USER_CONFIG, USER_MODULE

CONSOLE_SCRIPT = Path(sys.executable).with_name("rlformer")


def console(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``rlformer ARGS`` through the installed script, in ``cwd``, without PYTHONPATH."""
    assert CONSOLE_SCRIPT.is_file(), f"no console script at {CONSOLE_SCRIPT}: pip install -e ."
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAY_ADDRESS")}
    return subprocess.run(
        [str(CONSOLE_SCRIPT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.mark.slow
@pytest.mark.ray
def test_the_console_script_finds_env_modules_in_its_working_directory(tmp_path: Path) -> None:
    (tmp_path / "myenvs.py").write_text(USER_MODULE)
    (tmp_path / "recall.yaml").write_text(USER_CONFIG)
    trained = console("train", "recall.yaml", "--set", "run.root=runs", cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    evaluated = console("eval", f"runs/{run_dir.name}", "--episodes", "2", cwd=tmp_path)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert "Recall-v0" in evaluated.stdout
    exported = console("export", f"runs/{run_dir.name}", "--out", "exported", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr[-3000:]
    from_export = console("eval", "exported", "--episodes", "2", cwd=tmp_path)
    assert from_export.returncode == 0, from_export.stderr[-3000:]
    assert "Recall-v0" in from_export.stdout


def test_an_action_mask_key_the_env_info_lacks_stops_before_the_run_directory(
    tmp_path: Path,
) -> None:
    settings = [
        "env.id=rlformer/MaskedRecall-v0",
        "env.action_mask=info:no_such_key",
        "run.root=runs",
    ]
    result = console("train", *(x for s in settings for x in ("--set", s)), cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "info:no_such_key" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "runs").exists(), "the run directory was made before the check"
