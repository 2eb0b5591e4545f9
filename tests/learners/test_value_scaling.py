"""``model.value_scaling``: each choice against values by hand and a slow reference written from
its formula, the config's old behaviour when the key is absent, and resuming bit-identically."""

from __future__ import annotations

import io
import math
import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from torch import nn

from rlformer.algos.ppo.algorithm import build_model
from rlformer.algos.ppo.learner import PPOLearner, make_sequence_batch
from rlformer.config import (
    ModelConfig,
    TrainConfig,
    dump_config,
    load_config,
    load_saved_config,
)
from rlformer.networks.value_scaling import ValueScaling, symexp, symlog
from rlformer.rollout.collector import LocalCollector
from rlformer.rollout.fragment import Fragment
from rlformer.runs.checkpoints import load_checkpoint
from rlformer.runs.signals import Interrupted
from rlformer.runs.training import resume, train

CHOICES = ["none", "return_std", "percentile", "symlog", "symlog_percentile", "popart"]
WITH_STATISTICS = ["percentile", "symlog_percentile", "popart"]


# ----------------------------------------------------------------- formulas
def test_symlog_and_symexp_by_hand() -> None:
    x = torch.tensor([0.0, math.e - 1, -(math.e**2 - 1), 1e6], dtype=torch.float64)
    expected = torch.tensor([0.0, 1.0, -2.0, math.log(1e6 + 1)], dtype=torch.float64)
    torch.testing.assert_close(symlog(x), expected)
    torch.testing.assert_close(symexp(expected), x)


def _reference_percentiles(batches: list[np.ndarray]) -> tuple[float, float]:
    """EMA (decay 0.99, from 0) of the 5th and 95th percentiles, one batch per update."""
    low = high = 0.0
    for returns in batches:
        low = 0.99 * low + 0.01 * float(np.percentile(returns.astype(np.float64), 5))
        high = 0.99 * high + 0.01 * float(np.percentile(returns.astype(np.float64), 95))
    return low, high


def test_percentile_scale_by_hand_and_against_the_reference() -> None:
    scaling = ValueScaling("percentile")
    head = nn.Linear(3, 1)
    scaling.update(torch.arange(101.0), head)  # P5 = 5, P95 = 95
    assert float(scaling.return_low) == pytest.approx(0.05)
    assert float(scaling.return_high) == pytest.approx(0.95)
    assert scaling.advantage_scale() == 1.0  # max(1, 0.9)
    scaling.update(1000 * torch.arange(101.0), head)  # P5 = 5000, P95 = 95000
    assert float(scaling.return_low) == pytest.approx(0.99 * 0.05 + 50)
    assert float(scaling.return_high) == pytest.approx(0.99 * 0.95 + 950)
    assert scaling.advantage_scale() == pytest.approx(0.99 * 0.9 + 900)

    rng = np.random.default_rng(0)
    batches = [rng.normal(scale=10.0 ** (k % 4), size=(7, 5)).astype(np.float32) for k in range(9)]
    scaling = ValueScaling("percentile")
    for returns in batches:
        scaling.update(torch.as_tensor(returns), head)
    low, high = _reference_percentiles(batches)
    assert float(scaling.return_low) == pytest.approx(low, rel=1e-9)
    assert float(scaling.return_high) == pytest.approx(high, rel=1e-9)
    assert scaling.advantage_scale() == pytest.approx(max(1.0, high - low), rel=1e-9)
    assert scaling.encode(torch.tensor([3.0])).item() == 3.0  # the head predicts returns


def _reference_popart(batches: list[np.ndarray]) -> tuple[float, float]:
    """mu and sigma as weighted averages over the batches so far: batch k of n has weight
    (1 - d) d^(n - k) / (1 - d^n), d = 0.99 (the bias-corrected EMA, written out)."""
    n, d = len(batches), 0.99
    weights = [(1 - d) * d ** (n - 1 - k) / (1 - d**n) for k in range(n)]
    mean = sum(
        w * float(np.mean(b, dtype=np.float64)) for w, b in zip(weights, batches, strict=True)
    )
    square = sum(
        w * float(np.mean(np.square(b, dtype=np.float64)))
        for w, b in zip(weights, batches, strict=True)
    )
    return mean, max(math.sqrt(max(square - mean**2, 0.0)), 1e-4)


def test_popart_statistics_and_preserved_outputs() -> None:
    torch.manual_seed(0)
    head = nn.Linear(4, 1)
    scaling = ValueScaling("popart")
    latent = torch.randn(16, 4)
    assert torch.equal(scaling.decode(head(latent)), head(latent))  # (0, 1) before any update
    scaling.update(torch.tensor([1.0, 3.0]), head)  # by hand: mu = 2, sigma = 1
    mean, sigma = scaling.popart_stats()
    assert (float(mean), float(sigma)) == pytest.approx((2.0, 1.0))
    assert scaling.encode(torch.tensor([3.0])).item() == pytest.approx(1.0)

    rng = np.random.default_rng(1)
    batches = [
        rng.normal(loc=100.0 * k, scale=10.0 ** (k % 3), size=(6, 5)).astype(np.float32)
        for k in range(8)
    ]
    scaling = ValueScaling("popart")
    for k, returns in enumerate(batches):
        with torch.no_grad():
            before = scaling.decode(head(latent))
        scaling.update(torch.as_tensor(returns), head)
        with torch.no_grad():
            after = scaling.decode(head(latent))
        torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-3)  # outputs preserved
        ref_mean, ref_sigma = _reference_popart(batches[: k + 1])
        mean, sigma = scaling.popart_stats()
        assert float(mean) == pytest.approx(ref_mean, rel=1e-9)
        assert float(sigma) == pytest.approx(ref_sigma, rel=1e-6)
    targets = torch.as_tensor(batches[-1])
    torch.testing.assert_close(
        scaling.encode(targets),
        ((targets.double() - ref_mean) / ref_sigma).float(),
        rtol=1e-5,
        atol=1e-5,
    )
    assert scaling.advantage_scale() == 1.0


# ----------------------------------------------------------------- config
def test_the_default_is_return_std_and_normalize_reward_set_alone_still_chooses() -> None:
    assert ModelConfig().value_scaling == "return_std" and ModelConfig().normalize_reward
    assert ModelConfig(normalize_reward=False).value_scaling == "none"
    assert ModelConfig(normalize_reward=False).normalize_reward is False
    assert ModelConfig(normalize_reward=True).normalize_reward is True
    assert ModelConfig(normalize_reward=False, value_scaling="return_std").normalize_reward
    for choice in ("none", "percentile", "symlog", "symlog_percentile", "popart"):
        assert not ModelConfig(normalize_reward=True, value_scaling=choice).normalize_reward
    with pytest.raises(ValueError):
        ModelConfig(value_scaling="zscore")


@pytest.mark.parametrize("choice", CHOICES)
def test_the_key_round_trips_through_a_saved_config(choice: str, tmp_path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(dump_config(_config(choice)))
    again = load_saved_config(path)
    assert again.model.value_scaling == choice
    assert again.model.normalize_reward == (choice == "return_std")


@pytest.mark.parametrize("normalize", [True, False])
def test_a_saved_config_without_the_key_keeps_its_reward_normalisation(
    normalize: bool, tmp_path
) -> None:
    cfg = load_config(None, ["env.id=Pendulum-v1", f"model.normalize_reward={normalize}"])
    raw = yaml.safe_load(dump_config(cfg))
    del raw["model"]["value_scaling"]  # as written before the key existed
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    again = load_saved_config(path)
    assert again.model.value_scaling == ("return_std" if normalize else "none")
    assert again.model.normalize_reward is normalize
    assert (build_model(again).reward_norm is not None) is normalize
    assert build_model(again).value_scaling is None


# ----------------------------------------------------------------- learner
_OVERRIDES = [
    "env.id=Pendulum-v1",
    "env.max_episode_steps=12",
    "rollout.envs_per_worker=4",
    "rollout.fragment_length=16",
    "model.core.d_model=16",
    "model.core.n_heads=2",
    "model.core.d_ff=32",
    "model.core.memory_length=4",
    "ppo.num_minibatches=2",
    "ppo.update_epochs=2",
]


def _config(choice: str) -> TrainConfig:
    return load_config(None, [*_OVERRIDES, f"model.value_scaling={choice}"])


def _fragments(cfg: TrainConfig, model, count: int) -> list[Fragment]:
    collector = LocalCollector(cfg)
    try:
        return [collector.collect(model.state_dict(), version) for version in range(count)]
    finally:
        collector.close()


@pytest.mark.parametrize("choice", ["percentile", "symlog", "symlog_percentile", "popart"])
def test_learner_targets_follow_the_formula(choice: str) -> None:
    """The loss's targets are the GAE returns in the head's units, the rollout's values too,
    and the advantages are divided by max(1, P95 - P5) (percentile, no standardisation)."""
    cfg = _config(choice)
    torch.manual_seed(0)
    model = build_model(cfg)
    learner = PPOLearner(model, cfg.ppo, torch.device("cpu"), total_iterations=2)
    assert learner.cfg.norm_adv == ("percentile" not in choice)
    fragment = _fragments(cfg, model, 1)[0]
    plain = make_sequence_batch(fragment, cfg.ppo, torch.device("cpu"))
    batch, _, _ = learner.begin(fragment)
    returns = plain.returns.double()
    if "symlog" in choice:
        expected_returns = torch.sign(returns) * torch.log(1 + returns.abs())
    elif choice == "popart":  # one update: the batch's own mean and std
        mean, std = returns.mean(), returns.var(unbiased=False).sqrt()
        expected_returns = (returns - mean) / std
    else:
        expected_returns = returns
    torch.testing.assert_close(batch.returns.double(), expected_returns, rtol=1e-5, atol=1e-5)
    scale = 1.0
    if "percentile" in choice:
        flat = returns.flatten().numpy()
        scale = max(1.0, 0.01 * (np.percentile(flat, 95) - np.percentile(flat, 5)))
    torch.testing.assert_close(batch.advantages, plain.advantages / scale)
    # the head's outputs on the rollout's inputs are the encoded rollout values
    with torch.no_grad():
        out = model.evaluate(plain.obs, plain.actions, plain.state, plain.episode_start)
    torch.testing.assert_close(out.value, batch.old_values, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("choice", WITH_STATISTICS)
def test_resume_from_saved_state_is_bit_identical(choice: str) -> None:
    """Three updates in one go equal two, a save and load of model and learner, and a third."""
    cfg = _config(choice)
    torch.manual_seed(0)
    model = build_model(cfg)
    fragments = _fragments(cfg, model, 3)
    initial = {k: v.clone() for k, v in model.state_dict().items()}

    straight = PPOLearner(model, cfg.ppo, torch.device("cpu"), total_iterations=3)
    for fragment in fragments:
        straight.update(fragment)
    expected = {k: v.clone() for k, v in model.state_dict().items()}
    assert any("return_" in k or "popart_" in k for k in expected)  # statistics are saved

    first = build_model(cfg)
    first.load_state_dict(initial)
    learner = PPOLearner(first, cfg.ppo, torch.device("cpu"), total_iterations=3)
    for fragment in fragments[:2]:
        learner.update(fragment)
    saved = io.BytesIO()
    torch.save({"model": first.state_dict(), "learner": learner.state_dict()}, saved)
    saved.seek(0)
    state = torch.load(saved, weights_only=False)
    resumed_model = build_model(cfg)
    resumed_model.load_state_dict(state["model"])
    resumed = PPOLearner(resumed_model, cfg.ppo, torch.device("cpu"), total_iterations=3)
    resumed.load_state_dict(state["learner"])
    resumed.update(fragments[2])
    for key, value in resumed_model.state_dict().items():
        assert torch.equal(value, expected[key]), key


@pytest.mark.parametrize("choice", WITH_STATISTICS)
def test_stopped_and_resumed_run_equals_a_straight_run(choice: str, tmp_path) -> None:
    """Through train() and resume(): a run stopped by SIGINT after two of four iterations
    and resumed ends with the weights and statistics of one that never stopped."""
    sets = [
        *[item for item in _OVERRIDES if not item.startswith("ppo.update_epochs")],
        f"model.value_scaling={choice}",
        "ppo.total_steps=256",  # 4 iterations of 4 envs x 16 steps
        "run.checkpoint_every=1",
        "eval.episodes=0",
        "run.progress=false",
    ]
    straight = train(load_config(None, [*sets, f"run.root={tmp_path / 'straight'}"]))

    def stop_after_two(iteration: int, _: dict[str, float]) -> None:
        if iteration == 2:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(Interrupted) as stopped:
        train(
            load_config(None, [*sets, f"run.root={tmp_path / 'stopped'}"]),
            on_iteration=stop_after_two,
        )
    resumed = resume(stopped.value.run_dir)
    expected = load_checkpoint(straight.run_dir)["model"]
    got = load_checkpoint(resumed.run_dir)["model"]
    assert any("return_" in key or "popart_" in key for key in got)
    for key, value in expected.items():
        assert torch.equal(value, got[key]), key


def test_the_pilot_commands_are_valid_configs() -> None:
    """Every run of benchmarks/value_scaling_pilots.py is a config the CLI accepts, with the
    choice it names and nothing else changed but the seed and budget."""
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    import value_scaling_pilots as pilots

    for task in pilots.TASKS:
        for choice in pilots.CHOICES:
            sets = pilots.overrides(task, choice, 1, 1000)
            assert not any(item.startswith("preset") for item in sets)  # preset: auto
            cfg = load_config(None, sets)
            assert cfg.model.value_scaling == choice
            assert cfg.run.seed == 1 and cfg.ppo.total_steps == 1000


@pytest.mark.parametrize("choice", ["percentile", "symlog", "popart"])
def test_accumulated_chunks_give_the_one_chunk_update(choice: str) -> None:
    """learner.accumulate splits each minibatch; with the percentile scale (no per-minibatch
    standardisation) and PopArt's rescaled head the step stays the one-chunk step."""
    from tests.learners.test_parallel_learners import (
        _assert_same_update,
        _fragment,
        _one_learner_update,
    )

    cfg, model, fragment = _fragment("gtrxl", **{"model.value_scaling": choice})
    one, metrics_one = _one_learner_update(cfg, model, fragment, k=1)
    chunked, metrics = _one_learner_update(cfg, model, fragment, k=3)
    _assert_same_update(one, chunked, metrics_one, metrics)
