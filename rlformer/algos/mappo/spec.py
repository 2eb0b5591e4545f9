"""The mappo algorithm's declaration: its config section and where its parts live (loaded by
the ``rlformer.algorithms`` entry point; see :mod:`rlformer.config.sections.registry`)."""

from __future__ import annotations

from rlformer.algos.mappo.config import MAPPOConfig, check_config, planned_iterations
from rlformer.config.sections.base import Section
from rlformer.config.sections.spec import AlgorithmSpec

MAPPO = AlgorithmSpec(
    name="mappo",
    rank=3,
    summary="multi-agent GTrXL-PPO on PettingZoo Parallel tasks",
    section=Section(MAPPOConfig, "Multi-agent PPO."),
    unread_reason="it configures multi-agent PPO, algo mappo",
    reads=("run", "rollout", "model", "eval", "learner", "ppo"),
    unread={"env": "a multi-agent task is named by mappo.env and mappo.env_kwargs"},
    preset_sections=(),
    check=check_config,
    algorithm="rlformer.algos.mappo.algorithm:MAPPO",
    policy_loader="rlformer.algos.mappo.policy:team_policy",
    export_loader="rlformer.algos.mappo.export:ExportedTeam",
    budget_key="mappo.total_steps",
    async_sampling=True,
    planned_iterations=planned_iterations,
)
