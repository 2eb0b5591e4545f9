"""Observation and action spaces: which ones rlformer encodes, and observation trees.

An observation of a flat space (Box, Discrete, MultiDiscrete, MultiBinary) is one array. An
observation of a (possibly nested) Dict or Tuple space is stored as a *tree*: a flat ``dict``
from leaf path to array, e.g. ``{"image": [...], "direction": [...]}`` or ``{"0": ..., "1/0":
...}`` (Dict keys and Tuple indices joined by ``/``). Trees keep every leaf's own dtype (uint8
images stay uint8 in rollout storage) and support the same batch operations as arrays through
:func:`tree_map` and :func:`tree_stack`, so fragments and learners never branch on the space.

Example:
    >>> space = gym.spaces.Dict({"pos": gym.spaces.Discrete(3), "v": gym.spaces.Box(-1, 1, (2,))})
    >>> list(leaf_spaces(space))
    ['pos', 'v']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

# An array (flat spaces) or a dict from leaf path to array (Dict / Tuple spaces).
Tree = Any

_FLAT = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


class SpaceError(ValueError):
    """A space rlformer cannot encode; the message names the leaf and the fix."""


def is_composite(space: gym.Space) -> bool:
    return isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple))


def leaf_spaces(space: gym.Space, prefix: str = "") -> dict[str, gym.Space]:
    """Leaves of a (nested) Dict/Tuple space by path; a flat space is the one leaf ``""``."""
    if isinstance(space, gym.spaces.Dict):
        items: list[tuple[str, gym.Space]] = list(space.spaces.items())
    elif isinstance(space, gym.spaces.Tuple):
        items = [(str(i), s) for i, s in enumerate(space.spaces)]
    else:
        return {prefix: space}
    leaves: dict[str, gym.Space] = {}
    for key, sub in items:
        leaves.update(leaf_spaces(sub, f"{prefix}/{key}" if prefix else str(key)))
    return leaves


def is_bool_box(space: gym.Space) -> bool:
    """A Box of booleans (MinAtar's grids, binary feature vectors): read as 0/1 floats."""
    return isinstance(space, gym.spaces.Box) and space.dtype == np.bool_


def image_layout(space: gym.Space) -> str | None:
    """``"hwc"`` / ``"chw"`` for an image Box, else None.

    uint8 images have 1, 3 or 4 channels. A 3-D bool Box is an image of binary planes with any
    number of them (MinAtar: 4 to 10 object channels on a 10x10 grid), channels last as in
    Gymnasium unless the first axis is the shorter one.
    """
    if not (isinstance(space, gym.spaces.Box) and len(space.shape) == 3):
        return None
    if is_bool_box(space):
        return "chw" if space.shape[0] < space.shape[-1] else "hwc"
    if space.dtype != np.uint8:
        return None
    if space.shape[-1] in (1, 3, 4):
        return "hwc"
    if space.shape[0] in (1, 3, 4):
        return "chw"
    return None


def check_observation_space(space: gym.Space) -> None:
    """Raise :class:`SpaceError` (one line, with the fix) when a leaf cannot be encoded."""
    for path, leaf in leaf_spaces(space).items():
        if isinstance(leaf, _FLAT):
            numeric = np.issubdtype(leaf.dtype, np.number) or is_bool_box(leaf)
            if isinstance(leaf, gym.spaces.Box) and not numeric:
                raise SpaceError(f"observation {_where(path)}is a non-numeric Box ({leaf.dtype})")
            continue
        where = _where(path)
        fix = (
            "remove it with a wrapper in env.wrappers, e.g. "
            "{class: gymnasium.wrappers:FilterObservation, kwargs: {filter_keys: [...]}} "
            "keeping the other keys"
            if path
            else "turn it into a Box/Discrete/MultiDiscrete/MultiBinary (or a Dict/Tuple of "
            "those) with a wrapper in env.wrappers"
        )
        hint = (
            " (for MiniGrid: minigrid.wrappers:ImgObsWrapper keeps only the image; "
            "preset: minigrid sets it with the encoder settings a MiniGrid grid needs)"
            if path == "mission"
            else ""
        )
        raise SpaceError(
            f"observation {where}is a {type(leaf).__name__} space, which rlformer cannot "
            f"encode: {fix}{hint}"
        )


def check_action_space(space: gym.Space) -> None:
    """Raise :class:`SpaceError` unless actions are Discrete, Box, MultiDiscrete or MultiBinary."""
    if isinstance(space, _FLAT):
        if isinstance(space, gym.spaces.MultiDiscrete) and np.asarray(space.nvec).ndim != 1:
            raise SpaceError(
                f"action space {space} is a multi-dimensional MultiDiscrete; flatten it to one "
                "dimension with an action wrapper in env.wrappers"
            )
        return
    raise SpaceError(
        f"action space {type(space).__name__} is not supported (use Discrete, Box, "
        "MultiDiscrete or MultiBinary; wrap composite actions into one of those in env.wrappers)"
    )


def _where(path: str) -> str:
    return f"key {path!r} " if path else ""


# ---------------------------------------------------------------- trees
def flatten_obs(space: gym.Space, obs: Any) -> Tree:
    """Gymnasium's nested observation (single or batched) -> an array or a flat leaf dict."""
    if not is_composite(space):
        return np.asarray(obs)
    out: dict[str, np.ndarray] = {}

    def walk(sub: gym.Space, value: Any, prefix: str) -> None:
        if isinstance(sub, gym.spaces.Dict):
            for key, child in sub.spaces.items():
                walk(child, value[key], f"{prefix}/{key}" if prefix else str(key))
        elif isinstance(sub, gym.spaces.Tuple):
            for i, child in enumerate(sub.spaces):
                walk(child, value[i], f"{prefix}/{i}" if prefix else str(i))
        else:
            out[prefix] = np.asarray(value)

    walk(space, obs, "")
    return out


def tree_map(fn: Callable[[Any], Any], tree: Tree) -> Tree:
    """Apply ``fn`` to every leaf array (or to the array itself)."""
    if isinstance(tree, dict):
        return {key: fn(value) for key, value in tree.items()}
    return fn(tree)


def tree_stack(trees: list[Tree], fn: Callable[[list[Any]], Any] = np.stack) -> Tree:
    """Combine equally shaped trees leaf by leaf (``np.stack`` by default)."""
    if isinstance(trees[0], dict):
        return {key: fn([t[key] for t in trees]) for key in trees[0]}
    return fn(trees)


def tree_set(tree: Tree, index: Any, value: Tree) -> None:
    """``tree[index] = value`` for every leaf (in place)."""
    if isinstance(tree, dict):
        for key in tree:
            tree[key][index] = value[key]
    else:
        tree[index] = value


def tree_first(tree: Tree) -> Any:
    """Any one leaf (for batch sizes)."""
    return next(iter(tree.values())) if isinstance(tree, dict) else tree
