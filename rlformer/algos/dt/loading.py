"""Decision Transformers built from a config, and DT policies loaded from checkpoints.

:func:`build_dt` makes the network a run config describes for an env's spaces (with
:func:`dt_encoder` for observations read leaf by leaf); :func:`load_dt_policy` rebuilds it from
a checkpoint payload, loads its weights and normalisation, and wraps it as a
:class:`~rlformer.algos.dt.policy.DTPolicy` (the policy loader of the ``dt`` kind).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlformer.algos.dt.policy import DTPolicy, sampling_problem
from rlformer.config import ModelConfig, TrainConfig
from rlformer.networks.decision_transformer import DecisionTransformer
from rlformer.networks.dt_spaces import StateLayout, action_kind, action_nvec, head_size
from rlformer.networks.encoders import ObservationEncoder
from rlformer.networks.spaces import SpaceError
from rlformer.policies.base import PolicyInfo
from rlformer.runs.checkpoints import (
    CheckpointError,
    checkpoint_config,
    checkpoint_spaces,
    load_weights,
    require_keys,
)

__all__ = ["build_dt", "dt_encoder", "dt_policy", "load_dt_policy", "stored_array"]


def dt_encoder(cfg: TrainConfig, layout: StateLayout) -> ObservationEncoder | None:
    """PPO's per-leaf observation encoder with the ``dt`` section's CNN settings, for a leaves
    layout (None for a flat one). Raises :class:`~rlformer.networks.spaces.SpaceError` (one
    line, naming the leaf) for a leaf it cannot encode, such as an image too small for
    ``dt.cnn``."""
    if layout.flat:
        return None
    dt = cfg.dt
    settings = ModelConfig(cnn=dt.cnn, cnn_features=dt.cnn_features, image_scale=dt.image_scale)
    return ObservationEncoder(layout.model_space(), settings, setting="dt.cnn")


def build_dt(
    cfg: TrainConfig,
    observation_space: gym.Space,
    action_space: gym.Space,
    layout: StateLayout | None = None,
) -> DecisionTransformer:
    """The DT a config describes for these spaces (an online DT's has a learned spread).

    ``layout`` (default: the space's own, :class:`StateLayout`) says how states are read: a
    flat one gets no encoder, any other one :func:`dt_encoder`.
    """
    layout = layout or StateLayout(observation_space)
    encoder = dt_encoder(cfg, layout)
    state_dim = int(np.prod(observation_space.shape)) if encoder is None else encoder.out_dim
    kind = action_kind(action_space)
    return DecisionTransformer(
        state_dim,
        head_size(action_space),
        kind == "discrete",
        cfg.dt.core,
        cfg.dt.max_timestep,
        stochastic=cfg.algo == "odt",  # ODT's policy is a distribution with a learned spread
        action_kind=kind,
        action_nvec=action_nvec(action_space) if kind == "multidiscrete" else None,
        encoder=encoder,
        condition_on_return=cfg.dt.condition_on_return,
        timestep_embedding=cfg.dt.timestep_embedding,
    )


def stored_array(value: Any) -> np.ndarray | None:
    """Tensors (format 2) and numpy arrays (format 1) alike; None stays None."""
    if value is None:
        return None
    return value.numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def load_dt_policy(
    payload: dict[str, Any], path: str | Path = "checkpoint"
) -> tuple[DTPolicy, TrainConfig]:
    """A ready-to-run DT policy from a checkpoint payload (``kind == "dt"``)."""
    cfg = checkpoint_config(payload, path)
    observation_space, action_space = checkpoint_spaces(payload, path)
    require_keys(payload, path, "normalization")
    stats = payload["normalization"]
    try:
        size = int(np.asarray(stored_array(stats["state_mean"])).size)
        layout = StateLayout.of_checkpoint(observation_space, size)
        model = build_dt(cfg, observation_space, action_space, layout)
    except (KeyError, TypeError, AttributeError, ValueError) as err:
        if isinstance(err, SpaceError):
            raise CheckpointError(f"{path}: {err}") from None
        raise CheckpointError(f"{path}: malformed normalization entry ({err})") from None
    load_weights(model, payload, path)
    info = PolicyInfo(
        str(path),
        "dt",
        training_env=cfg.env,
        return_conditioned=True,
        default_targets=list(cfg.dt.target_returns),
        dataset_returns=payload.get("dataset_returns"),
        sampling_problem=sampling_problem(model),
    )
    try:
        policy = DTPolicy(
            model,
            stored_array(stats["state_mean"]),
            stored_array(stats["state_std"]),
            cfg.dt.return_scale,
            cfg.dt.context,
            carry_memory=cfg.dt.memory_segments > 0,
            action_low=stored_array(stats["action_low"]),
            action_high=stored_array(stats["action_high"]),
            history=cfg.dt.act_context,
            info=info,
            observation_space=observation_space,
            action_space=action_space,
        )
    except (KeyError, TypeError, AttributeError, ValueError) as err:
        raise CheckpointError(f"{path}: malformed normalization entry ({err})") from None
    return policy, cfg


def dt_policy(payload: dict[str, Any], name: str) -> DTPolicy:
    """The policy a DT or ODT checkpoint (``kind: dt``) holds."""
    return load_dt_policy(payload, name)[0]
