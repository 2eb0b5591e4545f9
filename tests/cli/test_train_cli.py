"""The real CLI end to end: train, errors, kill + resume, evaluation in a fresh process."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

TINY = [
    "--set",
    "env.id=rlformer/TMaze-v0",
    "--set",
    "env.kwargs.length=3",
    "--set",
    "rollout.envs_per_worker=4",
    "--set",
    "rollout.fragment_length=16",
    "--set",
    "model.core.n_layers=1",
    "--set",
    "model.core.d_model=16",
    "--set",
    "model.core.n_heads=2",
    "--set",
    "model.core.d_ff=32",
    "--set",
    "model.core.memory_length=8",
    "--set",
    "ppo.num_minibatches=2",
    "--set",
    "ppo.update_epochs=2",
    "--set",
    "eval.episodes=4",
]


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


def _run_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir())


def _metrics_without_timing(run_dir: Path) -> list[dict[str, float]]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if not k.startswith("time/")} for row in rows]


def _final_params(run_dir: Path) -> dict[str, torch.Tensor]:
    from rlformer.runs.directory import load_checkpoint

    return load_checkpoint(run_dir)["model"]


@pytest.mark.slow
def test_train_writes_a_complete_run_directory(tmp_path: Path) -> None:
    out = rlformer(
        "train",
        "--set",
        f"run.root={tmp_path}",
        "--set",
        "ppo.total_steps=128",
        *TINY,
        cwd=tmp_path,
    )
    (run_dir,) = _run_dirs(tmp_path)
    assert f"run directory: {run_dir}" in out.stdout
    assert (run_dir / "config.yaml").is_file()
    assert (run_dir / "checkpoints" / "latest").is_file()
    assert any((run_dir / "tb").iterdir())
    rows = _metrics_without_timing(run_dir)
    assert [r["step"] for r in rows[:2]] == [64, 128]
    assert "eval/return_mean" in rows[-1]
    evaluation = json.loads((run_dir / "eval.json").read_text())
    assert evaluation["episodes"] == 4 and 0.0 <= evaluation["success_rate"] <= 1.0

    # Evaluate in a fresh process with nothing but the run directory (no config file at hand).
    result = rlformer(
        "eval",
        str(run_dir),
        "--episodes",
        "6",
        "--seeds",
        "2",
        "--json",
        str(tmp_path / "e.json"),
        "--csv",
        str(tmp_path / "e.csv"),
        cwd=tmp_path,
    )
    assert "IQM" in result.stdout and "rlformer/TMaze-v0" in result.stdout
    (report,) = json.loads((tmp_path / "e.json").read_text())["reports"]
    assert report["episodes"] == 12 and len(report["episodes_detail"]) == 12
    assert report["mean_ci"][0] <= report["mean"] <= report["mean_ci"][1]
    assert len((tmp_path / "e.csv").read_text().splitlines()) == 13


def check_killed_run_resumes_to_identical_result(tmp_path: Path, backend: list[str]) -> None:
    """A run SIGKILLed after its first checkpoint and resumed ends with the weights and metrics
    of the same run left alone."""
    steps = ["--set", "ppo.total_steps=640", "--set", "run.checkpoint_every=2", *backend]
    straight_root, killed_root = tmp_path / "straight", tmp_path / "killed"
    rlformer("train", "--set", f"run.root={straight_root}", *steps, *TINY, cwd=tmp_path)

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rlformer.cli",
            "train",
            "--set",
            f"run.root={killed_root}",
            *steps,
            *TINY,
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if killed_root.exists() and list(killed_root.glob("*/checkpoints/latest")):
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    (killed_dir,) = _run_dirs(killed_root)
    rlformer("train", "--resume", str(killed_dir), cwd=tmp_path)

    (straight_dir,) = _run_dirs(straight_root)
    a, b = _final_params(straight_dir), _final_params(killed_dir)
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert _metrics_without_timing(straight_dir) == _metrics_without_timing(killed_dir)


@pytest.mark.slow
def test_killed_run_resumes_to_identical_result(tmp_path: Path) -> None:
    check_killed_run_resumes_to_identical_result(tmp_path, backend=[])


@pytest.mark.slow
def test_killed_run_with_two_learner_threads_resumes_to_identical_result(tmp_path: Path) -> None:
    """The learner's threads (workers act on one) keep the resume exact."""
    check_killed_run_resumes_to_identical_result(tmp_path, ["--set", "run.torch_threads=2"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "ppo.lerning_rate=1"], "ppo.lerning_rate: unknown key"),
        (["--set", "ppo.gamma=1.5"], "ppo.gamma: got 1.5; Input should be less than or equal to 1"),
        (["--set", "env.id=CartPol-v1"], "unknown env id 'CartPol-v1'. Did you mean CartPole-v1"),
        (["--set", "run.progress=maybe"], "run.progress: got 'maybe'; expected true or false"),
    ],
)
def test_bad_input_exits_2_with_one_clear_line(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = rlformer("train", "--set", f"run.root={tmp_path}", *args, cwd=tmp_path, check=False)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert not any(tmp_path.iterdir()), "a rejected config must not create a run directory"


def test_dry_run_checks_without_leaving_a_trace(tmp_path: Path) -> None:
    """--dry-run probes where run.root would go but creates nothing, and still refuses a root
    that could not be created."""
    root = tmp_path / "not" / "yet" / "runs"
    result = rlformer("train", "--set", f"run.root={root}", "--dry-run", *TINY, cwd=tmp_path)
    assert result.stdout.startswith("ok: ppo on rlformer/TMaze-v0"), result.stdout
    assert not (tmp_path / "not").exists()
    (tmp_path / "a_file").write_text("")
    blocked = tmp_path / "a_file" / "runs"
    result = rlformer(
        "train", "--set", f"run.root={blocked}", "--dry-run", cwd=tmp_path, check=False
    )
    assert result.returncode == 2 and "not writable" in result.stderr, result.stderr


def test_missing_config_and_checkpoint_errors(tmp_path: Path) -> None:
    result = rlformer("train", str(tmp_path / "nope.yaml"), cwd=tmp_path, check=False)
    assert result.returncode == 2 and "config file not found" in result.stderr
    result = rlformer("eval", str(tmp_path), cwd=tmp_path, check=False)
    assert result.returncode == 2 and "not a run directory" in result.stderr
    (tmp_path / "checkpoints").mkdir()
    result = rlformer("eval", str(tmp_path), cwd=tmp_path, check=False)
    assert result.returncode == 2 and "no checkpoint yet" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command", ["train", "eval", "collect", "dataset", "config-doc"])
def test_every_help_is_complete(tmp_path: Path, command: str) -> None:
    result = rlformer(command, "--help", cwd=tmp_path)
    assert "Usage" in result.stdout and len(result.stdout.splitlines()) > 3


@pytest.mark.slow
def test_eval_puts_a_stable_baselines3_model_in_the_same_table(tmp_path: Path) -> None:
    from stable_baselines3 import PPO

    PPO("MlpPolicy", "CartPole-v1", n_steps=64, seed=0, device="cpu").save(tmp_path / "ppo.zip")
    result = rlformer(
        "eval",
        f"sb3:{tmp_path / 'ppo.zip'}",
        "--env",
        "CartPole-v1",
        "--episodes",
        "5",
        "--json",
        str(tmp_path / "sb3.json"),
        cwd=tmp_path,
    )
    assert "IQM" in result.stdout and "CartPole-v1" in result.stdout
    (report,) = json.loads((tmp_path / "sb3.json").read_text())["reports"]
    assert report["episodes"] == 5 and report["agent"].startswith("sb3:")
    assert all(row["return"] == row["length"] for row in report["episodes_detail"])  # 1 per step
    missing_env = rlformer("eval", f"sb3:{tmp_path / 'ppo.zip'}", cwd=tmp_path, check=False)
    assert missing_env.returncode == 2 and "give --env" in missing_env.stderr
    wrong_env = rlformer(
        "eval", f"sb3:{tmp_path / 'ppo.zip'}", "--env", "Pendulum-v1", cwd=tmp_path, check=False
    )
    assert wrong_env.returncode == 2
    assert "observations Box(3,), agent expects Box(4,)" in wrong_env.stderr
    model = f"sb3:{tmp_path / 'ppo.zip'}"
    no_dt = rlformer(
        "eval", model, "--env", "CartPole-v1", "--target-return", "10", cwd=tmp_path, check=False
    )
    assert no_dt.returncode == 2 and "none of the agents is one" in no_dt.stderr
    # An output that cannot be written fails before the evaluation, not after it.
    (tmp_path / "taken").write_text("")
    bad_out = rlformer(
        "eval", model, "--env", "CartPole-v1", "--csv", "taken/x.csv", cwd=tmp_path, check=False
    )
    assert bad_out.returncode == 2 and "cannot write taken/x.csv" in bad_out.stderr
    assert "Traceback" not in no_dt.stderr + bad_out.stderr
    nested = rlformer(
        "eval",
        model,
        "--env",
        "CartPole-v1",
        "--episodes",
        "2",
        "--csv",
        "new/dir/x.csv",
        cwd=tmp_path,
    )
    assert nested.returncode == 0 and (tmp_path / "new" / "dir" / "x.csv").exists()


@pytest.mark.slow
def test_suite_puts_rlformer_and_sb3_agents_on_their_tasks_in_one_table(tmp_path: Path) -> None:
    from stable_baselines3 import PPO

    PPO("MlpPolicy", "CartPole-v1", n_steps=64, seed=0, device="cpu").save(tmp_path / "ppo.zip")
    rlformer(
        "train", "--set", "ppo.total_steps=128", "--set", "eval.episodes=0", *TINY, cwd=tmp_path
    )
    (run_dir,) = _run_dirs(tmp_path / "runs")
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "name: mixed\nepisodes: 3\nseeds: 2\ntasks:\n"
        "  - {env: rlformer/TMaze-v0, kwargs: {length: 3}, label: tmaze-3}\n"
        "  - {env: rlformer/TMaze-v0, kwargs: {length: 7}, label: tmaze-7}\n"
        "  - {env: CartPole-v1, max_episode_steps: 30, label: cartpole-30}\n"
    )
    agents = [str(run_dir), f"sb3:{tmp_path / 'ppo.zip'}"]
    result = rlformer(
        "eval", *agents, "--suite", str(suite), "--json", "s.json", "--csv", "s.csv", cwd=tmp_path
    )
    reports = json.loads((tmp_path / "s.json").read_text())["reports"]
    pairs = [(r["agent"], r["task"]) for r in reports]
    assert pairs == [(agents[0], "tmaze-3"), (agents[0], "tmaze-7"), (agents[1], "cartpole-30")]
    assert all(r["episodes"] == 6 and len(r["episodes_detail"]) == 6 for r in reports)
    assert all(row["length"] <= 30 for row in reports[2]["episodes_detail"])  # suite time limit
    assert reports[0]["success_rate"] is not None and reports[2]["success_rate"] is None
    assert f"skipped {agents[1]} on tmaze-3" in result.stderr
    assert len((tmp_path / "s.csv").read_text().splitlines()) == 1 + 18
    # A suite that fits no agent is an error, as is a malformed suite.
    (tmp_path / "bad.yaml").write_text("name: x\ntasks:\n  - {env: Pendulum-v1, episodes: 3}\n")
    bad = rlformer("eval", str(run_dir), "--suite", "bad.yaml", cwd=tmp_path, check=False)
    assert bad.returncode == 2 and "tasks.0.episodes: unknown key" in bad.stderr
    (tmp_path / "other.yaml").write_text("name: other\ntasks:\n  - {env: Pendulum-v1}\n")
    other = rlformer("eval", str(run_dir), "--suite", "other.yaml", cwd=tmp_path, check=False)
    assert other.returncode == 2 and "fits no task of suite 'other'" in other.stderr
