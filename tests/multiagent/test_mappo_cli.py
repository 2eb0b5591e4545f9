"""Multi-agent runs through the real CLI: a run SIGKILLed after a checkpoint and resumed equals
the run left alone, ``rlformer eval`` scores a team, and bad input is one line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

pytest.importorskip("pettingzoo")

from rlformer.runs.checkpoints import load_checkpoint  # noqa: E402

SETS = [
    "algo=mappo",
    "mappo.env=rlformer_envs.staggered:parallel_env",
    "mappo.env_kwargs={truncate: true}",
    "mappo.total_steps=1536",
    "rollout.envs_per_worker=4",
    "rollout.fragment_length=32",
    "run.checkpoint_every=1",
    "run.keep_checkpoints=20",
    "model.core={n_layers: 1, d_model: 32, n_heads: 2, d_ff: 64}",
    "eval.episodes=8",
]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "rlformer.cli", *args]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_cli(*args), capture_output=True, text=True, timeout=600)


def _sets(*items: str) -> list[str]:
    return [arg for item in items for arg in ("--set", item)]


def _rows(run: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith(("time/", "resumed"))} for r in rows]


def check_killed_run_resumes_to_the_run_left_alone(tmp_path: Path, *extra: str) -> Path:
    """A run SIGKILLed after a few checkpoints and resumed ends with the weights and training
    rows of the same run left alone; the straight run's directory."""
    sets = [*SETS, *extra]
    whole = _run("train", *_sets(*sets, f"run.root={tmp_path}", "run.name=whole"))
    assert whole.returncode == 0, whole.stderr[-2000:]
    killed_root = tmp_path / "killed"
    proc = subprocess.Popen(
        _cli("train", *_sets(*sets, f"run.root={killed_root}", "run.name=killed")),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # SIGKILL once it has checkpointed a few iterations
        if len(list(killed_root.glob("*/checkpoints/ckpt_*.pt"))) >= 4:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    (run,) = killed_root.glob("killed*")
    assert load_checkpoint(run)["iteration"] < 12
    resumed = _run("train", "--resume", str(run))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    (straight,) = tmp_path.glob("whole*")
    a, b = load_checkpoint(straight), load_checkpoint(run)
    assert a["iteration"] == b["iteration"] == 12
    for key, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][key]), key
    training = [r for r in _rows(straight) if "rollout/return_mean" in r]
    assert training == [r for r in _rows(run) if "rollout/return_mean" in r]
    return straight


@pytest.mark.slow
def test_killed_run_resumes_to_the_run_left_alone(tmp_path: Path) -> None:
    straight = check_killed_run_resumes_to_the_run_left_alone(tmp_path)
    # The team is scored by rlformer eval from the run: team and per-agent returns.
    shown = _run("eval", str(straight), "--episodes", "6", "--json", str(tmp_path / "e.json"))
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "mean return per agent: agent_0" in shown.stdout
    report = json.loads((tmp_path / "e.json").read_text())["reports"][0]
    assert report["episodes"] == 6 and "return/agent_2" in report["episodes_detail"][0]
    refused = _run("eval", str(straight), "--env", "CartPole-v1")
    assert refused.returncode != 0 and "plays its own task" in refused.stderr


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["mappo.env=mpe2.simple_spread_v3:env"], "aec_to_parallel"),
        (["mappo.groups={a: [agent_0, agent_7]}"], "does not have"),
        (["ppo.total_steps=5000"], "mappo.total_steps"),
        (["env.id=Acrobot-v1"], "never reads the env section"),
    ],
)
def test_bad_multi_agent_input_is_one_line(sets: list[str], message: str) -> None:
    base = ["algo=mappo", "mappo.env=rlformer_envs.staggered:parallel_env"]
    done = _run("train", "--dry-run", *_sets(*base, *sets))
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr


def test_dry_run_names_groups_and_critic() -> None:
    done = _run(
        "train", "--dry-run",
        *_sets("algo=mappo", "mappo.env=mpe2.simple_speaker_listener_v4:parallel_env"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "2 agents in 2 group(s)" in done.stdout and "critic state" in done.stdout
    assert "group speaker: agents speaker_0" in done.stdout
    assert "model.value_scaling: return_std" in done.stdout  # the single agent's default
