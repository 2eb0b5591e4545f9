"""The MiniGrid-MemoryS11 probes (benchmarks) change only what their docstrings say."""

from __future__ import annotations

import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("minigrid")
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
import minigrid_memory_probes as probes  # noqa: E402


def _cue_type(env: gym.Env) -> int:
    return int(env.unwrapped.grid.get(*probes.cue_cell(env.unwrapped)).encode()[0])


def test_cue_in_every_view_shows_the_cue_at_every_step_and_keeps_the_task() -> None:
    probe = gym.make("MiniGrid-ProbeCueInEveryViewS11-v0")
    plain = gym.make("MiniGrid-MemoryS11-v0")
    for seed in range(5):
        obs, _ = probe.reset(seed=seed)
        reference, _ = plain.reset(seed=seed)
        for _ in range(6):  # walk east: the cue leaves the real view at once
            assert obs["image"][0, 0, 0] == _cue_type(probe)
            # Only the top-left cell differs from the real task's view.
            differs = np.any(obs["image"] != reference["image"], axis=-1)
            assert not differs[1:].any() and not differs[:, 1:].any()
            obs, *_ = probe.step(2)
            reference, *_ = plain.step(2)
        assert probe.unwrapped.success_pos == plain.unwrapped.success_pos


def test_start_beside_cue_puts_the_cue_in_the_first_view_only() -> None:
    env = gym.make("MiniGrid-ProbeStartBesideCueS11-v0")
    cue_types = set()
    for seed in range(10):
        obs, _ = env.reset(seed=seed)
        assert tuple(env.unwrapped.agent_pos) == (1, env.unwrapped.height // 2)
        assert env.unwrapped.in_view(*probes.cue_cell(env.unwrapped))
        cue_types.add(_cue_type(env))
        obs, *_ = env.step(2)  # one step east: behind the agent now
        assert not env.unwrapped.in_view(*probes.cue_cell(env.unwrapped))
    assert len(cue_types) == 2  # both cues (key, ball) occur
