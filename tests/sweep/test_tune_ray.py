"""Real tunes on a real Ray through the real CLI: ASHA + best.yaml, Optuna, PBT."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("ray.tune")
pytestmark = [pytest.mark.ray, pytest.mark.slow]

TINY = {
    "env": {"id": "rlformer/TMaze-v0", "kwargs": {"length": 3}},
    "rollout": {"envs_per_worker": 4, "fragment_length": 16},  # 64 env steps per iteration
    "model": {"core": {"n_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32, "memory_length": 8}},
    "ppo": {"num_minibatches": 2, "update_epochs": 2},
    "eval": {"episodes": 4, "num_envs": 4},
    "run": {"checkpoint_every": 2, "progress": False},
}


def _tune_file(tmp_path: Path, **spec: object) -> Path:
    path = tmp_path / "tune.yaml"
    body = {
        "name": "tiny",
        "base": TINY,
        "space": {"ppo.learning_rate": {"loguniform": [1e-5, 3e-3]}, "ppo.ent_coef": [0.0, 0.01]},
        "metric": "rollout/return_mean",
        "resources": {"cpu": 0.5},
        **spec,
    }
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def _run(*args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "rlformer.cli", *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise AssertionError(f"rlformer {args} failed:\n{result.stdout[-3000:]}\n{result.stderr}")
    return result


def _rows(folder: Path) -> list[dict[str, str]]:
    with open(folder / "trials.csv") as f:
        return list(csv.DictReader(f))


def test_asha_tune_stops_trials_early_and_writes_a_trainable_best_yaml(tmp_path: Path) -> None:
    # One trial at a time: each later trial meets the earlier ones at the rungs (256, 1024 env
    # steps), and ASHA stops those below the best quarter there. The metric is the logged
    # learning rate, which the config fixes, so which trials stop is known: the draws' learning
    # rates are 3.8e-4, 1.3e-5, 1.1e-5, 1.8e-3, 3.2e-4 (sample_seed 0).
    path = _tune_file(
        tmp_path,
        metric="lr",
        num_samples=5,
        budget=16 * 64,
        scheduler={"type": "asha", "time": "env_steps", "grace_period": 256, "reduction_factor": 4},
        max_concurrent=1,
    )
    out_dir = tmp_path / "out"
    out = _run("tune", str(path), "--dir", str(out_dir))
    rows = _rows(out_dir)
    assert len(rows) == 5
    finished = [r for r in rows if r["status"] == "finished"]
    stopped = [r for r in rows if r["status"] == "stopped early"]
    assert len(finished) + len(stopped) == 5, out.stdout[-3000:]
    assert [r["trial"][:3] for r in finished] == ["s00", "s03"], out.stdout[-3000:]
    assert [r["trial"][:3] for r in stopped] == ["s01", "s02", "s04"], out.stdout[-3000:]
    for row in finished:
        assert (row["iterations"], row["env_steps"]) == ("16", "1024")
    for row in stopped:
        assert int(row["env_steps"]) < 1024 and int(row["iterations"]) >= 4
    (best,) = [r for r in rows if r["best"] == "True"]
    assert best["trial"].startswith("s03")  # the highest rate among the finished
    assert (out_dir / "curves.png").stat().st_size > 10_000
    table = (out_dir / "trials.md").read_text()
    assert f"| {best['trial']} (best) |" in table and "stopped early" in table
    assert f"best: {best['trial'].rsplit('__', 1)[0]}" in out.stdout

    best_cfg = yaml.safe_load((out_dir / "best.yaml").read_text())
    trial_cfg = yaml.safe_load(
        next((out_dir / "trials" / best["trial"]).glob("run-*/config.yaml")).read_text()
    )
    assert best_cfg["ppo"]["learning_rate"] == trial_cfg["ppo"]["learning_rate"]
    assert best_cfg["ppo"]["ent_coef"] == trial_cfg["ppo"]["ent_coef"]
    assert best_cfg["model"] == trial_cfg["model"] and best_cfg["run"]["root"] == "runs"
    runs = tmp_path / "runs"
    train = _run(
        "train",
        str(out_dir / "best.yaml"),
        "--set",
        "ppo.total_steps=128",
        "--set",
        f"run.root={runs}",
        "--set",
        "eval.episodes=0",
    )
    (run_dir,) = runs.iterdir()
    steps = [json.loads(x)["step"] for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert steps == [64, 128], train.stdout[-2000:]

    # The same command on a finished tune trains nothing again; the report prints it again.
    metrics = {p: p.read_bytes() for p in out_dir.glob("trials/*/run-*/metrics.jsonl")}
    again = _run("tune", str(path), "--dir", str(out_dir))
    assert metrics == {p: p.read_bytes() for p in out_dir.glob("trials/*/run-*/metrics.jsonl")}
    assert _rows(out_dir) == rows
    report = _run("tune", "report", str(out_dir))
    assert "5 trials: 2 finished, 3 stopped early" in again.stdout
    assert report.stdout.strip() == again.stdout[again.stdout.index("| trial |") :].strip()


def test_optuna_tune(tmp_path: Path) -> None:
    pytest.importorskip("optuna")
    path = _tune_file(
        tmp_path, search="optuna", num_samples=2, budget=4 * 64, scheduler={"type": "none"}
    )
    out = _run("tune", str(path), "--dir", str(tmp_path / "out"))
    rows = _rows(tmp_path / "out")
    assert len(rows) == 2 and {r["status"] for r in rows} == {"finished"}, out.stdout[-2000:]
    for row in rows:
        record = json.loads((tmp_path / "out" / "trials" / row["trial"] / "trial.json").read_text())
        assert record["config"]["ppo"]["learning_rate"] == record["values"]["ppo.learning_rate"]
        assert 1e-5 <= record["values"]["ppo.learning_rate"] <= 3e-3
    assert (tmp_path / "out" / "best.yaml").is_file()


def test_pbt_tune_copies_checkpoints_between_members(tmp_path: Path) -> None:
    tiny = {**TINY, "run": {"checkpoint_every": 1, "progress": False}}
    path = _tune_file(
        tmp_path,
        base=tiny,
        metric="lr",  # fixed by each member's values: the lowest rate is always exploited
        num_samples=3,
        budget=8 * 64,  # three perturbation points, each met by every member (synch)
        scheduler={"type": "pbt", "time": "iterations", "perturbation_interval": 2, "synch": True},
        max_concurrent=3,
    )
    out = _run("tune", str(path), "--dir", str(tmp_path / "out"))
    assert re.search(r"3 trials: 3 finished", out.stdout), out.stdout[-3000:]
    trials = tmp_path / "out" / "trials"
    exploits = [json.loads(x) for p in trials.glob("*/exploits.jsonl") for x in p.open()]
    assert exploits, "PBT exploited no member"
    for trial in trials.iterdir():
        steps = [
            json.loads(x)["step"]
            for x in next(trial.glob("run-*/metrics.jsonl")).read_text().splitlines()
        ]
        assert steps[-1] == 512  # a member restarted from another's checkpoint still ends there
