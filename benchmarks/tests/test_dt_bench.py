"""The DT speed bench's peers act through rlformer's DT policy when their returns are measured:
each must give the outputs that policy reads (a GPU run of ``benchmarks/dt.py --quick`` stopped
at evaluation when the policy began to read a stochastic DT's mean and spread)."""

from __future__ import annotations

import math
from pathlib import Path
from types import ModuleType

import gymnasium as gym
import pytest
import rlformer_envs  # noqa: F401
import torch
from script_loader import load_script

from rlformer.algos.dt.algorithm import normalized_actions
from rlformer.algos.dt.policy import action_bounds
from rlformer.config import EnvConfig
from rlformer.data import load_dataset
from rlformer.data.recorder import collect_dataset
from rlformer.data.sampling import WindowSampler
from rlformer.rollout.env_factory import make_env


def _bench() -> ModuleType:
    return load_script("dt")


@pytest.mark.parametrize("peer", ["behaviour cloning", "transformers"])
def test_a_peer_model_plays_return_conditioned_episodes(tmp_path: Path, peer: str) -> None:
    if peer == "transformers":
        pytest.importorskip("transformers")
    torch.set_num_threads(1)
    bench = _bench()
    env_cfg = EnvConfig(id="rlformer/TMaze-v0", kwargs={"length": 3})
    path = tmp_path / "tmaze.hdf5"
    collect_dataset("random", env_cfg.id, 400, path, num_envs=4, progress=False, env_cfg=env_cfg)
    env = make_env(env_cfg.id, env_cfg.kwargs)
    low, high = action_bounds(env.action_space)
    assert isinstance(env.action_space, gym.spaces.Discrete)
    sampler = WindowSampler(
        normalized_actions(load_dataset(path), low, high), 4, 1.0, discrete_actions=True
    )
    state_dim, act_dim = sampler.states.shape[1], int(env.action_space.n)
    model = (
        bench.BehaviourCloning(state_dim, act_dim, True)
        if peer == "behaviour cloning"
        else bench.HFDecisionTransformer(state_dim, act_dim, True, 4)
    )
    score = bench.evaluate(model, sampler, env_cfg, 1.0, 1.0, 4, low, high, 2)
    assert math.isfinite(score)
