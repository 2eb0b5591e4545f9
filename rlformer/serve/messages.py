"""JSON forms of observations and actions, checked against the policy's spaces.

One row (one client's env step) in JSON, by space:

- ``Box``, ``MultiDiscrete``, ``MultiBinary``: nested lists of numbers with exactly the space's
  shape (a scalar for a shape ``()`` Box); integer spaces take integers, ``MultiBinary`` takes
  0/1 or booleans. Values must be finite.
- ``Discrete``: an integer in ``[start, start + n)``.
- ``Dict``: an object with exactly the space's keys; ``Tuple``: a list with one entry per part.

A ``Box``'s bounds are not enforced: Gymnasium does not enforce them either, and many envs
produce values outside what they declare (unbounded velocities behind a finite Box, noise on a
clipped signal), so refusing them would refuse what the training env itself produced. A policy
sees out-of-range values as it would in training. What is refused is what no env can produce
for the space: the wrong shape, non-numbers, non-finite values, floats for an integer space,
values other than 0/1 for a boolean one.

Actions come back in the same forms (floats for a float ``Box``). Anything else is a
:class:`RequestError` with a one-line reason, so that a bad client gets a 400 and never
reaches the batched forward pass, where one malformed row would fail every row beside it.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import gymnasium as gym
import numpy as np


class RequestError(ValueError):
    """A request the server refuses: ``status`` is its HTTP status, ``code`` a stable name
    for clients to switch on (``bad_request``, ``unknown_session``, ``session_dropped``, ...),
    the message one line."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str = "bad_request",
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.headers = status, code, headers

    def payload(self) -> dict[str, Any]:
        """The JSON error body: ``{"error": "...", "code": "...", "status": 4xx}``."""
        return {"error": str(self), "code": self.code, "status": self.status}


def _bad(where: str, message: str) -> RequestError:
    return RequestError(400, f"{where}: {message}")


def _numeric_array(value: Any, shape: tuple[int, ...], integer: bool, where: str) -> np.ndarray:
    """``value`` as an array of ``shape``; refuses strings, ragged lists, non-finite values."""
    try:
        array = np.asarray(value)
    except (ValueError, TypeError):  # ragged nested lists
        raise _bad(where, f"expected nested lists of shape {list(shape)}") from None
    if array.dtype == object or array.dtype.kind not in "biuf":
        raise _bad(where, f"expected numbers, got {_kind_name(array)}")
    if array.shape != shape:
        raise _bad(where, f"expected shape {list(shape)}, got {list(array.shape)}")
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        raise _bad(where, "holds NaN or infinity")
    if integer and array.dtype.kind == "f":
        raise _bad(where, "expected integers, got floats")
    return array


def _kind_name(array: np.ndarray) -> str:
    """What a non-numeric JSON value holds, in the client's words (not NumPy's dtype name)."""
    if array.dtype.kind in "US":
        return "strings"
    items = {type(v).__name__ for v in array.reshape(-1).tolist()} if array.size else set()
    names = {"NoneType": "null", "dict": "objects", "list": "lists", "str": "strings"}
    return "values of type " + ", ".join(sorted(names.get(n, n) for n in items)) or "no values"


def decode(space: gym.Space, value: Any, where: str = "observation") -> Any:
    """One row in ``space``'s JSON form as the batched (leading dimension 1) value a
    vector env would give: arrays for simple spaces, dicts / tuples of them for composites."""
    spaces = gym.spaces
    if isinstance(space, spaces.Dict):
        if not isinstance(value, dict) or set(value) != set(space.spaces):
            raise _bad(where, f"expected an object with keys {sorted(space.spaces)}")
        return {k: decode(s, value[k], f"{where}.{k}") for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        if not isinstance(value, list) or len(value) != len(space.spaces):
            raise _bad(where, f"expected a list of {len(space.spaces)} entries")
        return tuple(
            decode(s, v, f"{where}[{i}]") for i, (s, v) in enumerate(zip(space, value, strict=True))
        )
    if isinstance(space, spaces.Discrete):
        if isinstance(value, bool) or not isinstance(value, int):
            raise _bad(where, f"expected an integer, got {type(value).__name__}")
        if not space.start <= value < space.start + space.n:
            raise _bad(where, f"{value} is outside [{space.start}, {space.start + space.n})")
        return np.array([value], dtype=space.dtype)
    if isinstance(space, spaces.Box):
        kind = np.dtype(space.dtype).kind
        array = _numeric_array(value, space.shape, kind in "iu", where)
        if kind == "b" and (array.dtype.kind == "f" or ((array != 0) & (array != 1)).any()):
            raise _bad(where, "expected true / false or 0 / 1 values (a boolean Box)")
        return array.astype(space.dtype)[None]  # bounds are not checked: see the module doc
    if isinstance(space, spaces.MultiDiscrete):
        array = _numeric_array(value, space.shape, True, where)
        if ((array < space.start) | (array >= space.start + space.nvec)).any():
            raise _bad(where, "a component is outside its range")
        return array.astype(space.dtype)[None]
    if isinstance(space, spaces.MultiBinary):
        array = _numeric_array(value, space.shape, True, where)
        if ((array != 0) & (array != 1)).any():
            raise _bad(where, "expected 0 or 1 values")
        return array.astype(space.dtype)[None]
    raise RequestError(500, f"{type(space).__name__} spaces are not served", "internal")


def concat(rows: list[Any]) -> Any:
    """Decoded rows (each with a leading dimension of 1) as one batch."""
    first = rows[0]
    if isinstance(first, dict):
        return {k: concat([r[k] for r in rows]) for k in first}
    if isinstance(first, tuple):
        return tuple(concat([r[i] for r in rows]) for i in range(len(first)))
    return np.concatenate(rows)


def encode_row(actions: Any, row: int) -> Any:
    """Row ``row`` of env-format batched actions in JSON form."""
    if isinstance(actions, dict):
        return {k: encode_row(v, row) for k, v in actions.items()}
    if isinstance(actions, tuple):
        return [encode_row(v, row) for v in actions]
    value = np.asarray(actions)[row]
    return value.tolist()  # numpy scalars become int / float, arrays nested lists


def mask_size(space: gym.Space) -> int | None:
    """How many booleans an action mask has (None: the space takes no mask)."""
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    return None


def decode_mask(space: gym.Space, value: Any, where: str = "action_mask") -> np.ndarray | None:
    """An ``action_mask`` list as ``[n]`` booleans (None when absent); ``where`` names the
    field in errors."""
    if value is None:
        return None
    size = mask_size(space)
    if size is None:
        raise _bad(where, f"{type(space).__name__} actions take no mask")
    if not isinstance(value, list) or len(value) != size:
        raise _bad(where, f"expected a list of {size} booleans")
    if not all(isinstance(v, bool) or v in (0, 1) for v in value):
        raise _bad(where, "expected booleans")
    mask = np.array(value, dtype=bool)
    multi = isinstance(space, gym.spaces.MultiDiscrete)
    parts = np.split(mask, np.cumsum(np.asarray(space.nvec).reshape(-1))[:-1]) if multi else [mask]
    for component, part in enumerate(parts):
        if not part.any():  # a batch row without a valid action would fail its whole batch
            where = f" in action component {component}" if len(parts) > 1 else ""
            raise _bad(where, f"allows no action{where}")
    return mask


def decode_reward(value: Any) -> float | None:
    """The reward for the previous action: a finite number or null."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _bad("reward", "expected a finite number or null")
    return float(value)


def _is_tensor(value: Any) -> bool:
    """Whether ``value`` is a torch tensor, without importing torch: the HTTP router parses
    requests with this module and never needs torch (a tensor exists only once it is loaded)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def jsonable(value: Any) -> Any:
    """Codec data (tensors inside dicts / lists) as plain JSON values."""
    if isinstance(value, np.ndarray) or _is_tensor(value):
        return jsonable(value.tolist())
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # unbounded Box limits: "inf" / "-inf", since JSON has no infinity
    return value
