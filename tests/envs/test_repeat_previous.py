"""Repeat-previous: checker, seeding, oracle optimum, memoryless policies at chance."""

from __future__ import annotations

import itertools

import gymnasium as gym
import numpy as np
import pytest
import rlformer_envs  # noqa: F401
from gymnasium.utils.env_checker import check_env
from rlformer_envs.repeat_previous import RepeatPreviousEnv


def test_checker_and_seeding() -> None:
    check_env(RepeatPreviousEnv(), skip_render_check=True)
    env = gym.make("rlformer/RepeatPrevious-v0", k=2, n_symbols=3)
    a = [env.reset(seed=7)[0]] + [env.step(0)[0] for _ in range(5)]
    b = [env.reset(seed=7)[0]] + [env.step(0)[0] for _ in range(5)]
    np.testing.assert_array_equal(np.stack(a), np.stack(b))
    c = [env.reset(seed=8)[0]] + [env.step(0)[0] for _ in range(5)]
    assert not np.array_equal(np.stack(a), np.stack(c))  # the seed matters


@pytest.mark.parametrize(("k", "n"), [(1, 2), (3, 4), (8, 5)])
def test_oracle_scores_every_step(k: int, n: int) -> None:
    env = RepeatPreviousEnv(k=k, n_symbols=n, episode_length=30)
    obs, _ = env.reset(seed=0)
    seen, total = [], 0.0
    while True:
        seen.append(int(obs.argmax()))
        action = seen[-1 - k] if len(seen) > k else 0
        obs, reward, term, _, info = env.step(action)
        total += reward
        if term:
            break
    assert total == 30 - k and info["accuracy"] == 1.0 and info["is_success"]


def test_every_memoryless_policy_is_at_chance() -> None:
    """All n**n maps from the current symbol to an answer score ~1/n (the target is independent)."""
    n, k, length, episodes = 3, 2, 50, 30
    env = RepeatPreviousEnv(k=k, n_symbols=n, episode_length=length)
    for answers in itertools.product(range(n), repeat=n):
        accuracies = []
        obs, _ = env.reset(seed=0)  # same symbol streams for every policy
        for _ in range(episodes):
            while True:
                obs, _, term, _, info = env.step(answers[int(obs.argmax())])
                if term:
                    accuracies.append(info["accuracy"])
                    obs, _ = env.reset()
                    break
        # 30 x 48 scored answers at p = 1/3: 4 standard deviations of the mean is 0.05.
        assert abs(np.mean(accuracies) - 1 / n) < 0.05, answers


def test_rewards_follow_the_symbol_k_steps_back() -> None:
    """Scripted answers: unscored warm-up, deliberate mistakes, and the end-of-episode info."""
    k, length = 2, 10
    env = RepeatPreviousEnv(k=k, n_symbols=4, episode_length=length)
    obs, _ = env.reset(seed=3)
    seen, rewards, wrong_at = [], [], {4, 7}
    for t in range(length):
        seen.append(int(obs.argmax()))
        if t < k:
            action = seen[-1]  # anything: the warm-up steps are never scored
        else:
            target = seen[t - k]
            action = (target + 1) % 4 if t in wrong_at else target
        obs, reward, term, trunc, info = env.step(action)
        rewards.append(reward)
        assert term == (t == length - 1) and not trunc
    expected = [0.0] * k + [0.0 if t in wrong_at else 1.0 for t in range(k, length)]
    assert rewards == expected
    assert info["accuracy"] == (length - k - len(wrong_at)) / (length - k)
    assert info["is_success"] is False
    assert obs.sum() == 0.0  # the final observation shows no symbol


def test_invalid_parameters() -> None:
    with pytest.raises(ValueError):
        RepeatPreviousEnv(k=5, episode_length=5)
    with pytest.raises(ValueError):
        RepeatPreviousEnv(n_symbols=1)
    with pytest.raises(ValueError):
        RepeatPreviousEnv().step(4)
