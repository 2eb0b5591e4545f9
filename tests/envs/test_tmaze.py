"""Passive T-Maze: API conformance, seeding, and reward logic (oracle vs memoryless policies)."""

from __future__ import annotations

import itertools
from typing import NamedTuple

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


class _MemorylessResult(NamedTuple):
    """Outcome of one deterministic observation -> action map over many episodes."""

    success_rate: float
    wins_by_cue: dict[int, list[bool]]  # cue -> success of each episode with that cue


def _play_memoryless(
    env: TMazeEnv, policy: dict[tuple[float, ...], int], episodes: int
) -> _MemorylessResult:
    wins_by_cue: dict[int, list[bool]] = {UP: [], DOWN: []}
    obs, info = env.reset(seed=0)  # seeded once: every policy faces the same cue sequence
    for _ in range(episodes):
        cue = info["cue"]
        while True:
            obs, _, term, trunc, step_info = env.step(policy[tuple(obs.tolist())])
            if term or trunc:
                wins_by_cue[cue].append(bool(step_info["is_success"]))
                break
        obs, info = env.reset()
    wins = sum(sum(w) for w in wins_by_cue.values())
    return _MemorylessResult(wins / episodes, wins_by_cue)


def _all_observations(length: int, show_position: bool) -> list[tuple[float, ...]]:
    """Every observation a T-Maze of this length can emit (cue, corridor cells, junction)."""
    position = [[p / length] if show_position else [] for p in range(length + 1)]
    first = [tuple([1.0, 0.0, 0.0, *position[0]]), tuple([0.0, 1.0, 0.0, *position[0]])]
    corridor = [tuple([0.0, 0.0, 0.0, *position[p]]) for p in range(length)]
    junction = [tuple([0.0, 0.0, 1.0, *position[length]])]
    return list(dict.fromkeys(first + corridor + junction))  # dedupe, keep order


@pytest.mark.parametrize(
    ("passive", "show_position"), [(True, False), (False, False), (True, True)]
)
def test_no_memoryless_policy_beats_chance(passive: bool, show_position: bool) -> None:
    """Enumerate every deterministic map from the possible observations to the 3 actions.

    Two claims, one exact and one statistical: (1) the cue is the episode's only randomness, so a
    memoryless policy wins either every episode of a cue or none, and never both cues; (2) the
    best such policy therefore wins ~50% of many seeded episodes, within a binomial bound.
    """
    length = 1 if show_position else 2  # keeps 4 distinct observations: 3**4 = 81 policies
    env = TMazeEnv(length=length, slack=1, passive=passive, show_position=show_position)
    observations = _all_observations(length, show_position)
    assert len(observations) == 4
    best: tuple[float, dict[tuple[float, ...], int]] = (-1.0, {})
    for actions in itertools.product(range(3), repeat=len(observations)):
        policy = dict(zip(observations, actions, strict=True))
        result = _play_memoryless(env, policy, episodes=20)
        per_cue = [set(wins) for wins in result.wins_by_cue.values()]
        assert all(len(outcomes) == 1 for outcomes in per_cue), "outcome must depend on cue only"
        assert not all(True in outcomes for outcomes in per_cue), "a policy won for both cues"
        best = max(best, (result.success_rate, policy), key=lambda pair: pair[0])
    rate = _play_memoryless(env, best[1], episodes=1000).success_rate
    assert abs(rate - 0.5) <= 0.047  # 3 standard deviations of a binomial(1000, 0.5) rate


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
