"""Can a Decision Transformer act in an env, and does a dataset fit that env?

Data from a task with other observation or action sizes (Hopper data with ``env.id`` set to
Walker2d, say) would otherwise fail deep inside numpy with a broadcasting error, or, for a
discrete task, train on action indices the env does not have. The sizes are all that can be
checked: data from another task with the same sizes (Hopper-v4 against Hopper-v5) is allowed.
"""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import numpy as np

from rlformer.data.episodes import Dataset
from rlformer.data.errors import DatasetError


def dt_space_problem(observation_space: gym.Space, action_space: gym.Space) -> str | None:
    """Why a DT cannot take these spaces, with the fix; None when it can.

    A DT's state token is one flat vector and its action head predicts one Discrete or Box
    action (the D4RL layout stores them that way too); PPO's encoders take any space.
    """
    problems = []
    if not isinstance(observation_space, gym.spaces.Box | gym.spaces.Discrete):
        problems.append(
            f"{type(observation_space).__name__} observations (a DT takes Box or Discrete ones: "
            "flatten them with env.wrappers, e.g. gymnasium.wrappers:FlattenObservation, or a "
            "family preset such as preset: minigrid)"
        )
    if not isinstance(action_space, gym.spaces.Box | gym.spaces.Discrete):
        problems.append(
            f"{type(action_space).__name__} actions (a DT predicts one Box or Discrete action; "
            "algo ppo takes any action space)"
        )
    elif isinstance(action_space, gym.spaces.Discrete) and action_space.start != 0:
        problems.append(
            f"Discrete actions numbered from {action_space.start} (a DT predicts indices from "
            "0; renumber them with an action wrapper, or use algo ppo)"
        )
    return "; ".join(problems) or None


def _sizes(observations: int, actions: str) -> str:
    return f"{observations}-value observations and {actions}"


def check_dataset_fits(
    dataset: Dataset, observation_space: gym.Space, action_space: gym.Space, env_id: str
) -> None:
    """Raise :class:`DatasetError` naming both sizes if ``dataset`` was not recorded on a task
    shaped like ``env_id``'s spaces."""
    first = dataset.episodes[0]  # the loaders give every episode the same shapes
    data_obs = int(np.prod(first.observations.shape[1:]))
    data_act = int(np.prod(first.actions.shape[1:]))
    env_obs = int(np.prod(observation_space.shape))
    problem = None
    if isinstance(action_space, gym.spaces.Discrete):
        env_sizes = _sizes(env_obs, f"{action_space.n} discrete actions")
        integral = all(np.array_equal(e.actions, np.round(e.actions)) for e in dataset.episodes)
        low = min(float(e.actions.min()) for e in dataset.episodes if len(e))
        high = max(float(e.actions.max()) for e in dataset.episodes if len(e))
        if data_obs != env_obs or data_act != 1 or not integral:
            problem = _sizes(data_obs, f"{data_act}-value actions")
        elif low < 0 or high >= action_space.n:
            problem = _sizes(data_obs, f"action indices {low:g}..{high:g}")
    else:
        env_act = int(np.prod(action_space.shape))
        env_sizes = _sizes(env_obs, f"{env_act}-value actions")
        if data_obs != env_obs or data_act != env_act:
            problem = _sizes(data_obs, f"{data_act}-value actions")
    if problem is None:
        return
    if dataset.env_id:
        recorded = f", recorded on {dataset.recorded_env},"
        fix = f"build the env the data was recorded on ({_env_settings(dataset)})"
    else:
        recorded, fix = "", "set env.id (and env.kwargs) to the env the data was recorded on"
    raise DatasetError(
        f"{dataset.source}{recorded} has {problem}, but {env_id} has {env_sizes}; {fix}, "
        f"or record data on this env with `rlformer collect --env {env_id} --out FILE`"
    )


def _env_settings(dataset: Dataset) -> str:
    """The ``--set`` options that build the env ``dataset`` names, kwargs included."""
    options = [f"--set env.id={dataset.env_id}"]
    for key, value in dataset.env_kwargs.items():
        options.append(f"--set env.kwargs.{key}={_yaml_scalar(value)}")
    return " ".join(options)


def _yaml_scalar(value: Any) -> str:
    """How ``--set`` (which parses YAML) reads ``value`` back."""
    return value if isinstance(value, str) else json.dumps(value)
