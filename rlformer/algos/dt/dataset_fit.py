"""Can a Decision Transformer act in an env, and does a dataset fit that env?

Data from a task with other observation or action sizes (Hopper data with ``env.id`` set to
Walker2d, say) would otherwise fail deep inside numpy with a broadcasting error, or, for a
discrete task, train on action indices the env does not have. The sizes are all that can be
checked: data from another task with the same sizes (Hopper-v4 against Hopper-v5) is allowed.
Observations of Dict / Tuple spaces are checked leaf by leaf (the keys, each leaf's shape, a
discrete leaf's values), and a mismatch is one line naming the leaf.
"""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import numpy as np

from rlformer.data.episodes import Dataset
from rlformer.data.errors import DatasetError
from rlformer.networks.dt_spaces import reads_flat
from rlformer.networks.spaces import (
    SpaceError,
    check_action_space,
    check_observation_space,
    image_layout,
    is_composite,
    leaf_spaces,
)


def dt_space_problem(observation_space: gym.Space, action_space: gym.Space) -> str | None:
    """Why a DT cannot take these spaces, with the fix; None when it can.

    A DT takes what PPO's encoders and distributions take: any Box, Discrete, MultiDiscrete or
    MultiBinary observation leaf (in Dict / Tuple spaces too) and one Box, Discrete,
    MultiDiscrete or MultiBinary action.
    """
    problems = []
    for check, space in (
        (check_observation_space, observation_space),
        (check_action_space, action_space),
    ):
        try:
            check(space)
        except SpaceError as err:
            problems.append(str(err))
    return "; ".join(problems) or None


def _sizes(observations: int, actions: str) -> str:
    return f"{observations}-value observations and {actions}"


def check_dataset_fits(
    dataset: Dataset, observation_space: gym.Space, action_space: gym.Space, env_id: str
) -> None:
    """Raise :class:`DatasetError` naming both sizes (or the leaf that differs) if ``dataset``
    was not recorded on a task shaped like ``env_id``'s spaces."""
    first = dataset.episodes[0]  # the loaders give every episode the same shapes
    if reads_flat(observation_space) and not isinstance(first.observations, dict):
        data_obs = int(np.prod(first.observations.shape[1:]))
        env_obs = int(np.prod(observation_space.shape))
        found = _action_problem(dataset, action_space, (data_obs, env_obs))
    else:
        found = _leaf_problem(dataset, observation_space) or _action_problem(
            dataset, action_space, None
        )
    if found is None:
        return
    problem, env_sizes = found
    if dataset.env_id:
        recorded = f", recorded on {dataset.recorded_env},"
        fix = f"build the env the data was recorded on ({_env_settings(dataset)})"
    else:
        recorded, fix = "", "set env.id (and env.kwargs) to the env the data was recorded on"
    raise DatasetError(
        f"{dataset.source}{recorded} has {problem}, but {env_id} has {env_sizes}; {fix}, "
        f"or record data on this env with `rlformer collect --env {env_id} --out FILE`"
    )


def _action_problem(
    dataset: Dataset, space: gym.Space, observations: tuple[int, int] | None
) -> tuple[str, str] | None:
    """(what the data has, what the env has) when the actions (or, for flat observations, the
    ``(data, env)`` observation sizes) differ; None when they fit."""
    episodes = [e for e in dataset.episodes if len(e)]
    actions = [np.asarray(e.actions) for e in episodes]
    data_act = int(np.prod(actions[0].shape[1:]))
    obs_differ = observations is not None and observations[0] != observations[1]

    def phrase(side: int, text: str) -> str:
        return text if observations is None else _sizes(observations[side], text)

    shape = phrase(0, f"{data_act}-value actions")
    integral = all(np.array_equal(a, np.round(a)) for a in actions)
    if isinstance(space, gym.spaces.Discrete):
        start, n = int(space.start), int(space.n)
        named = f"{n} discrete actions" + (f" numbered from {start}" if start else "")
        if obs_differ or data_act != 1 or not integral:
            return shape, phrase(1, named)
        low, high = _range(actions)
        if low < start or high >= start + n:
            return phrase(0, f"action indices {low:g}..{high:g}"), phrase(1, named)
        return None
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = [int(n) for n in np.asarray(space.nvec).reshape(-1)]
        starts = np.asarray(space.start).reshape(-1)
        named = f"MultiDiscrete actions of {len(nvec)} components {nvec}"
        if obs_differ or data_act != len(nvec) or not integral:
            return shape, phrase(1, named)
        flat = np.concatenate([a.reshape(len(a), -1) for a in actions])
        for k, (n, start) in enumerate(zip(nvec, starts, strict=True)):
            low, high = float(flat[:, k].min()), float(flat[:, k].max())
            if low < start or high >= start + n:
                return (
                    phrase(0, f"action component {k} values {low:g}..{high:g}"),
                    phrase(1, f"{n} choices from {start} in action component {k}"),
                )
        return None
    if isinstance(space, gym.spaces.MultiBinary):
        size = int(np.prod(space.shape))
        named = f"{size} binary actions"
        if obs_differ or data_act != size:
            return shape, phrase(1, named)
        if not all(np.isin(a, (0, 1)).all() for a in actions):
            low, high = _range(actions)
            return phrase(0, f"action values {low:g}..{high:g}"), phrase(1, f"{named} (0 or 1)")
        return None
    env_act = int(np.prod(space.shape))
    if obs_differ or data_act != env_act:
        return shape, phrase(1, f"{env_act}-value actions")
    return None


def _range(arrays: list[np.ndarray]) -> tuple[float, float]:
    return min(float(a.min()) for a in arrays), max(float(a.max()) for a in arrays)


def _leaf_problem(dataset: Dataset, space: gym.Space) -> tuple[str, str] | None:
    """(what the data has, what the env has) for the first observation leaf that differs."""
    leaves = leaf_spaces(space)
    observations = [e.observations for e in dataset.episodes if len(e)]
    first = observations[0]
    data_keys = list(first) if isinstance(first, dict) else [""]
    if is_composite(space) != isinstance(first, dict):
        return _keys(data_keys, first), _keys(list(leaves), None, leaves)
    for path in data_keys:
        if path not in leaves:
            return f"observation {path!r}", f"no observation {path!r} (keys: {', '.join(leaves)})"
    for path, leaf in leaves.items():
        if path not in data_keys:
            return f"no observation {path!r}", f"observation {path!r} ({leaf})"
        values = [o[path] if isinstance(o, dict) else o for o in observations]
        found = _leaf_values_problem(path, leaf, values)
        if found is not None:
            return found
    return None


def _keys(keys: list[str], data: object, leaves: dict[str, gym.Space] | None = None) -> str:
    if keys == [""]:
        shape = leaves[""].shape if leaves is not None else np.asarray(data).shape[1:]
        return f"one observation array of shape {tuple(shape)}"
    return f"observation keys {', '.join(repr(k) for k in keys)}"


def _leaf_values_problem(
    path: str, leaf: gym.Space, values: list[np.ndarray]
) -> tuple[str, str] | None:
    """Shape (size, for vectors) and value range of one leaf's data against its space."""
    name = f"observation {path!r}" if path else "observations"
    data_shape = tuple(values[0].shape[1:])
    vector = isinstance(leaf, gym.spaces.Box) and image_layout(leaf) is None
    if vector:
        data_size, env_size = int(np.prod(data_shape)), int(np.prod(leaf.shape))
        if data_size != env_size:
            return f"{name} of {data_size} values", f"{env_size} values there"
        return None
    if data_shape != tuple(leaf.shape):
        return f"{name} of shape {data_shape}", f"shape {tuple(leaf.shape)} there"
    if isinstance(leaf, gym.spaces.Discrete | gym.spaces.MultiDiscrete | gym.spaces.MultiBinary):
        low_end = np.asarray(getattr(leaf, "start", 0))
        high_end = low_end + np.asarray(getattr(leaf, "nvec", getattr(leaf, "n", 2)))
        if isinstance(leaf, gym.spaces.MultiBinary):
            low_end, high_end = np.zeros(leaf.shape, np.int64), np.full(leaf.shape, 2)
        outside = any(((v < low_end) | (v >= high_end)).any() for v in values)
        integral = all(np.array_equal(v, np.round(v)) for v in values)
        if outside or not integral:
            low, high = _range(values)
            return f"{name} values {low:g}..{high:g}", f"{leaf} there"
    return None


def _env_settings(dataset: Dataset) -> str:
    """The ``--set`` options that build the env ``dataset`` names, kwargs included."""
    options = [f"--set env.id={dataset.env_id}"]
    for key, value in dataset.env_kwargs.items():
        options.append(f"--set env.kwargs.{key}={_yaml_scalar(value)}")
    return " ".join(options)


def _yaml_scalar(value: Any) -> str:
    """How ``--set`` (which parses YAML) reads ``value`` back."""
    return value if isinstance(value, str) else json.dumps(value)
