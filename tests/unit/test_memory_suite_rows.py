"""The memory suite's result rows say which code produced them (scripts/bench/memory_suite.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "bench"))
import memory_suite  # noqa: E402


def test_new_rows_record_the_checkout_and_old_rows_read_as_unknown(tmp_path: Path) -> None:
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    fresh = memory_suite.Result("t", "gtrxl", 0, 10, 1.0, 0.5, None, [(10, 0.5)])
    assert fresh.commit is not None and fresh.commit.startswith(head)
    row = asdict(fresh)
    old = {key: value for key, value in row.items() if key not in ("commit", "overrides")}
    out = tmp_path / "results.jsonl"
    out.write_text(json.dumps(old) + "\n" + json.dumps(row) + "\n")
    before, after = memory_suite._done(out)
    assert before.commit is None and before.overrides == []
    assert after.commit == fresh.commit and after.score == 0.5


def test_sb3_agents_are_scored_greedily_or_sampling_as_the_config_says() -> None:
    import gymnasium as gym
    import numpy as np
    from stable_baselines3 import PPO

    env = gym.make("CartPole-v1")
    model = PPO("MlpPolicy", env, seed=0, device="cpu")
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(256, 4)).astype(np.float32)
    starts = np.ones(256, dtype=bool)
    policy = memory_suite.sb3_eval_policy(model, env, env.observation_space)
    greedy, _ = model.predict(obs, deterministic=True)
    acted, _ = policy.act(obs, None, starts, deterministic=True)
    np.testing.assert_array_equal(acted, greedy)
    # An untrained policy is near uniform: sampling departs from the greedy action about half
    # the time over 256 states.
    sampled, _ = policy.act(obs, None, starts, deterministic=False)
    assert (sampled != greedy).sum() > 64
    env.close()


def test_report_shows_the_success_rate_only_where_every_seed_has_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = [
        memory_suite.Result("grid", "gtrxl", 0, 10, 1.0, 0.98, 1.0, [(10, 0.9)]),
        memory_suite.Result("grid", "gtrxl", 1, 10, 1.0, 0.49, 0.5, [(10, 0.5)]),
        memory_suite.Result("grid", "gru", 0, 10, 1.0, 0.49, None, [(10, 0.5)]),
    ]
    memory_suite.report(rows, plots=None)
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line}
    assert "75.0%" in lines["gtrxl"]
    assert "%" not in lines["gru"]


def test_sb3_setup_steps_envs_in_subprocesses_and_is_recorded(tmp_path: Path) -> None:
    """``--sb3-subprocess-envs`` gives SB3 one process per env, the rows say so, and a default
    setup adds nothing to a row (older rows and new default rows read the same)."""
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    cfg = memory_suite.task_config(memory_suite.TASKS["cartpole-novel"], 64, 0, tmp_path)
    for subprocess_envs, kind in ((False, DummyVecEnv), (True, SubprocVecEnv)):
        venv = memory_suite._sb3_env(cfg, 2, 0, False, False, subprocess_envs)
        try:
            assert isinstance(venv, kind)
            obs = venv.reset()
            assert obs.shape == (2, 2)  # CartPole without velocities: position and angle
        finally:
            venv.close()
    assert memory_suite.SB3Setup().describe() == {}
    assert memory_suite.SB3Setup(threads=2).describe() == {"threads": 2, "subprocess_envs": False}
