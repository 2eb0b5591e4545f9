"""Trained agents you act with: one :class:`Policy` protocol for evaluation, ``rlformer
collect``, ``predict()``, the Online DT's rollouts and export; loaders by checkpoint kind.

The exports load on first use (:mod:`rlformer.lazy`): ``rlformer.policies.errors`` imports
without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlformer.lazy import exports

if TYPE_CHECKING:
    from rlformer.policies.base import (
        DistributionPolicy,
        Policy,
        PolicyDistribution,
        PolicyInfo,
        PolicyState,
    )
    from rlformer.policies.errors import PolicyError
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

__getattr__ = exports(
    __name__,
    {
        **dict.fromkeys(
            ["DistributionPolicy", "Policy", "PolicyDistribution", "PolicyInfo", "PolicyState"],
            "rlformer.policies.base",
        ),
        "PolicyError": "rlformer.policies.errors",
        "Predictor": "rlformer.policies.predict",
        **dict.fromkeys(
            ["load_policy", "policy_from_payload", "register_policy_loader"],
            "rlformer.policies.registry",
        ),
    },
)
