"""The odt algorithm's declaration: its config section and where its parts live (loaded by
the ``rlformer.algorithms`` entry point; see :mod:`rlformer.config.sections.registry`)."""

from __future__ import annotations

from rlformer.algos.dt.config import DT_NETWORK
from rlformer.algos.odt.config import ODTConfig, check_config
from rlformer.config.presets import OFFLINE_SECTIONS
from rlformer.config.sections.base import Section
from rlformer.config.sections.spec import AlgorithmSpec

ODT = AlgorithmSpec(
    name="odt",
    rank=2,
    summary="Online Decision Transformer (DT fine-tuned on its own rollouts)",
    section=Section(ODTConfig, "Online Decision Transformer."),
    unread_reason="it configures the online Decision Transformer, algo odt",
    reads=("run", "env", "rollout", "eval", "dt", "learner"),
    unread={
        "model": DT_NETWORK,
        "rollout.fragment_length": "an online DT collects whole episodes",
        "rollout.compile_act": "it compiles PPO's policy step; an online DT acts eagerly",
    },
    preset_sections=OFFLINE_SECTIONS,
    check=check_config,
    algorithm="rlformer.algos.odt.algorithm:ODT",
    checkpoint_kind="dt",
    budget_key="odt.online_steps",
    export_step="rlformer.algos.dt.export:export_step",
)
