"""The dt algorithm's declaration: its config section and where its parts live (loaded by
the ``rlformer.algorithms`` entry point; see :mod:`rlformer.config.sections.registry`)."""

from __future__ import annotations

from rlformer.algos.dt.config import DT_NETWORK, DTConfig, check_config
from rlformer.config.presets import OFFLINE_SECTIONS
from rlformer.config.sections.base import Section
from rlformer.config.sections.spec import AlgorithmSpec

DT = AlgorithmSpec(
    name="dt",
    rank=1,
    summary="offline Decision Transformer",
    section=Section(DTConfig, "Decision Transformer learner."),
    unread_reason="it configures the Decision Transformers, algo dt and odt",
    reads=("run", "env", "eval", "learner"),
    unread={"model": DT_NETWORK, "rollout": "an offline DT collects no rollouts"},
    preset_sections=OFFLINE_SECTIONS,
    check=check_config,
    algorithm="rlformer.algos.dt.algorithm:DT",
    policy_loader="rlformer.algos.dt.loading:dt_policy",
    budget_key="dt.train_steps",
    budget_unit="gradient steps",
    export_step="rlformer.algos.dt.export:export_step",
)
