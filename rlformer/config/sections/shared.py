"""The sections of a run config that any algorithm may read, and the order they are listed in."""

from __future__ import annotations

from rlformer.config.sections.base import Section
from rlformer.config.sections.env import EnvConfig
from rlformer.config.sections.evaluation import EvalConfig
from rlformer.config.sections.learner import LearnerConfig
from rlformer.config.sections.model import ModelConfig
from rlformer.config.sections.rollout import RolloutConfig
from rlformer.config.sections.run import RunConfig

SHARED_SECTIONS: dict[str, Section] = {
    "run": Section(RunConfig, "Run directory, seed, device."),
    "env": Section(EnvConfig, "Environment."),
    "rollout": Section(RolloutConfig, "Experience collection."),
    "model": Section(ModelConfig, "Network."),
    "eval": Section(EvalConfig, "Final evaluation."),
    "learner": Section(LearnerConfig, "Learner processes."),
}
"""The shared top-level keys, in the order a resolved config and ``rlformer config-doc`` list
them (after ``algo`` and ``preset``; the algorithms' own sections follow). Every algorithm
declares which of them it reads (:mod:`rlformer.config.sections.spec`)."""
