"""Reward normalisation: the returns PPO trains on are scaled by statistics that count the fragment.

Workers scale the rewards they feed the model with the statistics of the weights they were given,
which for the first fragment are empty (scale 1). The learner must not train the value head on
those raw returns: it scales the env's rewards with the statistics merged with the fragment's own.
"""

from __future__ import annotations

import numpy as np
import torch

from rlformer.algos.ppo.algorithm import build_model
from rlformer.algos.ppo.learner import PPOLearner, make_sequence_batch
from rlformer.config import TrainConfig, load_config
from rlformer.learners.returns import compute_gae
from rlformer.rollout.collector import LocalCollector
from rlformer.rollout.fragment import Fragment

GAMMA_OF_THE_SCALE = 0.99


def _config() -> TrainConfig:
    return load_config(
        None,
        [
            "env.id=Pendulum-v1",
            "env.max_episode_steps=12",
            "rollout.envs_per_worker=3",
            "rollout.fragment_length=20",
            "model.core.d_model=16",
            "model.core.n_heads=2",
            "model.core.d_ff=32",
            "model.core.memory_length=4",
            "model.normalize_reward=true",
            f"model.normalize_gamma={GAMMA_OF_THE_SCALE}",
            "model.normalize_clip=1000",  # Pendulum's -16 must pass unclipped
            "ppo.num_minibatches=1",
        ],
    )


def _learner_and_fragments(cfg: TrainConfig, count: int) -> tuple[PPOLearner, list[Fragment]]:
    """A learner and ``count`` fragments collected in turn, each one's statistics merged before
    the next is collected (as training merges them after each update), the last one's not."""
    torch.manual_seed(0)
    model = build_model(cfg)
    learner = PPOLearner(model, cfg.ppo, torch.device("cpu"), total_iterations=count)
    collector = LocalCollector(cfg)
    fragments: list[Fragment] = []
    try:
        for version in range(count):
            if fragments:
                model.merge_statistics(fragments[-1].statistics)
            fragments.append(collector.collect(model.state_dict(), version))
    finally:
        collector.close()
    return learner, fragments


def _discounted_returns(rewards: np.ndarray, done: np.ndarray, gamma: float) -> np.ndarray:
    """What the worker tracks per slot: the running discounted return, reset after an episode."""
    running = np.zeros(rewards.shape[1])
    out = np.zeros_like(rewards, dtype=np.float64)
    for t in range(rewards.shape[0]):
        running = running * gamma + rewards[t]
        out[t] = running
        running[done[t]] = 0.0
    return out


def test_first_fragment_returns_use_its_own_statistics_not_raw_rewards() -> None:
    cfg = _config()
    learner, (fragment,) = _learner_and_fragments(cfg, 1)

    # Nothing seen before the first fragment: the model was fed the raw rewards.
    np.testing.assert_array_equal(fragment.rewards, fragment.env_rewards)
    assert fragment.env_rewards.min() < -1.0

    done = fragment.terminated | fragment.truncated
    assert done.any(), "the fragment should cross an episode end (12-step episodes)"
    discounted = _discounted_returns(fragment.env_rewards, done, GAMMA_OF_THE_SCALE)
    expected = fragment.env_rewards / np.sqrt(discounted.var() + 1e-8)

    scaled = learner._return_rewards(fragment)
    np.testing.assert_allclose(scaled, expected, rtol=1e-5)

    batch = make_sequence_batch(fragment, cfg.ppo, torch.device("cpu"), scaled)
    _, returns = compute_gae(
        expected.astype(np.float32),
        fragment.values,
        fragment.terminated,
        fragment.truncated,
        fragment.truncation_values,
        fragment.last_value,
        cfg.ppo.gamma,
        cfg.ppo.gae_lambda,
    )
    np.testing.assert_allclose(batch.returns.numpy(), returns.T, rtol=1e-4, atol=1e-5)
    # The model's previous-reward inputs are still what the workers fed it.
    np.testing.assert_array_equal(batch.rewards.numpy(), fragment.rewards.T)


def test_later_fragments_count_the_merged_statistics_and_their_own() -> None:
    learner, (first, second) = _learner_and_fragments(_config(), 2)

    worker_scale = second.rewards / second.env_rewards
    assert np.allclose(worker_scale, worker_scale.flat[0])  # one scale, the first fragment's
    count, _, m2 = first.statistics["reward"]
    np.testing.assert_allclose(worker_scale.flat[0], 1 / np.sqrt(m2 / count + 1e-8), rtol=1e-5)

    # The learner's scale counts both fragments' discounted returns, which the worker tracks
    # across the fragment boundary.
    rewards = np.concatenate([first.env_rewards, second.env_rewards])
    done = np.concatenate(
        [first.terminated | first.truncated, second.terminated | second.truncated]
    )
    discounted = _discounted_returns(rewards, done, GAMMA_OF_THE_SCALE)
    expected = second.env_rewards / np.sqrt(discounted.var() + 1e-8)
    np.testing.assert_allclose(learner._return_rewards(second), expected, rtol=1e-5)


def test_without_normalisation_returns_use_the_fragment_rewards() -> None:
    cfg = load_config(
        None, ["env.id=Pendulum-v1", "rollout.fragment_length=8", "model.normalize_reward=false"]
    )
    learner, (fragment,) = _learner_and_fragments(cfg, 1)
    assert learner._return_rewards(fragment) is None
    np.testing.assert_array_equal(fragment.rewards, fragment.env_rewards)
