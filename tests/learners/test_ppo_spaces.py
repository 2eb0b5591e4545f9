"""PPO's ratio = 1 on composite spaces: a Dict observation with image leaves, MultiDiscrete and
MultiBinary actions, previous action/reward inputs and running normalisation, on both backends.

Episodes of the test env last 3-6 steps with a 5-step time limit, fragments are 8 steps: resets
and truncations fall inside fragments and episodes run across fragment boundaries.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlformer.algos.ppo.algorithm import build_model
from rlformer.algos.ppo.learner import PPOLearner, make_sequence_batch
from rlformer.config import TrainConfig, load_config
from rlformer.rollout.collector import LocalCollector, make_collector

ENV = "tests.space_envs:SpaceTest-v0"


def _config(backend: str = "local", action: str = "multidiscrete", *extra: str) -> TrainConfig:
    return load_config(
        None,
        [
            f"env.id={ENV}",
            "env.kwargs.obs=dict",
            f"env.kwargs.action={action}",
            "env.max_episode_steps=5",
            f"rollout.backend={backend}",
            "rollout.num_workers=2",
            "rollout.envs_per_worker=2",
            "rollout.fragment_length=8",
            "rollout.worker_cpus=0.25",
            "model.cnn=impala",
            "model.cnn_features=16",
            "model.core.n_layers=1",
            "model.core.d_model=16",
            "model.core.n_heads=2",
            "model.core.d_ff=32",
            "model.core.memory_length=6",
            "model.prev_action_reward=true",
            "model.normalize_obs=true",
            "model.normalize_reward=true",
            "ppo.num_minibatches=2",
            *extra,
        ],
    )


def _worst_ratio_error(cfg: TrainConfig, collector, model, iterations: int = 3) -> float:
    """Max |ratio - 1| over every sample; statistics merge after each check, as in training."""
    worst, resets, crossings = 0.0, 0, 0
    for version in range(iterations):
        fragment = collector.collect(model.state_dict(), version)
        resets += int(fragment.episode_start[1:].sum())
        crossings += int((~fragment.episode_start[0]).sum())  # episodes begun in a past fragment
        assert fragment.obs["image"].dtype == np.uint8, "images must stay uint8 in storage"
        batch = make_sequence_batch(fragment, cfg.ppo, torch.device("cpu"))
        with torch.no_grad():
            out = model.evaluate(
                batch.obs, batch.actions, batch.state, batch.episode_start, batch.rewards
            )
        ratio = (out.log_prob - batch.old_log_probs).exp()
        worst = max(worst, float((ratio - 1).abs().max()))
        assert float((out.value - batch.old_values).abs().max()) < 1e-4
        model.merge_statistics(fragment.statistics)
    assert resets > 0 and crossings > 0
    return worst


@pytest.mark.parametrize("action", ["multidiscrete", "multibinary", "box", "discrete"])
def test_ratio_is_one_on_dict_image_observations_local(action: str) -> None:
    torch.manual_seed(0)
    cfg = _config("local", action)
    model = build_model(cfg)
    collector = LocalCollector(cfg)
    try:
        assert _worst_ratio_error(cfg, collector, model) < 1e-5
    finally:
        collector.close()
    stats = model.normalizers()
    assert set(stats) == {"obs/vector", "reward"}
    assert float(stats["obs/vector"].count) == 3 * 2 * 2 * 8  # iterations x workers x envs x F


def test_learner_trains_on_composite_spaces() -> None:
    torch.manual_seed(0)
    cfg = _config("local")
    model = build_model(cfg)
    collector = LocalCollector(cfg)
    learner = PPOLearner(model, cfg.ppo, torch.device("cpu"), total_iterations=2)
    try:
        for version in range(2):
            metrics = learner.update(collector.collect(model.state_dict(), version))
            assert metrics["ppo/first_minibatch_ratio_error"] < 1e-5
    finally:
        collector.close()
    assert np.isfinite(metrics["loss/policy"])
    # The statistics of both iterations were merged into the model after each update.
    assert float(model.normalizers()["reward"].count) == 2 * 2 * 2 * 8


@pytest.mark.ray
@pytest.mark.slow
def test_ratio_is_one_and_statistics_equal_on_ray(local_ray: None) -> None:
    torch.manual_seed(0)
    cfg = _config("ray")
    model = build_model(cfg)
    local_model = build_model(cfg)
    local_model.load_state_dict(model.state_dict())
    collector = make_collector(cfg)
    try:
        assert _worst_ratio_error(cfg, collector, model) < 1e-5
    finally:
        collector.close()
    local = LocalCollector(cfg)
    try:
        _worst_ratio_error(cfg, local, local_model)
    finally:
        local.close()
    # The same fragments merged in the same worker order: bit-identical statistics.
    for name, rms in model.normalizers().items():
        other = local_model.normalizers()[name]
        for buffer in ("count", "mean", "m2"):
            assert torch.equal(getattr(rms, buffer), getattr(other, buffer)), (name, buffer)


@pytest.mark.gpu
def test_cuda_learner_reproduces_cpu_rollout_with_image_encoders() -> None:
    """CPU workers, CUDA learner: convolutions must run in full fp32 (no TF32) on the learner."""
    torch.manual_seed(0)
    cfg = _config("local", "multidiscrete")
    model = build_model(cfg)
    collector = LocalCollector(cfg)
    try:
        fragment = collector.collect(model.state_dict(), 0)
    finally:
        collector.close()
    device = torch.device("cuda")
    model = model.to(device)
    batch = make_sequence_batch(fragment, cfg.ppo, device)
    with torch.no_grad():
        out = model.evaluate(
            batch.obs, batch.actions, batch.state, batch.episode_start, batch.rewards
        )
    assert float((out.log_prob - batch.old_log_probs).exp().sub(1).abs().max()) < 1e-4
