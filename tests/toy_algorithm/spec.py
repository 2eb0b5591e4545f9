"""The toy's declaration, as an entry point of the ``rlformer.algorithms`` group names it."""

from __future__ import annotations

from typing import Any

from rlformer.config.sections.base import Section
from rlformer.config.sections.spec import AlgorithmSpec
from tests.toy_algorithm.config import ToyConfig


def planned_iterations(cfg: Any) -> int:
    return cfg.toy.iterations


TOY = AlgorithmSpec(
    name="toy",
    rank=50,
    summary="a test's linear policy found by hill climbing",
    section=Section(ToyConfig, "Toy hill climbing."),
    unread_reason="it configures the toy",
    reads=("run", "env", "eval"),
    unread={
        "model": "the toy's policy is linear",
        "rollout": "the toy plays its own episodes",
        "learner": "the toy learns in one process",
    },
    preset_sections=(),
    algorithm="tests.toy_algorithm.algorithm:HillClimb",
    checkpoint_kind="toy",
    policy_loader="tests.toy_algorithm.policy:load_linear_policy",
    budget_key="toy.iterations",
    budget_unit="iterations",
    export_step="tests.toy_algorithm.export:export_step",
    planned_iterations=planned_iterations,
)
