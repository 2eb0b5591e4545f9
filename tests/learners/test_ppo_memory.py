"""Memory correctness of PPO: before any update, re-evaluated log-probs equal the rollout's.

The rollout steps the core one token at a time; the learner re-runs whole fragments from the
memory stored at the fragment start. If the two disagree anywhere (episode resets inside a
fragment, memory carried across fragments, truncation), the PPO ratio is silently wrong.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlformer.algos.ppo.algorithm import build_model
from rlformer.algos.ppo.learner import PPOLearner, make_sequence_batch
from rlformer.config import TrainConfig, load_config
from rlformer.rollout.collector import LocalCollector, make_collector


def _config(env_id: str, backend: str = "local", **extra: str) -> TrainConfig:
    overrides = [
        f"env.id={env_id}",
        "env.max_episode_steps=9",
        f"rollout.backend={backend}",
        "rollout.num_workers=2",
        "rollout.envs_per_worker=3",
        "rollout.fragment_length=20",
        "model.core.n_layers=2",
        "model.core.d_model=32",
        "model.core.n_heads=2",
        "model.core.d_ff=64",
        "model.core.memory_length=6",
        "ppo.num_minibatches=2",
        *[f"{k}={v}" for k, v in extra.items()],
    ]
    return load_config(None, overrides)


def _max_ratio_error(cfg: TrainConfig, collector, model, fragments: int = 3) -> tuple[float, int]:
    worst, resets = 0.0, 0
    for version in range(fragments):
        fragment = collector.collect(model.state_dict(), version)
        resets += int(fragment.episode_start[1:].sum())
        batch = make_sequence_batch(fragment, cfg.ppo, torch.device("cpu"))
        with torch.no_grad():
            out = model.evaluate(batch.obs, batch.actions, batch.state, batch.episode_start)
        ratio = (out.log_prob - batch.old_log_probs).exp()
        worst = max(worst, float((ratio - 1).abs().max()))
        old_values = batch.old_values  # returns; the head's units may differ (value_scaling)
        if model.value_scaling is not None:
            old_values = model.value_scaling.encode(old_values)
        values_error = float((out.value - old_values).abs().max())
        assert values_error < 1e-4, "re-evaluated values differ from the rollout's"
    return worst, resets


@pytest.mark.parametrize("torso", ["gtrxl", "lstm", "gru"])
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1", "rlformer/TMaze-v0"])
@pytest.mark.parametrize("shared", [True, False])
def test_first_epoch_ratio_is_one_local(env_id: str, shared: bool, torso: str) -> None:
    torch.manual_seed(0)
    extra = {"model.shared_torso": str(shared).lower(), "model.torso": torso}
    cfg = _config(env_id, **extra, **{"model.recurrent_hidden": "32"})
    model = build_model(cfg)
    collector = LocalCollector(cfg)
    worst, resets = _max_ratio_error(cfg, collector, model)
    collector.close()
    assert resets > 0, "the test must cross episode resets inside fragments"
    assert worst < 1e-5


VALUE_SCALING = ["none", "return_std", "percentile", "symlog", "symlog_percentile", "popart"]


@pytest.mark.parametrize("value_scaling", VALUE_SCALING)
def test_first_epoch_ratio_is_one_with_value_scaling(value_scaling: str) -> None:
    torch.manual_seed(0)
    cfg = _config("rlformer/TMaze-v0", **{"model.value_scaling": value_scaling})
    model = build_model(cfg)
    collector = LocalCollector(cfg)
    worst, resets = _max_ratio_error(cfg, collector, model)
    collector.close()
    assert resets > 0
    assert worst < 1e-5


@pytest.mark.parametrize("value_scaling", [None, *VALUE_SCALING])
def test_learner_reports_ratio_one_then_moves(value_scaling: str | None) -> None:
    # Three updates: the statistics of value_scaling (percentiles, PopArt's) move before each
    # update's loss, and PopArt rescales the value head, which must leave the policy alone.
    torch.manual_seed(0)
    extra = {} if value_scaling is None else {"model.value_scaling": value_scaling}
    cfg = _config("CartPole-v1", **extra)
    model = build_model(cfg)
    collector = LocalCollector(cfg)
    learner = PPOLearner(model, cfg.ppo, torch.device("cpu"), total_iterations=3)
    before = [p.detach().clone() for p in model.parameters()]
    for version in range(3):
        metrics = learner.update(collector.collect(model.state_dict(), version))
        assert metrics["ppo/first_minibatch_ratio_error"] < 1e-5
    collector.close()
    assert np.isfinite(metrics["loss/policy"]) and metrics["ppo/approx_kl"] > 0
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("torso", ["gtrxl", "lstm"])
def test_first_epoch_ratio_is_one_ray(local_ray: None, torso: str) -> None:
    torch.manual_seed(0)
    cfg = _config("CartPole-v1", backend="ray", **{"model.torso": torso})
    model = build_model(cfg)
    collector = make_collector(cfg)
    try:
        worst, resets = _max_ratio_error(cfg, collector, model)
    finally:
        collector.close()
    assert resets > 0
    assert worst < 1e-5
