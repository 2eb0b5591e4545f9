"""Gymnasium spaces as plain data (dicts, lists, tensors), so checkpoints need no pickle.

A checkpoint must rebuild its model without an environment, which needs the observation and
action spaces. Pickling the space objects would make loading a checkpoint able to run code;
this module writes them as nested dicts of strings, numbers and tensors, which
``torch.load(weights_only=True)`` reads safely, and turns them back into the same spaces.

Example:
    >>> import gymnasium as gym
    >>> space = gym.spaces.Dict({"pos": gym.spaces.Box(-1, 1, (2,)), "id": gym.spaces.Discrete(3)})
    >>> space_from_data(space_to_data(space)) == space
    True
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch


class SpaceCodecError(ValueError):
    """A space that cannot be written as data, or data that does not describe a space."""


def space_to_data(space: gym.Space) -> dict[str, Any]:
    """A nested dict of str / int / list / tensor describing ``space`` exactly."""
    spaces = gym.spaces
    if isinstance(space, spaces.Box):
        return {
            "type": "Box",
            "low": torch.from_numpy(np.array(space.low)),
            "high": torch.from_numpy(np.array(space.high)),
            "dtype": np.dtype(space.dtype).name,
        }
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete):
        return {
            "type": "MultiDiscrete",
            "nvec": torch.from_numpy(np.array(space.nvec, dtype=np.int64)),
            "start": torch.from_numpy(np.array(space.start, dtype=np.int64)),
            "dtype": np.dtype(space.dtype).name,
        }
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": [int(n) for n in np.atleast_1d(space.n)]}
    if isinstance(space, spaces.Dict):
        return {
            "type": "Dict",
            "keys": list(space.spaces.keys()),
            "spaces": [space_to_data(s) for s in space.spaces.values()],
        }
    if isinstance(space, spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_to_data(s) for s in space.spaces]}
    raise SpaceCodecError(
        f"{type(space).__name__} spaces cannot be stored in a checkpoint "
        "(supported: Box, Discrete, MultiDiscrete, MultiBinary, Dict, Tuple)"
    )


def _dtype(name: Any) -> np.dtype:
    if not isinstance(name, str):
        raise SpaceCodecError(f"dtype must be a name, got {type(name).__name__}")
    try:
        dtype = np.dtype(name)
    except TypeError as err:
        raise SpaceCodecError(f"unknown dtype {name!r}") from err
    if dtype.kind not in "biuf":
        raise SpaceCodecError(f"dtype {name!r} is not numeric")
    return dtype


def _array(value: Any, what: str) -> np.ndarray:
    if not isinstance(value, torch.Tensor):
        raise SpaceCodecError(f"{what} must be a tensor, got {type(value).__name__}")
    return value.numpy()


def space_from_data(data: Any) -> gym.Space:
    """The space :func:`space_to_data` described; :class:`SpaceCodecError` for anything else."""
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise SpaceCodecError(f"not a space description: {type(data).__name__}")
    kind = data["type"]
    spaces = gym.spaces
    try:
        if kind == "Box":
            dtype = _dtype(data["dtype"])
            low, high = _array(data["low"], "Box.low"), _array(data["high"], "Box.high")
            if low.shape != high.shape:
                raise SpaceCodecError(f"Box bounds of shapes {low.shape} and {high.shape}")
            return spaces.Box(low.astype(dtype), high.astype(dtype), low.shape, dtype)
        if kind == "Discrete":
            return spaces.Discrete(int(data["n"]), start=int(data["start"]))
        if kind == "MultiDiscrete":
            nvec = _array(data["nvec"], "MultiDiscrete.nvec")
            start = _array(data["start"], "MultiDiscrete.start")
            return spaces.MultiDiscrete(nvec, dtype=_dtype(data["dtype"]), start=start)
        if kind == "MultiBinary":
            n = [int(v) for v in data["n"]]
            return spaces.MultiBinary(n[0] if len(n) == 1 else n)
        if kind == "Dict":
            keys, parts = data["keys"], data["spaces"]
            if len(keys) != len(parts):
                raise SpaceCodecError("Dict space with unequal keys and spaces")
            decoded = (space_from_data(s) for s in parts)
            return spaces.Dict(dict(zip((str(k) for k in keys), decoded, strict=True)))
        if kind == "Tuple":
            return spaces.Tuple([space_from_data(s) for s in data["spaces"]])
    except SpaceCodecError:
        raise
    except (KeyError, TypeError, ValueError, AssertionError) as err:
        raise SpaceCodecError(f"malformed {kind} space: {type(err).__name__}: {err}") from None
    raise SpaceCodecError(f"unknown space type {kind!r}")
