"""MinAtar through the real CLI: its boolean 10x10xC grids, its ids registered by a
``module:function`` import on the driver and on Ray workers, and a run directory whose saved
config calls that function, which eval, collect, resume and exports load only with
--trust-checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
BREAKOUT = REPO / "configs" / "minatar" / "ppo_breakout.yaml"
REGISTER = "minatar.gym:register_envs"

pytest.importorskip("minatar")


def rlformer(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "rlformer.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"rlformer {args} failed:\n{result.stdout}\n{result.stderr}")
    return result


def _refused_in_one_line(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert f"env.imports entry {REGISTER!r}" in line and "--trust-checkpoint" in line


@pytest.mark.slow
@pytest.mark.ray
def test_ppo_on_minatar_breakout_on_ray_then_loads_only_when_trusted(tmp_path: Path) -> None:
    # The shipped config, shrunk to one PPO iteration on one Ray worker: the worker builds its
    # envs in its own process, so MinAtar's ids exist there only if the entry was called there.
    tiny = [
        f"run.root={tmp_path / 'runs'}",
        "run.progress=false",
        "rollout.backend=ray",
        "rollout.num_workers=1",
        "rollout.envs_per_worker=2",
        "rollout.fragment_length=32",
        "ppo.total_steps=64",
        "ppo.num_minibatches=2",
        "eval.episodes=2",
    ]
    sets = [item for arg in tiny for item in ("--set", arg)]
    rlformer("train", str(BREAKOUT), *sets, cwd=tmp_path)
    (run_dir,) = sorted((tmp_path / "runs").iterdir())
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["step"] == 64 and "loss/policy" in rows[0]
    assert json.loads((run_dir / "eval.json").read_text())["episodes"] == 2

    # Loading never runs code: the saved entry would be called as soon as an env is built.
    _refused_in_one_line(
        rlformer("eval", str(run_dir), "--episodes", "2", cwd=tmp_path, check=False)
    )
    collect = ["collect", "--policy", str(run_dir), "--steps", "16", "--out", "d.hdf5"]
    _refused_in_one_line(rlformer(*collect, cwd=tmp_path, check=False))
    resume = ["train", "--resume", str(run_dir), "--set", "ppo.total_steps=128"]
    _refused_in_one_line(rlformer(*resume, cwd=tmp_path, check=False))
    assert not (tmp_path / "d.hdf5").exists()

    trusted = rlformer("eval", str(run_dir), "--episodes", "2", "--trust-checkpoint", cwd=tmp_path)
    assert "MinAtar/Breakout-v1" in trusted.stdout
    # An export says its training env too, so it is held to the same rule.
    rlformer("export", str(run_dir), "--out", "exported", "--trust-checkpoint", cwd=tmp_path)
    _refused_in_one_line(rlformer("eval", "exported", "--episodes", "2", cwd=tmp_path, check=False))
    rlformer(*resume, "--set", "rollout.backend=local", "--trust-checkpoint", cwd=tmp_path)
    steps = [
        json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()
    ]
    assert max(steps) == 128


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            # the Nature CNN named for a 10x10 grid (cnn: auto would choose minatar)
            [f"env.imports=[{REGISTER}]", "model.cnn=nature"],
            "is a 10x10 image, smaller than the Nature CNN's 36x36: set model.cnn=impala (any "
            "size), model.cnn=minatar",
        ),
        (
            ["env.imports=[minatar.gym:register_env]", "model.cnn=minatar"],
            "env.imports entry 'minatar.gym:register_env': module 'minatar.gym' has no attribute "
            "'register_env'; check the spelling",
        ),
        (
            ["env.imports=[minatar.gym]"],  # the module alone registers nothing
            "unknown env id 'MinAtar/Breakout-v1'. MinAtar's ids come with env.imports: "
            f"['{REGISTER}']",
        ),
    ],
    ids=["nature-cnn", "missing-function", "module-only"],
)
def test_minatar_mistakes_exit_2_with_one_line(
    tmp_path: Path, args: list[str], message: str
) -> None:
    base = [f"run.root={tmp_path / 'runs'}", "env.id=MinAtar/Breakout-v1"]
    sets = [item for arg in [*base, *args] for item in ("--set", arg)]
    result = rlformer("train", *sets, cwd=tmp_path, check=False)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "runs").exists()
