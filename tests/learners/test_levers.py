"""PPO levers for hard memory tasks: observation reconstruction and the entropy schedule.

``model.reconstruction`` + ``ppo.reconstruction_coef``: a decoder from the actor's latent at each
step to that step's observation (as the encoder reads it), an auxiliary loss. It must add nothing
to models built without it (their checkpoints keep loading), leave the first-epoch ratio at 1,
and its loss must be the formula's. ``ppo.ent_coef_final`` anneals the entropy weight on the
learning rate's schedule.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlformer.algos.ppo import learner as ppo_module
from rlformer.algos.ppo.algorithm import build_model
from rlformer.algos.ppo.config import PPOConfig
from rlformer.algos.ppo.learner import PPOLearner, SequenceBatch, make_sequence_batch, ppo_loss
from rlformer.config import ConfigError, ModelConfig, load_config
from rlformer.networks.actor_critic import ActorCritic, AgentState
from rlformer.rollout.collector import LocalCollector
from rlformer.runs.checkpoints import CheckpointError, load_weights
from tests.learners.test_ppo_memory import _config

RECONSTRUCT = {"model.reconstruction": "true", "ppo.reconstruction_coef": "0.5"}

# Leaf order is the Dict's (sorted keys): bits, pos, v.
SPACE = gym.spaces.Dict(
    {
        "bits": gym.spaces.MultiBinary(2),
        "pos": gym.spaces.Discrete(3),
        "v": gym.spaces.Box(-2.0, 2.0, (2,), np.float32),
    }
)
OBS = {
    "bits": torch.tensor([[[1, 0], [0, 0], [1, 1]]], dtype=torch.int8),
    "pos": torch.tensor([[0, 2, 1]]),
    "v": torch.tensor([[[0.5, -0.5], [1.5, 0.0], [0.0, -2.0]]]),
}
# The targets by hand: bits, one-hot of pos, v; the first five units are 0/1 (BCE).
TARGETS = [
    [1, 0, 1, 0, 0, 0.5, -0.5],
    [0, 0, 0, 0, 1, 1.5, 0.0],
    [1, 1, 0, 1, 0, 0.0, -2.0],
]
BINARY_UNITS = 5


def _tiny_model(reconstruction: bool) -> ActorCritic:
    torch.manual_seed(0)
    cfg = ModelConfig(torso="mlp", mlp_hidden=[8], reconstruction=reconstruction)
    return ActorCritic(SPACE, gym.spaces.Discrete(2), cfg)


def _reference_loss(prediction: list[list[float]]) -> float:
    """Mean over steps of the mean over units of BCE on logits (0/1 units) or squared error."""
    per_step = []
    for z_row, y_row in zip(prediction, TARGETS, strict=True):
        total = 0.0
        for unit, (z, y) in enumerate(zip(z_row, y_row, strict=True)):
            if unit < BINARY_UNITS:
                p = 1.0 / (1.0 + math.exp(-z))
                total += -(y * math.log(p) + (1 - y) * math.log(1 - p))
            else:
                total += (z - y) ** 2
        per_step.append(total / len(y_row))
    return sum(per_step) / len(per_step)


def _batch(steps: int) -> SequenceBatch:
    zeros = torch.zeros(1, steps)
    return SequenceBatch(
        obs=OBS,
        actions=zeros.long(),
        old_log_probs=zeros,
        old_values=zeros,
        advantages=torch.linspace(-1.0, 1.0, steps).unsqueeze(0),
        returns=zeros,
        episode_start=torch.tensor([[True] + [False] * (steps - 1)]),
        rewards=zeros,
        state=AgentState(None),
    )


def test_reconstruction_loss_matches_the_formula() -> None:
    model = _tiny_model(reconstruction=True)
    head = model.reconstruction
    assert head is not None
    target = head.target(model.encoder, OBS)
    assert target.tolist() == [TARGETS]
    batch = _batch(3)
    out = model.evaluate(OBS, batch.actions, AgentState(None), batch.episode_start)
    with torch.no_grad():
        latent, _ = model.actor_torso.sequence(model.encoder(OBS), None, batch.episode_start)
        prediction = head.decoder(latent)[0].double().tolist()
    expected = _reference_loss(prediction)
    cfg = PPOConfig(reconstruction_coef=0.25)
    loss, metrics = ppo_loss(out, batch, cfg)
    assert float(metrics["loss/reconstruction"]) == pytest.approx(expected, rel=1e-5)
    without, _ = ppo_loss(out, batch, cfg.model_copy(update={"reconstruction_coef": 0.0}))
    assert float((loss - without).detach()) == pytest.approx(0.25 * expected, rel=1e-4)
    # The loss trains the decoder and the torso under it.
    loss.backward()
    assert head.decoder[0].weight.grad.abs().sum() > 0
    assert model.actor_torso.net[0].weight.grad.abs().sum() > 0


def test_image_targets_are_pooled_to_eight_by_eight() -> None:
    space = gym.spaces.Dict({"image": gym.spaces.Box(0, 255, (16, 16, 1), np.uint8)})
    cfg = ModelConfig(torso="mlp", cnn="impala", cnn_features=8, reconstruction=True)
    model = ActorCritic(space, gym.spaces.Discrete(2), cfg)
    pixels = torch.randint(0, 256, (2, 16, 16, 1), dtype=torch.uint8)
    target = model.reconstruction.target(model.encoder, {"image": pixels})
    blocks = pixels.double().reshape(2, 8, 2, 8, 2).mean(dim=(2, 4)) / 255.0
    torch.testing.assert_close(target.double(), blocks.reshape(2, 64), rtol=1e-6, atol=1e-6)


def test_models_without_the_head_keep_their_state_dict() -> None:
    old = _tiny_model(reconstruction=False)
    assert sorted(old.state_dict()) == [
        "actor_torso.net.0.bias",
        "actor_torso.net.0.weight",
        "policy_head.bias",
        "policy_head.weight",
        "reward_norm.count",
        "reward_norm.m2",
        "reward_norm.mean",
        "value_head.bias",
        "value_head.weight",
    ]
    new = _tiny_model(reconstruction=True)
    added = set(new.state_dict()) - set(old.state_dict())
    assert added == {f"reconstruction.decoder.{i}.{p}" for i in (0, 2) for p in ("weight", "bias")}
    # Built last: the other weights start the same with or without the head.
    for key, value in old.state_dict().items():
        assert torch.equal(value, new.state_dict()[key]), key
    load_weights(_tiny_model(reconstruction=False), {"model": old.state_dict()}, "old.pt")
    with pytest.raises(CheckpointError, match=r"do not fit .*Unexpected key.*reconstruction"):
        load_weights(old, {"model": new.state_dict()}, "new.pt")


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["ppo.reconstruction_coef=0.1"], "needs model.reconstruction=true"),
        (["model.reconstruction=true"], "never trains"),
        (["ppo.ent_coef_final=-0.1"], "ent_coef_final"),
    ],
)
def test_levers_refuse_inconsistent_settings(overrides: list[str], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_config(None, overrides)


def test_first_epoch_ratio_is_one_with_the_head() -> None:
    torch.manual_seed(0)
    cfg = _config("rlformer/TMaze-v0", **RECONSTRUCT)
    model = build_model(cfg)
    collector = LocalCollector(cfg)
    learner = PPOLearner(model, cfg.ppo, torch.device("cpu"), total_iterations=2)
    try:
        for version in range(2):
            metrics = learner.update(collector.collect(model.state_dict(), version))
            assert metrics["ppo/first_minibatch_ratio_error"] < 1e-5
            assert np.isfinite(metrics["loss/reconstruction"])
    finally:
        collector.close()


def test_head_works_with_memory_gradient_steps() -> None:
    # The recomputed prefix is cut from every per-step output, the decoder's loss included.
    torch.manual_seed(0)
    cfg = _config("rlformer/TMaze-v0", **RECONSTRUCT, **{"ppo.memory_gradient_steps": "5"})
    model = build_model(cfg)
    collector = LocalCollector(cfg)
    learner = PPOLearner(model, cfg.ppo, torch.device("cpu"), total_iterations=2)
    try:
        for version in range(2):
            metrics = learner.update(collector.collect(model.state_dict(), version))
    finally:
        collector.close()
    assert np.isfinite(metrics["loss/reconstruction"])


def test_training_reduces_the_reconstruction_loss_on_tmaze() -> None:
    torch.manual_seed(0)
    cfg = _config(
        "rlformer/TMaze-v0", **RECONSTRUCT, **{"ppo.learning_rate": "0.001", "run.seed": "0"}
    )
    model = build_model(cfg)
    collector = LocalCollector(cfg)
    learner = PPOLearner(model, cfg.ppo, torch.device("cpu"), total_iterations=8, seed=0)

    def error_on(batch: SequenceBatch) -> float:
        with torch.no_grad():
            out = model.evaluate(batch.obs, batch.actions, batch.state, batch.episode_start)
        return float(out.reconstruction_error.mean())

    try:
        fragment = collector.collect(model.state_dict(), 0)
        held_out = make_sequence_batch(fragment, cfg.ppo, torch.device("cpu"))
        before = error_on(held_out)
        learner.update(fragment)
        for version in range(1, 8):
            learner.update(collector.collect(model.state_dict(), version))
    finally:
        collector.close()
    after = error_on(held_out)
    # Seed 0: 0.069 before, 0.0036 after eight updates.
    assert after < 0.25 * before, (before, after)


def test_entropy_coefficient_follows_the_schedule(monkeypatch: pytest.MonkeyPatch) -> None:
    used: list[float] = []
    real = ppo_module.ppo_loss

    def recording(out, batch, cfg, ent_coef=None):  # noqa: ANN001, ANN202 - ppo_loss's
        used.append(ent_coef)
        return real(out, batch, cfg, ent_coef)

    monkeypatch.setattr(ppo_module, "ppo_loss", recording)
    torch.manual_seed(0)
    cfg = _config("CartPole-v1", **{"ppo.ent_coef": "0.1", "ppo.ent_coef_final": "0.02"})
    model = build_model(cfg)
    collector = LocalCollector(cfg)
    learner = PPOLearner(model, cfg.ppo, torch.device("cpu"), total_iterations=4)
    logged = []
    try:
        for version in range(4):
            used.clear()
            logged.append(learner.update(collector.collect(model.state_dict(), version)))
            # Every minibatch of an update uses that update's coefficient.
            assert len(used) > 0 and len(set(used)) == 1
            assert used[0] == logged[-1]["ent_coef"]
    finally:
        collector.close()
    # First, middle and last iteration: 0.1 at the start, halfway at iteration 2 of 4, and one
    # step short of the final value at the last (like the learning rate, which reaches 0 only
    # after the last update).
    expected = [0.1, 0.08, 0.06, 0.04]
    assert [m["ent_coef"] for m in logged] == pytest.approx(expected)
    lr = cfg.ppo.learning_rate
    assert [m["lr"] for m in logged] == pytest.approx([lr, 0.75 * lr, 0.5 * lr, 0.25 * lr])


def test_entropy_coefficient_is_constant_without_a_final_value() -> None:
    cfg = PPOConfig(ent_coef=0.03)
    model = _tiny_model(reconstruction=False)
    learner = PPOLearner(model, cfg, torch.device("cpu"), total_iterations=10)
    for iteration in (0, 5, 9):
        learner.iteration = iteration
        assert learner._entropy_coef() == 0.03
