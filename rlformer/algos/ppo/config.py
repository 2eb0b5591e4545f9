"""PPO's part of the run config: the ``ppo`` section, and what PPO reads of the shared ones.

The algorithm itself is :mod:`rlformer.algos.ppo.algorithm`; this module stays free of torch and of
the algorithm's code, since :mod:`rlformer.config` imports it.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from rlformer.config.sections.base import StrictModel
from rlformer.config.sections.learner import shares_fit


class PPOConfig(StrictModel):
    """Proximal Policy Optimisation hyper-parameters (defaults follow common PPO settings)."""

    total_steps: int = Field(100_000, ge=1, description="Environment steps to train for.")
    learning_rate: float = Field(3e-4, gt=0, description="Adam learning rate.")
    anneal_lr: bool = Field(True, description="Linearly decay the learning rate to 0.")
    gamma: float = Field(0.99, ge=0, le=1, description="Discount factor.")
    gae_lambda: float = Field(0.95, ge=0, le=1, description="GAE lambda.")
    clip_coef: float = Field(0.2, gt=0, description="PPO ratio clip range.")
    clip_value: bool = Field(True, description="Clip the value update around the old value.")
    ent_coef: float = Field(0.01, ge=0, description="Entropy bonus weight.")
    ent_coef_final: float | None = Field(
        None,
        ge=0,
        description="Anneal the entropy weight linearly from ent_coef to this over training, "
        "on the learning rate's schedule (null: constant ent_coef).",
    )
    vf_coef: float = Field(0.5, ge=0, description="Value loss weight.")
    reconstruction_coef: float = Field(
        0.0,
        ge=0,
        description="Weight of the observation-reconstruction loss (needs "
        "model.reconstruction; 0: off). CleanRL's ppo_trxl used 0.1 on Mortar Mayhem.",
    )
    max_grad_norm: float = Field(0.5, gt=0, description="Global gradient-norm clip.")
    update_epochs: int = Field(4, ge=1, description="Passes over each batch.")
    num_minibatches: int = Field(
        4, ge=1, description="Minibatches per epoch (split over env slots)."
    )
    norm_adv: bool = Field(True, description="Normalise advantages per minibatch.")
    memory_gradient_steps: int = Field(
        0,
        ge=0,
        description="B > 0: recompute the B steps before each training sequence with gradient, "
        "so the loss reaches the memory it reads (costs B extra steps per sequence; at most "
        "rollout.fragment_length). 0: rollout memory, no gradient.",
    )
    target_kl: float | None = Field(
        None,
        gt=0,
        description="Stop the epoch loop early when approx KL exceeds this (null: never).",
    )
    decoupled_clip: bool = Field(
        True,
        description="Batches from older weights (rollout.async_sampling): clip the ratio around "
        "the weights the update starts from, importance-weighted by their ratio to the "
        "behaviour policy (decoupled PPO); false: clip around the behaviour policy.",
    )


def _reconstruction_agrees(cfg: Any) -> None:
    """The decoder is built by the model section and weighted by the ppo section: one without
    the other would be a loss with nothing to train, or a head that never trains."""
    built, coef = cfg.model.reconstruction, cfg.ppo.reconstruction_coef
    if coef > 0 and not built:
        raise ValueError(
            f"ppo.reconstruction_coef={coef} needs model.reconstruction=true (the decoder "
            "whose loss it weighs)"
        )
    if built and coef == 0:
        raise ValueError(
            "model.reconstruction=true builds a decoder that ppo.reconstruction_coef=0 never "
            "trains: set ppo.reconstruction_coef > 0 (e.g. 0.1) or model.reconstruction=false"
        )


def check_config(cfg: Any) -> None:
    _minibatches_fit(cfg)
    _reconstruction_agrees(cfg)
    slots = cfg.rollout.num_workers * cfg.rollout.envs_per_worker
    shares_fit(
        cfg,
        slots // cfg.ppo.num_minibatches,
        "env slots per minibatch",
        f"{slots} env slots in ppo.num_minibatches={cfg.ppo.num_minibatches} minibatches",
    )


def _minibatches_fit(cfg: Any) -> None:
    """Sequences recomputed with gradient, and minibatches of whole sequences, must fit one
    fragment of every env slot."""
    if cfg.ppo.memory_gradient_steps > cfg.rollout.fragment_length:
        raise ValueError(
            f"ppo.memory_gradient_steps={cfg.ppo.memory_gradient_steps} exceeds "
            f"rollout.fragment_length={cfg.rollout.fragment_length}; the steps recomputed "
            "with gradient come from the previous fragment"
        )
    slots = cfg.rollout.num_workers * cfg.rollout.envs_per_worker
    if cfg.ppo.num_minibatches > slots:
        raise ValueError(
            f"ppo.num_minibatches={cfg.ppo.num_minibatches} exceeds the "
            f"{slots} env slots (rollout.num_workers x rollout.envs_per_worker); "
            "minibatches split whole sequences, so use at most that many"
        )


def planned_iterations(cfg: Any) -> int:
    """Rollout-and-update iterations of a run: its env steps over the steps of one rollout."""
    r = cfg.rollout
    return -(-cfg.ppo.total_steps // (r.num_workers * r.envs_per_worker * r.fragment_length))
