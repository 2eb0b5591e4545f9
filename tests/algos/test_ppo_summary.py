"""The PPO progress line says when no episode has finished instead of printing ``nan``."""

from __future__ import annotations

from types import SimpleNamespace

from rlformer.algos.ppo.algorithm import PPO


def test_progress_line_before_and_after_the_first_finished_episode() -> None:
    run = SimpleNamespace(env_steps=3072)  # what summary() reads of the algorithm
    assert PPO.summary(run, {}) == "steps 3072 return - (no episode finished yet)"  # type: ignore[arg-type]
    metrics = {"rollout/return_mean": -499.5, "rollout/success_rate": 0.25}
    assert PPO.summary(run, metrics) == "steps 3072 return -499.50 success 0.25"  # type: ignore[arg-type]
