"""Trained agents you act with: one :class:`Policy` protocol for evaluation, ``rlformer
collect``, ``predict()``, the Online DT's rollouts and export; loaders by checkpoint kind."""

from rlformer.policies.base import (
    DistributionPolicy,
    Policy,
    PolicyDistribution,
    PolicyError,
    PolicyInfo,
    PolicyState,
)
from rlformer.policies.predict import Predictor
from rlformer.policies.registry import (
    load_policy,
    policy_from_payload,
    register_policy_loader,
)

__all__ = [
    "DistributionPolicy",
    "Policy",
    "PolicyDistribution",
    "PolicyError",
    "PolicyInfo",
    "PolicyState",
    "Predictor",
    "load_policy",
    "policy_from_payload",
    "register_policy_loader",
]
