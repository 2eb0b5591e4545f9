"""Recording datasets from random, SB3 and rlformer policies, through the real CLI and the API."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rlformer.data import load_dataset
from rlformer.data.recorder import collect_dataset


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlformer.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_collect_then_info_round_trip(tmp_path: Path, env_id: str) -> None:
    out = tmp_path / "data.hdf5"
    result = _cli(
        "collect",
        "--env",
        env_id,
        "--steps",
        "600",
        "--num-envs",
        "4",
        "--out",
        str(out),
        "--seed",
        "3",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    data = load_dataset(out)
    assert data.num_transitions == 600
    assert data.metadata["env_id"] == env_id and data.metadata["policy"] == "random"
    np.testing.assert_allclose(data.metadata["episode_returns"], data.returns)
    info = _cli("dataset", "info", str(out), cwd=tmp_path)
    assert info.returncode == 0 and "transitions   600" in info.stdout
    assert f"env           {env_id}" in info.stdout


def test_recorded_transitions_are_real_env_transitions(tmp_path: Path) -> None:
    data = collect_dataset(
        "random", "CartPole-v1", 300, tmp_path / "c.hdf5", seed=1, num_envs=3, progress=False
    )
    # CartPole gives reward 1 per step; episodes end terminated or are cut at the end (truncated).
    for episode in data.episodes:
        assert (episode.rewards == 1).all()
        np.testing.assert_array_equal(episode.observations[1:], episode.next_observations[:-1])
    assert sum(e.terminated for e in data.episodes) >= 1
    assert sum(e.truncated for e in data.episodes) <= 3
    # Same seed, same data.
    again = collect_dataset(
        "random", "CartPole-v1", 300, tmp_path / "d.hdf5", seed=1, num_envs=3, progress=False
    )
    np.testing.assert_array_equal(again.episodes[0].actions, data.episodes[0].actions)


def test_noise_and_random_mixture_change_a_deterministic_policy(tmp_path: Path) -> None:
    from stable_baselines3 import PPO

    model = PPO("MlpPolicy", gym.make("Pendulum-v1"), n_steps=64, seed=0, device="cpu")
    model.save(tmp_path / "pend.zip")
    clean = collect_dataset(
        f"sb3:{tmp_path / 'pend.zip'}",
        "Pendulum-v1",
        200,
        tmp_path / "a.h5",
        num_envs=2,
        progress=False,
    )
    noisy = collect_dataset(
        f"sb3:{tmp_path / 'pend.zip'}",
        "Pendulum-v1",
        200,
        tmp_path / "b.h5",
        num_envs=2,
        noise=0.5,
        progress=False,
    )
    first_clean, first_noisy = clean.episodes[0].actions, noisy.episodes[0].actions
    assert not np.allclose(first_clean, first_noisy)
    assert np.abs(first_noisy).max() <= 2.0  # clipped to the action space


@pytest.mark.slow
def test_collect_from_sb3_ppo_and_recurrent_ppo(tmp_path: Path) -> None:
    from sb3_contrib import RecurrentPPO
    from stable_baselines3 import PPO

    PPO("MlpPolicy", "CartPole-v1", n_steps=128, seed=0, device="cpu").learn(256).save(
        tmp_path / "ppo.zip"
    )
    RecurrentPPO("MlpLstmPolicy", "CartPole-v1", n_steps=64, seed=0, device="cpu").save(
        tmp_path / "lstm.zip"
    )
    for name in ("ppo", "lstm"):
        out = tmp_path / f"{name}.hdf5"
        result = _cli(
            "collect",
            "--policy",
            f"sb3:{tmp_path / name}.zip",
            "--env",
            "CartPole-v1",
            "--steps",
            "200",
            "--out",
            str(out),
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stderr
        assert load_dataset(out).metadata["policy"].endswith(f"{name}.zip")


def test_bad_policy_and_env_are_clear_errors(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rlformer.cli import app

    out = str(tmp_path / "x.hdf5")
    cases = [
        (["--policy", f"sb3:{tmp_path / 'none.zip'}"], "model file not found"),
        (["--env", "Hoper-v5"], "Did you mean Hopper-v5"),
        (["--policy", str(tmp_path / "no-run")], "no-run"),
    ]
    for options, message in cases:
        result = CliRunner().invoke(app, ["collect", *options, "--steps", "10", "--out", out])
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith("error: ") and message in result.stderr
    assert not (tmp_path / "x.hdf5").exists()


def test_metadata_and_plain_progress_lines_off_a_terminal(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import rlformer

    data = collect_dataset("random", "Pendulum-v1", 250, tmp_path / "p.hdf5", seed=4, num_envs=2)
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("collected")]
    assert lines[-1].startswith("collected 250/250 steps") and 5 <= len(lines) <= 11
    assert "\r" not in "".join(lines)  # no bar redraws in logs
    again = load_dataset(tmp_path / "p.hdf5")
    assert again.metadata["rlformer_version"] == rlformer.__version__
    assert (again.metadata["seed"], again.metadata["num_envs"]) == (4, 2)
    # Pendulum only ends by its 200-step time limit: every episode is truncated, none terminated.
    assert [len(e) for e in again.episodes] == [125, 125]
    assert not any(e.terminated for e in again.episodes)
    np.testing.assert_allclose(again.returns, data.returns, rtol=1e-6)
