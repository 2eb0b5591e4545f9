"""Action masks from the env, in one place: ``env.action_mask`` names where they come from.

* ``info:KEY``: the env's ``info[KEY]`` after reset and every step;
* ``obs:KEY``: a key of a Dict observation (removed from what the policy sees);
* ``method:NAME``: the env's method (sb3-contrib's convention is ``method:action_masks``).

:class:`ActionMaskToInfo` wraps each env so that, whatever the source, the mask of the
observation just returned is ``info["rlformer_action_mask"]`` (a key of its own, so that an
env's own ``action_mask`` entry is used only when the config asks for it): one boolean per
action for Discrete actions, the components' masks concatenated for MultiDiscrete ones
(sb3-contrib's layout). Vector envs stack it to ``[E, n]``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

ACTION_MASK_INFO = "rlformer_action_mask"
SOURCES = ("info", "obs", "method")


class ActionMaskError(RuntimeError):
    """An action mask that cannot be used (no valid action, wrong size, unknown source)."""


def mask_size(space: gym.Space) -> int:
    """Entries of one action mask for ``space``: Discrete n, MultiDiscrete the sum of nvec."""
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return int(np.asarray(space.nvec).sum())
    raise ActionMaskError(
        f"action masks apply to Discrete and MultiDiscrete actions, not {type(space).__name__}"
    )


def component_sizes(space: gym.Space) -> list[int]:
    """Sizes of the mask's components (one for Discrete actions)."""
    if isinstance(space, gym.spaces.MultiDiscrete):
        return [int(n) for n in np.asarray(space.nvec).reshape(-1)]
    return [mask_size(space)]


def parse_source(spec: str) -> tuple[str, str]:
    """``info:KEY`` -> ("info", "KEY"), with a clear error for anything else."""
    kind, _, name = spec.partition(":")
    if kind not in SOURCES or not name:
        raise ActionMaskError(
            f"env.action_mask {spec!r}: use info:KEY, obs:KEY or method:NAME "
            "(e.g. method:action_masks, sb3-contrib's convention)"
        )
    return kind, name


def rows_without_valid_action(masks: np.ndarray, space: gym.Space) -> np.ndarray:
    """Indices of the rows of ``masks [B, n]`` where some component allows no action."""
    parts = np.split(np.asarray(masks, bool), np.cumsum(component_sizes(space))[:-1], axis=1)
    empty = np.zeros(len(masks), dtype=bool)
    for part in parts:
        empty |= ~part.any(axis=1)
    return np.flatnonzero(empty)


class ActionMaskToInfo(gym.Wrapper):
    """Puts the mask for the current observation into ``info[ACTION_MASK_INFO]`` (see module)."""

    def __init__(self, env: gym.Env, source: str) -> None:
        super().__init__(env)
        self.kind, self.name = parse_source(source)
        self.size = mask_size(env.action_space)
        if self.kind == "method" and not env.has_wrapper_attr(self.name):
            raise ActionMaskError(
                f"env.action_mask method:{self.name}: the env has no method {self.name!r}"
            )
        if self.kind == "obs":
            space = env.observation_space
            if not isinstance(space, gym.spaces.Dict) or self.name not in space.spaces:
                raise ActionMaskError(
                    f"env.action_mask obs:{self.name}: the observations have no key "
                    f"{self.name!r} (a Dict observation with it is needed)"
                )
            kept = {k: v for k, v in space.spaces.items() if k != self.name}
            self.observation_space = gym.spaces.Dict(kept)

    def _with_mask(self, obs: Any, info: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        if self.kind == "obs":
            mask = obs[self.name]
            obs = {k: v for k, v in obs.items() if k != self.name}
        elif self.kind == "info":
            if self.name not in info:
                raise ActionMaskError(f"env.action_mask info:{self.name}: info has no such key")
            mask = info[self.name]
        else:
            mask = self.env.get_wrapper_attr(self.name)()
        mask = np.asarray(mask).reshape(-1)
        if mask.size != self.size:
            raise ActionMaskError(
                f"env.action_mask {self.kind}:{self.name} gave {mask.size} entries; the action "
                f"space needs {self.size}"
            )
        return obs, {**info, ACTION_MASK_INFO: mask.astype(bool)}

    def reset(self, **kwargs: Any) -> Any:
        obs, info = self.env.reset(**kwargs)
        return self._with_mask(obs, info)

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        obs, info = self._with_mask(obs, info)
        return obs, reward, terminated, truncated, info


def vector_masks(info: dict[str, Any], num_envs: int, space: gym.Space) -> np.ndarray | None:
    """The ``[E, n]`` masks a vector env's ``info`` holds, or None when it holds none."""
    if ACTION_MASK_INFO not in info:
        return None
    masks = np.asarray(info[ACTION_MASK_INFO], dtype=bool).reshape(num_envs, -1)
    return masks
