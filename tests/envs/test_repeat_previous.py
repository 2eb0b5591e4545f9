"""Repeat-previous: checker, seeding, oracle optimum, memoryless policies at chance."""

from __future__ import annotations

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


def test_memoryless_policy_is_at_chance() -> None:
    n, k = 4, 3
    env = RepeatPreviousEnv(k=k, n_symbols=n, episode_length=50)
    accuracies = []
    for seed in range(40):
        obs, _ = env.reset(seed=seed)
        while True:
            obs, _, term, _, info = env.step(int(obs.argmax()))  # best guess without memory
            if term:
                accuracies.append(info["accuracy"])
                break
    # 40 x 47 scored answers, p = 1/4: std of the mean ~ 0.01.
    assert abs(np.mean(accuracies) - 1 / n) < 0.04


def test_invalid_parameters() -> None:
    with pytest.raises(ValueError):
        RepeatPreviousEnv(k=5, episode_length=5)
