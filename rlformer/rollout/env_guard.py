"""Errors from inside environments, reported with where they happened.

A user's env that raises in ``reset`` or ``step``, or hands back NaN, should stop a run with a
line that names the env, the rollout worker, the env slot and the failing line of code, not with
a traceback through the vector env and Ray. :class:`EnvGuard` wraps each env of a worker's vector
env to attach its slot; the worker adds its own index.
"""

from __future__ import annotations

import traceback
from typing import Any

import gymnasium as gym
import numpy as np


class EnvCrash(RuntimeError):
    """An exception raised inside an env's ``reset``/``step`` (message says where)."""


class EnvDataError(RuntimeError):
    """An env returned a NaN or infinite observation or reward (message says where)."""


def last_frame(err: BaseException) -> str:
    """``file:line in function`` of the innermost frame of ``err``'s traceback."""
    frames = traceback.extract_tb(err.__traceback__)
    if not frames:
        return "no traceback"
    frame = frames[-1]
    return f"{frame.filename}:{frame.lineno} in {frame.name}"


class EnvGuard(gym.Wrapper):
    """Re-raises any exception of the wrapped env as :class:`EnvCrash` naming slot and frame."""

    def __init__(self, env: gym.Env, slot: int, label: str) -> None:
        super().__init__(env)
        self.slot = slot
        self.label = label

    def _crash(self, method: str, err: Exception) -> EnvCrash:
        env_id = self.env.spec.id if self.env.spec is not None else type(self.env).__name__
        return EnvCrash(
            f"env {env_id!r} raised {type(err).__name__}: {err} in {method}() on "
            f"{self.label}, env slot {self.slot} (at {last_frame(err)})"
        )

    def reset(self, **kwargs: Any) -> Any:
        try:
            return self.env.reset(**kwargs)
        except Exception as err:
            raise self._crash("reset", err) from err

    def step(self, action: Any) -> Any:
        try:
            return self.env.step(action)
        except Exception as err:
            raise self._crash("step", err) from err


def first_nonfinite_slot(values: Any) -> int | None:
    """Index along axis 0 of the first slot with a NaN/inf in any float array of ``values``.

    ``values`` is a batched array or a (nested) dict / tuple of them, as vector envs return.
    """
    if isinstance(values, dict):
        parts = list(values.values())
    elif isinstance(values, tuple | list):
        parts = list(values)
    else:
        array = np.asarray(values)
        if array.dtype.kind != "f":
            return None
        finite = np.isfinite(array).reshape(array.shape[0], -1).all(axis=1)
        bad = np.flatnonzero(~finite)
        return int(bad[0]) if bad.size else None
    slots = [s for s in (first_nonfinite_slot(p) for p in parts) if s is not None]
    return min(slots) if slots else None
