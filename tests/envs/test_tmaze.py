"""Passive T-Maze: API conformance, seeding, and reward logic (oracle vs memoryless policies)."""

from __future__ import annotations

import itertools

import gymnasium as gym
import pytest
import rlformer_envs  # noqa: F401  (registers rlformer/*)
from gymnasium.utils.env_checker import check_env
from rlformer_envs.tmaze import DOWN, FORWARD, UP, TMazeEnv


def test_passes_gymnasium_checker() -> None:
    check_env(TMazeEnv(length=5), skip_render_check=True)
    check_env(TMazeEnv(length=5, show_position=True), skip_render_check=True)


def test_make_with_kwargs_and_seeding() -> None:
    env = gym.make("rlformer/TMaze-v0", length=50)
    assert env.unwrapped.length == 50
    cues = [env.reset(seed=s)[1]["cue"] for s in range(20)]
    again = [env.reset(seed=s)[1]["cue"] for s in range(20)]
    assert cues == again and set(cues) == {UP, DOWN}


def _oracle_episode(env: TMazeEnv, seed: int) -> tuple[float, bool, int]:
    obs, _ = env.reset(seed=seed)
    cue = UP if obs[0] == 1 else DOWN  # remembered from the first observation only
    total, steps = 0.0, 0
    while True:
        action = cue if obs[2] == 1 else FORWARD
        obs, reward, term, trunc, info = env.step(action)
        total, steps = total + reward, steps + 1
        if term or trunc:
            return total, info["is_success"], steps


@pytest.mark.parametrize("length", [1, 10, 100])
def test_oracle_with_memory_is_optimal(length: int) -> None:
    env = TMazeEnv(length=length)
    results = [_oracle_episode(env, seed) for seed in range(50)]
    assert all(r == 1.0 and ok and steps == length + 1 for r, ok, steps in results)


def test_cue_is_visible_only_at_the_first_step() -> None:
    env = TMazeEnv(length=4)
    obs, _ = env.reset(seed=0)
    assert obs[:2].sum() == 1
    for _ in range(4):
        obs, *_ = env.step(FORWARD)
        assert obs[:2].sum() == 0
    assert obs[2] == 1


def _memoryless_success(
    policy: dict[tuple[float, ...], int], length: int, episodes: int, passive: bool
) -> float:
    env = TMazeEnv(length=length, passive=passive)
    wins = 0
    for seed in range(episodes):
        obs, _ = env.reset(seed=seed)
        while True:
            obs, _, term, trunc, info = env.step(policy[tuple(obs.tolist())])
            if term or trunc:
                wins += info["is_success"]
                break
    return wins / episodes


@pytest.mark.parametrize("passive", [True, False])
def test_no_memoryless_policy_beats_chance(passive: bool) -> None:
    """Enumerate every deterministic map from the 4 possible observations to the 3 actions."""
    observations = [(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 1.0)]
    episodes = 400
    rates = []
    for actions in itertools.product(range(3), repeat=len(observations)):
        rate = _memoryless_success(
            dict(zip(observations, actions, strict=True)), 3, episodes, passive
        )
        rates.append(rate)
    # 3 standard deviations of a binomial(400, 0.5) is 0.075.
    assert max(rates) <= 0.5 + 0.075
    assert max(rates) >= 0.5 - 0.075  # walking forward and turning blindly is at chance


def test_corridor_modes() -> None:
    passive, active = TMazeEnv(length=3), TMazeEnv(length=3, passive=False, turn_penalty=0.1)
    passive.reset(seed=0)
    active.reset(seed=0)
    for _ in range(3):
        obs_p, r_p, *_ = passive.step(UP)
        obs_a, r_a, *_ = active.step(UP)
    assert obs_p[2] == 1 and r_p == 0.0  # passive: any action walks the corridor
    assert obs_a[2] == 0 and r_a == pytest.approx(-0.1)  # active: turning wastes a step


def test_wrong_turn_and_timeout() -> None:
    env = TMazeEnv(length=2, slack=3)
    obs, info = env.reset(seed=1)
    wrong = DOWN if info["cue"] == UP else UP
    env.step(FORWARD)
    env.step(FORWARD)
    _, reward, term, trunc, info = env.step(wrong)
    assert (reward, term, trunc, info["is_success"]) == (0.0, True, False, False)
    env.reset(seed=1)
    for _ in range(env.max_steps):
        _, reward, term, trunc, info = env.step(FORWARD)
    assert trunc and not term and env.max_steps == 2 + 1 + 3 and info["is_success"] is False
    with pytest.raises(ValueError):
        TMazeEnv(length=0)
