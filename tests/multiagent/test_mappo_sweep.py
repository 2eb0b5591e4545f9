"""A sweep of multi-agent configs (tasks x critics) on a real local Ray, reported over team
returns, and a tune (ASHA) over team configs whose best config trains."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pettingzoo")
pytest.importorskip("ray")

pytestmark = [pytest.mark.ray, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def test_sweep_trains_team_trials_and_reports_their_returns(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        f"""
name: teams
base: {REPO / "configs" / "mappo_relay.yaml"}
set:
  mappo.total_steps: 512
  rollout.envs_per_worker: 4
  rollout.fragment_length: 64
  model.core: {{n_layers: 1, d_model: 16, n_heads: 2, d_ff: 32, memory_length: 16}}
  eval.episodes: 6
  run.checkpoint_every: 1
tasks:
  relay6: {{mappo.env_kwargs.delay: 6}}
axes:
  critic:
    central: {{mappo.critic: central}}
    independent: {{mappo.critic: independent}}
seeds: 1
metric: rollout/return_mean
score: eval/return_mean
resources: {{cpu: 0.5}}
"""
    )
    cli = [sys.executable, "-m", "rlformer.cli", "sweep"]
    done = subprocess.run(
        [*cli, "run", str(sweep)], capture_output=True, text=True, timeout=900, cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "2 finished, 0 unfinished, 0 failed" in done.stdout
    out = tmp_path / "report.json"
    report = subprocess.run(
        [*cli, "report", str(tmp_path / "sweeps" / "teams"), "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr[-2000:]
    assert "critic=central" in report.stdout and "critic=independent" in report.stdout
    rows = json.loads(out.read_text())
    rows = rows["rows"] if isinstance(rows, dict) else rows
    assert len(rows) == 2
    for row in rows:  # relay pays 0 or 1 per agent: the agents' mean return is a rate
        assert 0.0 <= row["mean"] <= 1.0


def test_tune_searches_team_configs_and_writes_a_trainable_best_yaml(tmp_path: Path) -> None:
    tune = tmp_path / "tune.yaml"
    tune.write_text(
        f"""
name: teams
base: {REPO / "configs" / "mappo_relay.yaml"}
set:
  rollout.envs_per_worker: 4
  rollout.fragment_length: 64
  model.core: {{n_layers: 1, d_model: 16, n_heads: 2, d_ff: 32, memory_length: 16}}
  mappo.env_kwargs.delay: 4
  eval.episodes: 4
  run.progress: false
space:
  ppo.learning_rate: {{loguniform: [1.0e-4, 3.0e-3]}}
  mappo.critic: [central, independent]
num_samples: 3
seeds: 1
budget: 512
metric: rollout/return_mean
mode: max
scheduler: {{type: asha, time: env_steps, grace_period: 256, reduction_factor: 3}}
search: random
resources: {{cpu: 0.5}}
"""
    )
    cli = [sys.executable, "-m", "rlformer.cli"]
    out = tmp_path / "out"
    done = subprocess.run(
        [*cli, "tune", str(tune), "--dir", str(out)],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "3 trials:" in done.stdout
    table = (out / "trials.md").read_text()
    assert table.count("| s0") == 3 and "(best)" in table
    best = out / "best.yaml"
    assert "algo: mappo" in best.read_text()
    trains = subprocess.run(
        [*cli, "train", str(best), "--dry-run"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert trains.returncode == 0, trains.stderr[-2000:]
    assert "ok: mappo on rlformer_envs.relay:parallel_env" in trains.stdout
