"""What an exported policy graph takes and gives, written down so a runner needs nothing else.

Each input and output of an exported step is a :class:`TensorSpec`: its name, its shape with
``"batch"`` for the dynamic first dimension, its dtype, and its role. State inputs carry their
initial value (a number, ``False`` or ``"target_return"``), and the step returns each state's
next value as ``next_<name>``, so any runner can keep the state with one rule. Inputs that are
not per-step data carry the ``default`` a runner feeds when the caller gives none (every entry
of the tensor that value): ``action_mask`` True (every action allowed), ``reward`` 0, ``noise``
0 (the most likely action). Every step also outputs ``input_valid [B]`` (see
:func:`input_valid`). Spaces and
normaliser statistics go into ``policy.json`` through :func:`to_json`, which writes tensors and
non-finite floats as strict JSON (Box bounds are often infinite).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlformer.core import MemoryCore
from rlformer.export.space_codec import space_from_data, space_to_data

BATCH = "batch"


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of an exported step (see the module docstring)."""

    name: str
    shape: tuple[int | str, ...]
    dtype: str  # a numpy dtype name
    role: str = "output"
    leaf: str | None = None  # observation inputs: the leaf path (spaces.py), "" for flat spaces
    initial: float | bool | str | None = None  # state inputs: their value before a first step
    default: float | bool | None = None  # inputs a caller may leave out: the value to feed

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}
        if self.role != "output":
            out["role"] = self.role
        if self.leaf is not None:
            out["leaf"] = self.leaf
        if self.initial is not None:
            out["initial"] = self.initial
        if self.default is not None:
            out["default"] = self.default
        return out

    def example(self, batch: int) -> torch.Tensor:
        """A tensor of this spec's shape and dtype (zeros; the batch dimension is ``batch``)."""
        shape = [batch if d == BATCH else int(d) for d in self.shape]
        return torch.zeros(shape, dtype=getattr(torch, np.dtype(self.dtype).name))

    def next_state(self) -> TensorSpec:
        """The output that carries this state input's next value."""
        return TensorSpec(f"next_{self.name}", self.shape, self.dtype)


def state_spec(
    name: str, shape: tuple[int, ...], dtype: str, initial: float | bool | str
) -> TensorSpec:
    return TensorSpec(name, (BATCH, *shape), dtype, "state", initial=initial)


INPUT_DEFAULTS: dict[str, float | bool] = {"action_mask": True, "reward": 0.0, "noise": 0.0}


def input_spec(name: str, shape: tuple[int | str, ...], dtype: str) -> TensorSpec:
    """A per-step input whose role is its name, with its default if it has one."""
    return TensorSpec(name, shape, dtype, name, default=INPUT_DEFAULTS.get(name))


def input_valid_spec() -> TensorSpec:
    return TensorSpec("input_valid", (BATCH,), "bool")


def input_valid(
    observations: list[torch.Tensor], action_mask: torch.Tensor | None, nvec: list[int]
) -> torch.Tensor:
    """``[B]`` True where a row can be acted on: every float observation value finite, and the
    action mask (``[B, sum(nvec)]``, components side by side) allowing at least one action of
    every component. Logic and arithmetic only (onnxruntime has no boolean reductions)."""
    batch = observations[0].shape[0]
    ok = torch.ones(batch, dtype=torch.bool, device=observations[0].device)
    for leaf in observations:
        if leaf.dtype.is_floating_point:
            finite = torch.isfinite(leaf.reshape(batch, -1)).to(torch.int32)
            ok = ok & (finite.amin(dim=1) > 0)
    if action_mask is not None:
        for part in action_mask.split(nvec, dim=1):
            ok = ok & (part.to(torch.int32).amax(dim=1) > 0)
    return ok


def observation_specs(space: gym.Space, leaves: dict[str, gym.Space]) -> list[TensorSpec]:
    """One input per observation leaf: ``obs`` for a flat space, else ``obs.<leaf path>``.

    Float Boxes are fed as float32 (the encoders compute in float32 from the first operation);
    images and discrete leaves keep their own dtype.
    """
    specs = []
    for path, leaf in leaves.items():
        name = "obs" if path == "" else "obs." + path.replace("/", ".")
        dtype = np.dtype(leaf.dtype if leaf.dtype is not None else np.int64)
        if dtype.kind == "f":
            dtype = np.dtype(np.float32)
        specs.append(TensorSpec(name, (BATCH, *leaf.shape), dtype.name, "observation", path))
    return specs


def observation_examples(leaves: dict[str, gym.Space], batch: int, seed: int = 0) -> list[Any]:
    """Valid observations per leaf (sampled: zeros are not valid for every space)."""
    out = []
    for leaf in leaves.values():
        leaf = copy.deepcopy(leaf)
        leaf.seed(seed)
        values = np.stack([np.asarray(leaf.sample()) for _ in range(batch)])
        if values.dtype.kind == "f":
            values = values.astype(np.float32)
        out.append(torch.as_tensor(values))
    return out


def traceable_copy(module: nn.Module) -> nn.Module:
    """A deep copy in eval mode whose attention cores trace: no projection cache (it keys on
    object identity), no ``torch.compile`` inside, fp32 (exported graphs are fp32 CPU graphs)."""
    module = copy.deepcopy(module).cpu().eval()
    for sub in module.modules():
        if isinstance(sub, MemoryCore):
            sub.projection_cache = False
            sub.cfg = sub.cfg.model_copy(update={"compile": False, "precision": "fp32"})
            sub._compiled = None
    return module


# ------------------------------------------------------------------ JSON
def _json_value(value: Any) -> Any:
    """Strict-JSON form of spaces' data: tensors and arrays become ``{"array", "dtype"}``,
    non-finite floats the strings ``"inf"``, ``"-inf"``, ``"nan"``."""
    if isinstance(value, torch.Tensor):
        value = value.numpy()
    if isinstance(value, np.ndarray):
        return {"array": _json_value(value.tolist()), "dtype": value.dtype.name}
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, (np.floating, float)) and not math.isfinite(float(value)):
        return str(float(value))
    if isinstance(value, np.generic):
        return value.item()
    return value


def to_json(value: Any) -> Any:
    """``value`` (spaces' data, statistics, config dumps) as strict JSON data."""
    return _json_value(value)


def _from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"array", "dtype"}:
            dtype = np.dtype(value["dtype"])
            parse = np.float64 if dtype.kind == "f" else dtype  # floats may be "inf" strings
            return torch.from_numpy(np.array(value["array"], dtype=parse).astype(dtype))
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


def space_to_json(space: gym.Space) -> dict[str, Any]:
    """A space as strict JSON, through the checkpoints' codec
    (:mod:`rlformer.export.space_codec`)."""
    return to_json(space_to_data(space))


def space_from_json(data: Any) -> gym.Space:
    """The space :func:`space_to_json` wrote (raises ``SpaceCodecError`` on anything else)."""
    return space_from_data(_from_json(data))
