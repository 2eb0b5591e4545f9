"""Exports written in earlier policy formats keep loading and acting.

``data/export_v1_cartpole_gtrxl`` was written by the format-1 exporter (see ``data/README.md``)
with the actions its PyTorch policy took on recorded inputs; every way of running an export
must reproduce them: :func:`load_policy`, the reference runner without torch, ``rlformer eval``.
"""

from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from rlformer.export.onnx_policy import ExportedPolicy
from rlformer.policies import load_policy

pytest.importorskip("onnxruntime")

REPO = Path(__file__).resolve().parents[2]
V1 = Path(__file__).parent / "data" / "export_v1_cartpole_gtrxl"


def recorded() -> dict[str, np.ndarray]:
    with np.load(V1 / "episodes.npz") as data:
        return {name: data[name] for name in data.files}


def test_format_1_export_loads_and_acts_as_its_pytorch_policy_did() -> None:
    assert json.loads((V1 / "policy.json").read_text())["format_version"] == 1
    policy = load_policy(V1)
    assert isinstance(policy, ExportedPolicy)
    steps = recorded()
    state = policy.initial_state(steps["obs"].shape[1])
    for t in range(len(steps["obs"])):
        actions, state = policy.act(
            steps["obs"][t], state, steps["episode_start"][t], steps["reward"][t]
        )
        np.testing.assert_array_equal(actions, steps["action"][t], err_msg=f"step {t}")


def test_format_1_export_pickles_with_its_model(tmp_path: Path) -> None:
    shutil.copytree(V1, tmp_path / "v1")
    data = pickle.dumps(load_policy(tmp_path / "v1"))
    shutil.rmtree(tmp_path / "v1")
    policy = pickle.loads(data)
    steps = recorded()
    state = policy.initial_state(steps["obs"].shape[1])
    for t in range(len(steps["obs"])):
        actions, state = policy.act(
            steps["obs"][t], state, steps["episode_start"][t], steps["reward"][t]
        )
        np.testing.assert_array_equal(actions, steps["action"][t], err_msg=f"step {t}")


def test_reference_runner_runs_a_format_1_export_without_torch(tmp_path: Path) -> None:
    runner = tmp_path / "onnx_runner.py"  # copied out of the package, as a user would
    shutil.copy(REPO / "rlformer" / "export" / "onnx_runner.py", runner)
    script = textwrap.dedent(
        f"""
        import json, sys
        import numpy as np
        from onnx_runner import OnnxPolicy
        policy = OnnxPolicy({str(V1)!r}, threads=1)
        data = np.load({str(V1 / "episodes.npz")!r})
        state, actions = policy.initial_state(data["obs"].shape[1]), []
        for t in range(len(data["obs"])):
            action, state = policy.act(
                data["obs"][t], state, data["episode_start"][t], data["reward"][t]
            )
            actions.append(action.tolist())
        loaded = [m for m in sys.modules if m.split(".")[0] in ("torch", "rlformer")]
        print(json.dumps({{"actions": actions, "loaded": loaded}}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["loaded"] == []
    np.testing.assert_array_equal(report["actions"], recorded()["action"])


@pytest.mark.slow
def test_rlformer_eval_evaluates_a_format_1_export(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    command = ["eval", str(V1), "--episodes", "2", "--seeds", "1", "--json", str(out)]
    result = subprocess.run(
        [sys.executable, "-m", "rlformer.cli", *command],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())["reports"][0]
    assert report["task"] == "CartPole-v1" and len(report["episodes_detail"]) == 2
