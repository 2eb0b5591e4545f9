"""Decoupled PPO for batches sampled by older weights (rollout.async_sampling).

The ratio is clipped around the proximal policy (the weights the update starts from) and each
step's clipped term is weighted by pi_prox / pi_behaviour (Hilton et al. 2021).
"""

from __future__ import annotations

import math

import torch

from rlformer.algos.ppo.algorithm import build_model
from rlformer.algos.ppo.config import PPOConfig
from rlformer.algos.ppo.learner import PPOLearner, SequenceBatch, ppo_loss
from rlformer.networks.actor_critic import AgentState, EvaluateOutput
from rlformer.rollout.collector import LocalCollector
from tests.learners.test_ppo_memory import _config


def _batch(old_log_probs: list[float], weights: list[float] | None) -> SequenceBatch:
    steps = len(old_log_probs)
    zeros = torch.zeros(1, steps)
    return SequenceBatch(
        obs=zeros,
        actions=zeros,
        old_log_probs=torch.tensor([old_log_probs]),
        old_values=zeros,
        advantages=torch.tensor([[1.0, -2.0, 0.5]]),
        returns=zeros,
        episode_start=zeros.bool(),
        rewards=zeros,
        state=AgentState(None),
        behaviour_weights=None if weights is None else torch.tensor([weights]),
    )


def test_decoupled_policy_loss_by_hand() -> None:
    cfg = PPOConfig(norm_adv=False, clip_value=False, clip_coef=0.2, ent_coef=0.0)
    new = torch.tensor([[math.log(1.5), math.log(0.9), math.log(1.1)]])
    out = EvaluateOutput(new, torch.zeros(1, 3), torch.zeros(1, 3))
    # Proximal log-probs 0: ratios 1.5, 0.9, 1.1; behaviour weights 2, 0.5, 1.
    loss, _ = ppo_loss(out, _batch([0.0, 0.0, 0.0], [2.0, 0.5, 1.0]), cfg)
    # Per step -min(r A, clip(r) A): A=1, r=1.5 -> -1.2; A=-2, r=0.9 -> -(-2 x 0.9) = 1.8;
    # A=0.5, r=1.1 -> -0.55. Weighted: 2 x -1.2 + 0.5 x 1.8 + 1 x -0.55 = -2.05, mean -0.6833.
    torch.testing.assert_close(loss, torch.tensor(-2.05 / 3))
    plain, _ = ppo_loss(out, _batch([0.0, 0.0, 0.0], None), cfg)
    torch.testing.assert_close(plain, torch.tensor((-1.2 + 1.8 - 0.55) / 3))


def _first_ratio_error_on_a_stale_batch(decoupled: bool) -> float:
    """Update once, then train on a batch the weights from before that update sampled."""
    torch.manual_seed(0)
    cfg = _config("CartPole-v1", **{"ppo.decoupled_clip": str(decoupled).lower()})
    model = build_model(cfg)
    learner = PPOLearner(model, cfg.ppo, torch.device("cpu"), total_iterations=3)
    collector = LocalCollector(cfg)
    try:
        behaviour = {k: v.clone() for k, v in model.state_dict().items()}
        learner.update(collector.collect(behaviour, 0))
        stale = collector.collect(behaviour, 0)  # version 0, learner is at 1
        metrics = learner.update(stale)
        # Decoupled updates report how far the weights moved since sampling; plain ones do not.
        assert ("ppo/behaviour_ratio_error_mean" in metrics) == decoupled
        assert metrics.get("ppo/behaviour_ratio_error_mean", 1.0) > 0
        return metrics["ppo/first_minibatch_ratio_error"]
    finally:
        collector.close()


def test_stale_batch_is_clipped_around_the_current_weights() -> None:
    # Decoupled: the first minibatch's ratio is pi_theta / pi_prox = 1 again.
    assert _first_ratio_error_on_a_stale_batch(decoupled=True) < 1e-5
    # Plain PPO on the same batch measures against the behaviour policy, one update behind.
    assert _first_ratio_error_on_a_stale_batch(decoupled=False) > 1e-3
