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


def test_an_uninstalled_checkout_finds_every_algorithm_through_the_shim(tmp_path: Path) -> None:
    """A GPU machine runs the checkout from PYTHONPATH, where no entry points are installed: the
    shim's dist-info must name every algorithm pyproject.toml declares, loadable."""
    import importlib.metadata
    import importlib.util

    from rlformer.config.sections.registry import load_attr
    from rlformer.config.sections.spec import AlgorithmSpec

    module_spec = importlib.util.spec_from_file_location("gpu_check_script", SCRIPT)
    assert module_spec is not None and module_spec.loader is not None
    script = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(script)
    env = script.python_env(tmp_path)
    shim = tmp_path / "shim"
    assert str(shim) in env["PYTHONPATH"].split(":")
    (dist,) = importlib.metadata.distributions(path=[str(shim)])
    points = {e.name: e.value for e in dist.entry_points if e.group == "rlformer.algorithms"}
    installed = importlib.metadata.entry_points(group="rlformer.algorithms")
    assert points == {e.name: e.value for e in installed} and "ppo" in points
    assert all(isinstance(load_attr(value), AlgorithmSpec) for value in points.values())


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without a GPU")
def test_keep_others_reruns_named_parts_and_keeps_the_rest_with_their_commit(
    tmp_path: Path,
) -> None:
    earlier = {
        "commit": "abc1234",
        "machine": {"gpu": "NVIDIA H200"},
        "parts": {
            "minatar_learner": {"passed": True, "gpu_over_cpu": 1.17},
            "cuda_tests": {"passed": False, "marked gpu": {"errors": 13}},
        },
    }
    (tmp_path / "gpu_check.json").write_text(json.dumps(earlier))
    result = gpu_check("--parts", "cuda_tests", "--keep-others", out=tmp_path)
    assert result.returncode == 0, result.stderr
    parts = json.loads((tmp_path / "gpu_check.json").read_text())["parts"]
    assert list(parts) == ["cuda_tests", "minatar_learner"]  # the script's order of parts
    assert parts["cuda_tests"]["passed"] is None  # rerun here: no GPU, so unverified
    kept = {"commit": "abc1234", "gpu": "NVIDIA H200", "passed": True, "gpu_over_cpu": 1.17}
    assert parts["minatar_learner"] == kept
