"""From a name on the command line to a :class:`~rlformer.policies.Policy`.

``random``, ``sb3:PATH.zip``, an ``rlformer export`` directory (``policy.json`` +
``policy.onnx``, run by onnxruntime), or an rlformer run directory / checkpoint file, whose
``kind`` entry picks the loader: the ``policy_loader`` of the algorithm that declares that kind
(:mod:`rlformer.config.sections.registry`), or one given to :func:`register_policy_loader`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from rlformer.config.sections.registry import load_attr, registered, spec_for_kind
from rlformer.core.device import resolve_device
from rlformer.policies.base import Policy
from rlformer.policies.errors import PolicyError
from rlformer.runs.checkpoints import CheckpointError, load_checkpoint, refuse_saved_calls

PolicyLoader = Callable[[dict[str, Any], str], Policy]
"""``(checkpoint payload, name) -> Policy``; raises :class:`CheckpointError` on bad content."""

_LOADERS: dict[str, PolicyLoader] = {}
"""Loaders given to :func:`register_policy_loader`; the algorithms' own come from their specs."""


def register_policy_loader(kind: str, loader: PolicyLoader) -> None:
    """Make checkpoints whose ``kind`` entry is ``kind`` loadable as policies."""
    _LOADERS[kind] = loader


_OLDEST_KIND = "ppo"
"""The kind of checkpoints written before checkpoints named their kind."""


def _loader(kind: str) -> PolicyLoader | None:
    if kind in _LOADERS:
        return _LOADERS[kind]
    spec = spec_for_kind(kind)
    return None if spec is None else load_attr(spec.policy_loader)  # type: ignore[arg-type]


def policy_from_payload(payload: dict[str, Any], name: str) -> Policy:
    """The policy a loaded checkpoint holds (weights checked to be finite)."""
    kind = str(payload.get("kind", _OLDEST_KIND))
    loader = _loader(kind)
    if loader is None:
        known = {s.kind for s in registered() if s.policy_loader is not None} | set(_LOADERS)
        raise CheckpointError(
            f"{name}: a {kind!r} checkpoint, which no loaded module can act with "
            f"(known kinds: {', '.join(sorted(known))})"
        )
    _require_finite_weights(payload, name)
    return loader(payload, name)


def load_policy(spec: str | Path, trust: bool = False, device: str = "cpu") -> Policy:
    """Load ``sb3:PATH.zip``, an export directory, a run directory or a checkpoint file.

    ``device`` (``auto``, ``cpu`` or ``cuda``) is where rlformer's PPO and DT models act; SB3
    models and ONNX exports act on the CPU, so ``cuda`` is refused for them and ``auto`` keeps
    them there.

    rlformer checkpoints are read without unpickling and SB3 zips through an allow-list,
    unless ``trust`` (see :mod:`rlformer.runs.checkpoints`, :mod:`rlformer.policies.sb3_safe`).
    Exports hold no pickle at all. A training env whose ``env.imports`` call a function is
    refused unless ``trust`` (:func:`~rlformer.runs.checkpoints.refuse_saved_calls`).
    """
    text = str(spec)
    if text.startswith("sb3:"):
        from rlformer.policies.sb3 import sb3_policy

        return place_policy(sb3_policy(text, trust), device, text)
    from rlformer.export.onnx_policy import ExportedPolicy, is_export_dir

    if is_export_dir(text):
        policy: Policy = ExportedPolicy(text)
    elif (Path(text) / MULTI_GRAPH_EXPORT).is_file():
        policy = multi_graph_export(text)
    else:
        policy = policy_from_payload(load_checkpoint(text, trust), text)
    refuse_saved_calls(policy.info.training_env, text, trust)
    return place_policy(policy, device, text)


MULTI_GRAPH_EXPORT = "team.json"
"""The description of an export of several graphs (a team's: one per policy group)."""


def multi_graph_export(directory: str) -> Any:
    """The policy an export of several graphs holds, loaded by the algorithm its ``team.json``
    names (:attr:`~rlformer.config.sections.spec.AlgorithmSpec.export_loader`)."""
    import json

    try:
        kind = str(json.loads((Path(directory) / MULTI_GRAPH_EXPORT).read_text())["kind"])
    except (OSError, KeyError, TypeError, ValueError) as err:
        raise CheckpointError(f"{directory}: not a readable rlformer export ({err})") from None
    spec = spec_for_kind(kind)
    if spec is None or spec.export_loader is None:
        raise CheckpointError(f"{directory}: a {kind!r} export, which no loaded module can play")
    return load_attr(spec.export_loader)(directory)


def place_policy(policy: Policy, device: str, name: str) -> Policy:
    """``policy`` acting on ``device``; see :func:`load_policy`."""
    try:
        target = resolve_device(device)
    except ValueError as err:
        raise PolicyError(f"{name}: {err}") from None
    if target.type == "cpu":
        return policy
    move = getattr(policy, "to", None)
    if move is None:
        if device == "auto":
            return policy
        raise PolicyError(
            f"{name}: SB3 models and ONNX exports act on the CPU only; use device cpu or auto"
        )
    moved: Policy = move(target)
    return moved


def _require_finite_weights(payload: dict[str, Any], name: str) -> None:
    """A :class:`CheckpointError` for NaN / inf weights (a damaged file or a diverged run),
    which would otherwise act at random or fail mid-evaluation when sampling an action."""
    weights = payload.get("model")
    if not isinstance(weights, dict):
        return  # the model loader reports a missing or malformed entry
    bad = [
        key
        for key, value in weights.items()
        if isinstance(value, torch.Tensor)
        and value.is_floating_point()
        and not bool(torch.isfinite(value).all())
    ]
    if bad:
        more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
        raise CheckpointError(
            f"{name}: its weights hold NaN or inf ({bad[0]}{more}); the file is damaged or the "
            "run diverged"
        )
