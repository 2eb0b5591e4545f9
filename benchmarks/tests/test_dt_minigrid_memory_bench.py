"""MiniGrid-MemoryS11 with Dict observations (configs/memory/minigrid_memory_s11_dict.yaml) and
the parts of benchmarks/dt_minigrid_memory.py that measure on it: the cue detector, the
choice of K, recording Dict episodes and fitting a memory DT and the GRU on them."""

from __future__ import annotations

import sys
from pathlib import Path

import gymnasium as gym
import h5py
import numpy as np
import pytest
import torch

pytest.importorskip("minigrid")
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
import dt_minigrid_memory as bench  # noqa: E402

from rlformer.config import load_config, offline_env_config  # noqa: E402
from rlformer.data import load_dataset  # noqa: E402
from rlformer.data.recorder import collect_dataset  # noqa: E402
from rlformer.rollout.env_factory import env_from_config  # noqa: E402
from rlformer.runs.training import check_config  # noqa: E402


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def test_the_dict_config_gives_ppo_and_the_dt_the_image_and_the_heading(tmp_path: Path) -> None:
    cfg = load_config(bench.TEACHER_CONFIG, [f"run.root={tmp_path}"])
    assert cfg.preset == "minigrid" and cfg.model.normalize_obs
    assert check_config(cfg).startswith("ok: ppo on MiniGrid-MemoryS11-v0, gtrxl model")
    for env_cfg in (cfg.env, offline_env_config(bench.TEACHER_CONFIG)):  # PPO's, collect's
        space = env_from_config(env_cfg).observation_space
        assert isinstance(space, gym.spaces.Dict) and set(space.spaces) == {"image", "direction"}
        assert space["image"].shape == (7, 7, 20) and space["direction"] == gym.spaces.Discrete(4)


def _walk(env: gym.Env, rng: np.random.Generator, steps: int) -> list[tuple[bool, bool, bool]]:
    """(detector says cue, MiniGrid says cue, an object other than the cue in view) per step of
    a walk that mostly heads east to the hallway's end and turns at random there."""
    obs, _ = env.reset(seed=int(rng.integers(1 << 30)))
    grid = env.unwrapped
    cue = (1, grid.height // 2 - 1)
    seen = []
    for _ in range(steps):
        cells = obs["image"][..., :11].argmax(-1)
        objects = int(np.isin(cells, (5, 6)).sum())  # keys and balls in view
        truth = bool(grid.agent_sees(*cue))
        seen.append((bench.cue_in_view(obs["image"]), truth, objects > int(truth)))
        heading_east = grid.agent_dir == 0 and grid.agent_pos[0] < grid.width - 2
        action = 2 if heading_east and rng.random() < 0.7 else int(rng.integers(3))
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            break
    return seen


def test_the_cue_detector_agrees_with_minigrids_own_visibility() -> None:
    env = env_from_config(offline_env_config(bench.TEACHER_CONFIG))
    rng = np.random.default_rng(0)
    steps = [step for _ in range(60) for step in _walk(env, rng, 40)]
    said, truth, others = (np.array(column) for column in zip(*steps, strict=True))
    assert (said == truth).all()
    # Both answers occur, and the end objects were in view without the cue.
    assert truth.any() and (~truth).any() and (others & ~truth).sum() > 20


def test_k_lies_below_the_measured_cue_distance() -> None:
    args = bench.parse_args([])
    data = {"cue_distance": {"p5": 5.0}, "cue_distance_counts": {"5": 8, "7": 2}}
    context = bench.choose_context(args, data)
    assert context == 4
    assert bench.cue_in_decision_window(data, context) == 0.0
    assert bench.cue_in_decision_window(data, 5) == 0.8  # K = 5 would see it in 8 of 10
    assert bench.choose_context(bench.parse_args(["--context", "6"]), data) == 6
    lengths = {"episode_length": {"p95": 20.0}}
    assert bench.choose_segments(args, lengths, context) * context >= 1.5 * 20


def test_recorded_dict_episodes_train_a_memory_dt_and_the_gru(tmp_path: Path) -> None:
    env_cfg = offline_env_config(bench.TEACHER_CONFIG)
    path = tmp_path / "random.hdf5"
    collect_dataset("random", env_cfg.id, 300, path, seed=0, num_envs=3, env_cfg=env_cfg)
    with h5py.File(path) as f:  # Dict observations are a group of leaves
        assert set(f["observations"]) == {"image", "direction"}
    dataset = load_dataset(str(path))
    measured = bench.cue_distances(dataset)
    assert (measured["distance"] < measured["length"]).all()

    args = bench.parse_args(
        ["--root", str(tmp_path), "--steps", "4", "--log-every", "2", "--batch", "4"]
        + ["--episodes", "2", "--layers", "1", "--d-model", "16", "--gru-hidden", "16"]
    )
    cfg = bench.dt_config(args, env_cfg, path, "memory_dt", 0, 4, 2, 0.9)
    assert cfg.dt.memory_segments == 2 and cfg.dt.core.memory_length == 3 * 4 * 2
    evaluation, per_step, _ = bench.run_dt(args, cfg, 0.9)
    assert evaluation["episodes"] == 2 and 0.0 <= evaluation["success_rate"] <= 1.0
    assert per_step is not None and per_step > 0
    # Finished: a second call reads the run's evaluation instead of training again.
    assert bench.run_dt(args, cfg, 0.9)[0] == evaluation

    gru, gru_per_step, _ = bench.run_gru(args, env_cfg, path, cfg, 0)
    assert 0.0 <= gru["success_rate"] <= 1.0 and gru_per_step > 0


def test_no_clock_trains_the_dts_without_the_timestep_embedding(tmp_path: Path) -> None:
    env_cfg = offline_env_config(bench.TEACHER_CONFIG)
    data = tmp_path / "data.hdf5"
    plain = bench.parse_args(["--root", str(tmp_path)])
    no_clock = bench.parse_args(["--root", str(tmp_path), "--no-clock"])
    for model in ("plain_dt", "memory_dt"):
        with_clock = bench.dt_config(plain, env_cfg, data, model, 0, 2, 26, 0.9)
        without = bench.dt_config(no_clock, env_cfg, data, model, 0, 2, 26, 0.9)
        assert with_clock.dt.timestep_embedding and not without.dt.timestep_embedding
        assert with_clock.run.name != without.run.name  # another measurement, another run
