"""A team's observations as its groups' networks read them: one row per agent (env-major),
the agent's own observation with its one-hot index and the central critic's input where the
run adds them (see team.py), zeros for absent agents."""

from __future__ import annotations

from typing import Any, cast

import gymnasium as gym
import numpy as np

from rlformer.algos.mappo.team import Group, Team, flat_state
from rlformer.networks.spaces import Tree, flatten_obs, tree_stack


def row_observation(g: Group, agent_index: int, agent_obs: Any, state: np.ndarray | None) -> Tree:
    """One row's observation as the group's network reads it (see team.py)."""
    if g.observation_space is g.agent_space:
        return flatten_obs(g.agent_space, agent_obs)
    value: dict[str, Any] = {"obs": agent_obs}
    if "agent_id" in cast(gym.spaces.Dict, g.observation_space).spaces:
        value["agent_id"] = np.eye(g.size, dtype=np.int8)[agent_index]
    if state is not None:
        value["state"] = state
    return flatten_obs(g.observation_space, value)


def critic_states(
    team: Team,
    envs: list[Any],
    observations: list[dict[str, Any]],
    where: list[bool] | None = None,
) -> list[np.ndarray | None]:
    """Each env's central-critic input (None for independent critics, and for the envs that
    ``where`` leaves out: an env's ``state()`` is read only where it is used, because it can
    cost as much as the observations and some envs cannot give it once an agent has fallen)."""
    keep = where if where is not None else [True] * len(envs)
    if team.critic_input is None:
        return [None] * len(envs)
    return [
        flat_state(team, env, obs) if k else None
        for env, obs, k in zip(envs, observations, keep, strict=True)
    ]


def group_observations(
    team: Team,
    g: Group,
    envs: list[Any],
    observations: list[dict[str, Any]],
    states: list[np.ndarray | None] | None = None,
) -> Tree:
    """Every row of group ``g`` (env-major; zeros for absent agents), batch first; ``states``:
    the envs' central-critic inputs when the caller has them already."""
    rows = []
    if states is None:
        states = critic_states(team, envs, observations)
    for e in range(len(envs)):
        for k, agent in enumerate(g.agents):
            agent_obs = observations[e].get(agent)
            if agent_obs is None:
                agent_obs = _zeros(g.agent_space)
            rows.append(row_observation(g, k, agent_obs, states[e]))
    return tree_stack(rows)


def _zeros(space: gym.Space) -> Any:
    """An all-zero value of ``space`` (the observation of an absent agent)."""
    if isinstance(space, gym.spaces.Dict):
        return {key: _zeros(sub) for key, sub in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_zeros(sub) for sub in space.spaces)
    if isinstance(space, gym.spaces.Discrete):
        return int(space.start)
    return np.zeros(space.shape, dtype=space.dtype)
