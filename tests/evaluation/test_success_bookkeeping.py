"""Per-episode success stays with its episode, also when episodes end at different steps or
without reporting ``is_success``.

Active T-Maze with a corridor of 2 and a time limit of 6 steps (shorter than the maze's own, so
the cut episode reports nothing). Scripted actions per env slot:
slot 0 walks to the junction and turns up, slot 1 turns inside the corridor until cut off,
slot 2 walks and turns down. With no turn penalty the return is 1 exactly when the turn was
right, so each reported success must equal its own episode's return.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
import rlformer_envs  # noqa: F401

from rlformer.algos.dt.evaluation import run_return_conditioned
from rlformer.algos.dt.policy import DTPolicy
from rlformer.config import EnvConfig
from rlformer.core import CoreConfig
from rlformer.evaluation.runner import EpisodeResults, run_policy_episodes
from rlformer.policies import PolicyInfo

SCRIPT = np.array([[0, 0, 1, 1, 1, 1], [2, 2, 2, 2, 2, 2], [0, 0, 2, 2, 2, 2]])
ENV = EnvConfig(
    id="rlformer/TMaze-v0",
    kwargs={"length": 2, "passive": False, "turn_penalty": 0.0},
    max_episode_steps=6,
)


def _check(results: EpisodeResults) -> None:
    assert results.successes[1] is None  # cut by the time limit: nothing reported
    assert results.lengths == [3, 6, 3]
    for slot in (0, 2):
        assert results.successes[slot] == results.returns[slot]
    # The unreported episode counts as a failure.
    assert results.success_rate == pytest.approx((results.returns[0] + results.returns[2]) / 3)


@dataclass
class _ScriptedSlots:
    """A policy whose state is the step count: slot s takes ``SCRIPT[s, step]``."""

    observation_space: object = None
    action_space: object = None
    info: PolicyInfo = field(default_factory=lambda: PolicyInfo("scripted", "test"))

    def initial_state(self, n: int, target_return: float | None = None) -> int:
        return 0

    def act(self, obs, state, episode_start, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN201
        return SCRIPT[:, min(state, SCRIPT.shape[1] - 1)], state + 1


def _in_slot_order(r: EpisodeResults) -> EpisodeResults:
    """Episodes are recorded as they finish: slots 0 and 2 at step 3, slot 1 at step 6.
    Swapping the last two puts them back in slot order."""
    by_slot = [0, 2, 1]
    return EpisodeResults(
        *([values[i] for i in by_slot] for values in (r.returns, r.lengths, r.successes))
    )


def test_vector_runner_keeps_success_with_its_episode() -> None:
    _check(_in_slot_order(run_policy_episodes(_ScriptedSlots(), ENV, 3, num_envs=3, seed=4)))


@dataclass
class _ScriptedDTPolicy(DTPolicy):
    """The real DT runs on every step; only the choice of env action is scripted."""

    calls: list[int] = field(default_factory=lambda: [0])

    def to_env_action(self, prediction: np.ndarray) -> np.ndarray:
        step = self.calls[0]
        self.calls[0] += 1
        return SCRIPT[:, step]


def test_dt_runner_keeps_success_with_its_episode() -> None:
    from rlformer.networks.decision_transformer import DecisionTransformer

    core = CoreConfig(n_layers=1, d_model=16, n_heads=1, d_ff=32, memory_length=12)
    model = DecisionTransformer(state_dim=3, act_dim=3, discrete=True, core=core)
    policy = _ScriptedDTPolicy(
        model, np.zeros(3, np.float32), np.ones(3, np.float32), 1.0, 4, carry_memory=False
    )
    seen = set()
    for seed in range(4):  # cues differ between seeds, so both outcomes occur in each slot
        policy.calls[0] = 0
        results = _in_slot_order(
            run_return_conditioned(policy, ENV, target_return=1.0, episodes=3, seed=seed)
        )
        _check(results)
        seen |= {(slot, results.successes[slot]) for slot in (0, 2)}
    assert seen == {(0, 0.0), (0, 1.0), (2, 0.0), (2, 1.0)}


def test_no_reported_success_means_no_rate() -> None:
    results = EpisodeResults([1.0, 0.0], [3, 3], [None, None])
    assert results.success_values() is None and results.success_rate is None
