"""ODT's parts against hand-computed values: loss, temperature, buffer, hindsight returns-to-go."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rlformer.algos.dt.config import DTConfig
from rlformer.algos.odt.config import ODTConfig
from rlformer.algos.odt.learner import ODTLearner, default_target_entropy, nll_and_entropy
from rlformer.core import CoreConfig
from rlformer.data.episodes import Dataset, Episode
from rlformer.data.sampling import WindowBatch, WindowSampler
from rlformer.data.trajectory_buffer import CapacityChanged, TrajectoryBuffer
from rlformer.networks.decision_transformer import DecisionTransformer, DTOutput

CORE = CoreConfig(n_layers=1, d_model=16, n_heads=1, d_ff=32, memory_length=12, dropout=0.0)


def _learner(discrete: bool, act_dim: int, **odt: float) -> ODTLearner:
    model = DecisionTransformer(3, act_dim, discrete, CORE, stochastic=True)
    return ODTLearner(model, DTConfig(warmup_steps=1), ODTConfig(**odt), torch.device("cpu"))


def _batch(actions: torch.Tensor, steps: int = 1) -> WindowBatch:
    return WindowBatch(
        states=torch.zeros(1, steps, 3),
        actions=actions,
        rewards=torch.zeros(1, steps),
        returns_to_go=torch.zeros(1, steps, 1),
        timesteps=torch.zeros(1, steps, dtype=torch.long),
        mask=torch.ones(1, steps, dtype=torch.bool),
    )


def test_discrete_loss_matches_hand_computation() -> None:
    learner = _learner(discrete=True, act_dim=2, init_temperature=0.1)
    # logits (0, ln 3): probabilities 1/4 and 3/4; the data took action 1.
    out = DTOutput(torch.tensor([[[0.0, math.log(3.0)]]]), None)
    terms = learner.segment_loss(out, _batch(torch.tensor([[1]])))
    nll = -math.log(0.75)
    entropy = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert terms["loss/nll"].item() == pytest.approx(nll, rel=1e-6)
    assert terms["policy/entropy"].item() == pytest.approx(entropy, rel=1e-6)
    assert terms["loss/action"].item() == pytest.approx(nll - 0.1 * entropy, rel=1e-6)


def test_squashed_gaussian_likelihood_matches_hand_computation() -> None:
    mean, log_std, u = 0.3, math.log(0.5), 0.8
    out = DTOutput(
        torch.tanh(torch.tensor([[[mean]]])),
        None,
        torch.tensor([[[mean]]]),
        torch.tensor([[[log_std]]]),
    )
    action = torch.tensor([[[math.tanh(u)]]])
    nll, _ = nll_and_entropy(out, action, torch.ones(1, 1, dtype=torch.bool), discrete=False)
    # a = tanh(u): log p(a) = log N(u; mean, std) - log(1 - tanh(u)^2)
    std = math.exp(log_std)
    gaussian = -0.5 * ((u - mean) / std) ** 2 - math.log(std) - 0.5 * math.log(2 * math.pi)
    expected = -(gaussian - math.log(1 - math.tanh(u) ** 2))
    assert nll.item() == pytest.approx(expected, rel=1e-5)


def test_squashed_gaussian_entropy_estimate_is_unbiased() -> None:
    """One sample per step estimates H[tanh(X)], X ~ N(0, 1); quadrature gives the truth."""
    torch.manual_seed(0)
    steps = 200_000
    out = DTOutput(
        torch.zeros(1, steps, 1), None, torch.zeros(1, steps, 1), torch.zeros(1, steps, 1)
    )
    mask = torch.ones(1, steps, dtype=torch.bool)
    _, entropy = nll_and_entropy(out, torch.zeros(1, steps, 1), mask, discrete=False)
    x = np.linspace(-12, 12, 200_001)
    density = np.exp(-0.5 * x**2) / math.sqrt(2 * math.pi)
    log_jacobian = np.log(np.cosh(x) ** -2.0)
    truth = 0.5 * math.log(2 * math.pi * math.e) + float(np.trapezoid(density * log_jacobian, x))
    assert entropy.item() == pytest.approx(truth, abs=0.01)


def test_padding_steps_do_not_count() -> None:
    learner = _learner(discrete=True, act_dim=2)
    logits = torch.tensor([[[0.0, math.log(3.0)], [5.0, -5.0]]])
    batch = _batch(torch.tensor([[1, 1]]), steps=2)
    batch.mask = torch.tensor([[True, False]])
    terms = learner.segment_loss(DTOutput(logits, None), batch)
    assert terms["loss/nll"].item() == pytest.approx(-math.log(0.75), rel=1e-6)


@pytest.mark.parametrize(("entropy", "direction"), [(0.5, -1.0), (-2.0, 1.0)])
def test_temperature_moves_toward_target_entropy(entropy: float, direction: float) -> None:
    learner = _learner(
        discrete=False, act_dim=1, init_temperature=0.1, temperature_learning_rate=1e-3
    )
    assert learner.target_entropy == -1.0  # -action dimension
    loss = learner.temperature_loss(torch.tensor(entropy))
    assert loss.item() == pytest.approx(0.1 * (entropy + 1.0), rel=1e-6)
    before = learner.log_alpha.item()
    metrics = learner.after_step({"policy/entropy": torch.tensor(entropy)})
    # Adam's first step moves by exactly the learning rate, against the gradient's sign.
    assert learner.log_alpha.item() - before == pytest.approx(direction * 1e-3, rel=1e-4)
    assert metrics["policy/alpha"] == pytest.approx(math.exp(before + direction * 1e-3))


def test_default_target_entropies() -> None:
    continuous = DecisionTransformer(3, 4, False, CORE, stochastic=True)
    discrete = DecisionTransformer(3, 5, True, CORE, stochastic=True)
    assert default_target_entropy(continuous) == -4.0
    assert default_target_entropy(discrete) == pytest.approx(0.3 * math.log(5))
    assert _learner(True, 2, target_entropy=0.2).target_entropy == 0.2


def test_a_dt_update_then_temperature_step_changes_both() -> None:
    learner = _learner(discrete=False, act_dim=2)
    batch = WindowBatch(
        states=torch.randn(4, 3, 3),
        actions=torch.rand(4, 3, 2) * 2 - 1,
        rewards=torch.zeros(4, 3),
        returns_to_go=torch.zeros(4, 3, 1),
        timesteps=torch.arange(3).repeat(4, 1),
        mask=torch.ones(4, 3, dtype=torch.bool),
    )
    head = learner.model.predict_log_std.weight.detach().clone()
    metrics = learner.update(batch)
    assert not torch.equal(head, learner.model.predict_log_std.weight)
    assert metrics["policy/alpha"] != 0.1
    assert {"loss/nll", "policy/entropy", "loss/temperature"} <= metrics.keys()


def _episode(rewards: list[float]) -> Episode:
    n = len(rewards)
    return Episode(
        np.arange(n, dtype=np.float32)[:, None].repeat(2, 1),
        np.zeros((n, 1), np.float32),
        np.array(rewards, np.float32),
        True,
        False,
    )


def test_buffer_is_seeded_with_the_best_offline_trajectories_then_fifo() -> None:
    offline = [_episode([r]) for r in (5.0, 1.0, 9.0, 3.0, 7.0)]
    buffer = TrajectoryBuffer(3, offline)
    assert [e.episode_return for e in buffer.episodes] == [5.0, 7.0, 9.0]  # lowest first
    buffer.add([_episode([100.0]), _episode([200.0])])
    assert [e.episode_return for e in buffer.episodes] == [100.0, 200.0, 9.0]
    buffer.add([_episode([300.0]), _episode([400.0])])
    assert [e.episode_return for e in buffer.episodes] == [400.0, 200.0, 300.0]

    state = buffer.state_dict()
    assert len(state["online"]) == 3  # offline trajectories are not copied into checkpoints
    restored = TrajectoryBuffer(3, offline)
    restored.load_state_dict(state, offline)
    assert [e.episode_return for e in restored.episodes] == [400.0, 200.0, 300.0]
    assert restored.next_slot == buffer.next_slot and restored.added == buffer.added


def test_buffer_fills_before_it_overwrites() -> None:
    buffer = TrajectoryBuffer(4, [_episode([1.0]), _episode([2.0])])
    buffer.add([_episode([10.0]), _episode([20.0]), _episode([30.0])])
    assert [e.episode_return for e in buffer.episodes] == [30.0, 2.0, 10.0, 20.0]


def test_buffer_without_online_trajectories_restores_at_a_new_capacity() -> None:
    """A run pretrained offline goes online with the buffer size it is resumed with."""
    offline = [_episode([r]) for r in (5.0, 1.0, 9.0, 3.0, 7.0)]
    state = TrajectoryBuffer(2, offline).state_dict()
    larger = TrajectoryBuffer(4, offline)
    larger.load_state_dict(state, offline)
    assert [e.episode_return for e in larger.episodes] == [3.0, 5.0, 7.0, 9.0]
    larger.add([_episode([100.0])])
    assert [e.episode_return for e in larger.episodes] == [100.0, 5.0, 7.0, 9.0]


@pytest.mark.parametrize("stored_capacity", [True, False])
def test_buffer_with_online_trajectories_refuses_another_capacity(stored_capacity: bool) -> None:
    offline = [_episode([r]) for r in (5.0, 1.0, 9.0)]
    buffer = TrajectoryBuffer(3, offline)
    buffer.add([_episode([100.0])])
    state = buffer.state_dict()
    if not stored_capacity:  # a checkpoint from before the capacity was stored
        del state["capacity"]
    with pytest.raises(CapacityChanged, match="capacity 3") as caught:
        TrajectoryBuffer(2, offline).load_state_dict(state, offline)
    assert caught.value.saved == 3
    if stored_capacity:
        with pytest.raises(CapacityChanged):
            TrajectoryBuffer(4, offline).load_state_dict(state, offline)


def test_hindsight_returns_to_go_come_from_achieved_rewards() -> None:
    """A trajectory played while asking for a return of 100 is trained on what it achieved."""
    buffer = TrajectoryBuffer(2, [_episode([0.0, 0.0])])
    buffer.add([_episode([1.0, 0.0, 2.0])])
    stats = (np.zeros(2, np.float32), np.ones(2, np.float32))
    sampler = WindowSampler(
        Dataset(buffer.episodes, "buffer"), context=3, return_scale=2.0, state_stats=stats
    )
    (window,) = list(sampler.episode_windows(1))
    assert window.returns_to_go[0, :, 0].tolist() == [3.0 / 2, 2.0 / 2, 2.0 / 2]
    assert window.states[0, :, 0].tolist() == [0.0, 1.0, 2.0]  # the given statistics, not its own
