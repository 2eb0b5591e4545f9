"""The ppo algorithm's declaration: its config section and where its parts live (loaded by
the ``rlformer.algorithms`` entry point; see :mod:`rlformer.config.sections.registry`)."""

from __future__ import annotations

from rlformer.algos.ppo.config import PPOConfig, check_config, planned_iterations
from rlformer.config.sections.base import Section
from rlformer.config.sections.spec import AlgorithmSpec

PPO = AlgorithmSpec(
    name="ppo",
    rank=0,
    summary="online GTrXL-PPO",
    section=Section(PPOConfig, "PPO learner."),
    unread_reason="it configures PPO",
    reads=("run", "env", "rollout", "model", "eval", "learner"),
    preset_sections=None,
    async_sampling=True,
    check=check_config,
    algorithm="rlformer.algos.ppo.algorithm:PPO",
    policy_loader="rlformer.algos.ppo.policy:actor_critic_policy",
    budget_key="ppo.total_steps",
    export_step="rlformer.algos.ppo.export:export_step",
    network_policy="rlformer.algos.ppo.policy:policy_for_network",
    planned_iterations=planned_iterations,
)
