"""A PettingZoo Parallel task as rlformer sees it: the env factory, the agents' policy groups,
and each group's observation as its network reads it.

Agents of a group share one network, so they must share their spaces; each is one row of the
group's batch (``rows = envs x agents``), with its own memory. A group's observation is the
agent's own (flat) or, when the run adds inputs, a Dict: ``obs`` (the agent's), ``agent_id``
(its one-hot index in the group) and ``state`` (a centralised critic's input, which the actor
never reads: :class:`~rlformer.networks.actor_critic.CriticView`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from rlformer.algos.mappo.config import MAPPOConfig
from rlformer.networks.actor_critic import CriticView
from rlformer.networks.spaces import leaf_spaces
from rlformer.rollout.env_factory import EnvError, resolve_object

_NUMBERED = re.compile(r"^(.*?)_\d+$")


def make_parallel_env(cfg: MAPPOConfig) -> Any:
    """The Parallel env ``mappo.env`` builds, or an :class:`EnvError` in one line: a factory
    that cannot be imported or called, an AEC env, or something else than a Parallel env."""
    what = f"mappo.env {cfg.env!r}"
    factory = resolve_object(cfg.env, what)
    if not callable(factory):
        raise EnvError(f"{what} is not callable; name the task's parallel_env function")
    try:
        env = factory(**cfg.env_kwargs)
    except Exception as err:
        first = (str(err).strip().splitlines() or [""])[0]
        raise EnvError(
            f"{what} failed with {type(err).__name__}: {first} (mappo.env_kwargs {cfg.env_kwargs})"
        ) from None
    from pettingzoo.utils.env import AECEnv

    if isinstance(env, AECEnv):
        raise EnvError(
            f"{what} built an AEC env; mappo steps all agents at once: name the task's "
            "parallel_env, or wrap it with pettingzoo.utils.conversions.aec_to_parallel"
        )
    if not all(hasattr(env, name) for name in ("possible_agents", "reset", "step")):
        raise EnvError(
            f"{what} built a {type(env).__name__}, not a PettingZoo Parallel env "
            "(possible_agents, reset, step)"
        )
    return env


def default_group(agent: str) -> str:
    """An agent's group when ``mappo.groups`` is empty: its name without a trailing _<n>."""
    match = _NUMBERED.match(agent)
    return match.group(1) if match else agent


def has_state(env: Any) -> bool:
    """Whether the env gives a global state (PettingZoo's ``state()`` with a ``state_space``)."""
    return getattr(env, "state_space", None) is not None


@dataclass(frozen=True)
class Group:
    """One policy group: its agents (rows per env, in this order) and the spaces its network
    reads and acts in."""

    name: str
    agents: tuple[str, ...]
    agent_space: gym.Space  # one agent's own observation space
    observation_space: gym.Space  # what the network reads (see the module docstring)
    action_space: gym.Space
    critic_view: CriticView | None

    @property
    def size(self) -> int:
        return len(self.agents)


@dataclass(frozen=True)
class Team:
    """The task's agents in groups, and where the central critic's input comes from."""

    groups: tuple[Group, ...]
    agents: tuple[str, ...]  # the env's possible agents, in its order
    critic_input: str | None  # "state", "observations", or None (independent critics)
    state_size: int
    # Each agent's observation space as its network reads it (an obs:KEY mask taken out).
    agent_spaces: dict[str, gym.Space]
    action_mask: tuple[str, str] | None = None  # ("obs" | "info", KEY) with mappo.action_mask

    def group(self, name: str) -> Group:
        return next(g for g in self.groups if g.name == name)


def build_team(cfg: MAPPOConfig, env: Any) -> Team:
    """Groups, spaces and critic input for ``env``; one-line :class:`EnvError` s for agents
    that ``mappo.groups`` names wrongly or that share a group with other spaces."""
    agents = tuple(env.possible_agents)
    if not agents:
        raise EnvError(f"mappo.env {cfg.env!r} has no possible_agents")
    members = _group_members(cfg, agents)
    critic_input = _critic_input(cfg, env)
    mask = mask_source(cfg.action_mask)
    spaces = {a: agent_space(env, a, mask) for a in agents}
    state_size = 0
    if critic_input == "state":
        state_size = int(gym.spaces.flatdim(env.state_space))
    elif critic_input == "observations":
        state_size = sum(int(gym.spaces.flatdim(spaces[a])) for a in agents)
    groups = []
    for name, names in members.items():
        obs_space, act_space = _shared_spaces(env, name, names, spaces)
        if mask is not None:
            _check_maskable(name, act_space)
        groups.append(_group(name, tuple(names), obs_space, act_space, cfg.agent_id, state_size))
    return Team(tuple(groups), agents, critic_input, state_size, spaces, mask)


def mask_source(spec: str | None) -> tuple[str, str] | None:
    """``mappo.action_mask`` as (source, key), or None."""
    if spec is None:
        return None
    kind, _, key = spec.partition(":")
    return kind, key


def agent_space(env: Any, agent: str, mask: tuple[str, str] | None) -> gym.Space:
    """``agent``'s observation space as its network reads it: without the mask's key when the
    mask comes from the observation (a one-line :class:`EnvError` when it has no such key)."""
    space = env.observation_space(agent)
    if mask is None or mask[0] != "obs":
        return space
    if not isinstance(space, gym.spaces.Dict) or mask[1] not in space.spaces:
        raise EnvError(
            f"mappo.action_mask obs:{mask[1]}: agent {agent!r}'s observations have no key "
            f"{mask[1]!r} (a Dict observation with it is needed; its space: {space})"
        )
    return gym.spaces.Dict({k: v for k, v in space.spaces.items() if k != mask[1]})


def _check_maskable(group: str, space: gym.Space) -> None:
    if not isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
        raise EnvError(
            f"mappo.action_mask: group {group!r} acts in {type(space).__name__}; masks apply "
            "to Discrete and MultiDiscrete actions"
        )


def _group_members(cfg: MAPPOConfig, agents: tuple[str, ...]) -> dict[str, list[str]]:
    if not cfg.groups:
        members: dict[str, list[str]] = {}
        for agent in agents:
            members.setdefault(default_group(agent), []).append(agent)
        return members
    seen: dict[str, str] = {}
    for group, names in cfg.groups.items():
        for agent in names:
            if agent not in agents:
                raise EnvError(
                    f"mappo.groups.{group} names agent {agent!r}, which the env does not have "
                    f"(its agents: {', '.join(agents)})"
                )
            if agent in seen:
                raise EnvError(f"mappo.groups: agent {agent!r} is in {seen[agent]} and {group}")
            seen[agent] = group
    missing = [a for a in agents if a not in seen]
    if missing:
        raise EnvError(f"mappo.groups puts agents {', '.join(missing)} in no group")
    return {group: list(names) for group, names in cfg.groups.items() if names}


def _shared_spaces(
    env: Any, group: str, names: list[str], spaces: dict[str, gym.Space]
) -> tuple[gym.Space, gym.Space]:
    first = names[0]
    obs_space, act_space = spaces[first], env.action_space(first)
    for agent in names[1:]:
        for kind, mine, theirs in (
            ("observation", spaces[agent], obs_space),
            ("action", env.action_space(agent), act_space),
        ):
            if mine != theirs:
                raise EnvError(
                    f"group {group!r} shares one network, but agent {agent!r}'s {kind} space "
                    f"{mine} differs from {first!r}'s {theirs}; put them in different groups "
                    "with mappo.groups"
                )
    return obs_space, act_space


def _critic_input(cfg: MAPPOConfig, env: Any) -> str | None:
    if cfg.critic == "independent":
        return None
    if cfg.critic_input == "state" and not has_state(env):
        raise EnvError(
            f"mappo.critic_input=state, but mappo.env {cfg.env!r} has no state_space; set "
            "mappo.critic_input=observations (every agent's observation) or auto"
        )
    if cfg.critic_input == "auto":
        return "state" if has_state(env) else "observations"
    return cfg.critic_input


def _group(
    name: str,
    agents: tuple[str, ...],
    agent_space: gym.Space,
    action_space: gym.Space,
    agent_id: bool,
    state_size: int,
) -> Group:
    parts: dict[str, gym.Space] = {}
    if agent_id:
        parts["agent_id"] = gym.spaces.MultiBinary(len(agents))
    if state_size:
        parts["state"] = gym.spaces.Box(-np.inf, np.inf, (state_size,), np.float32)
    if not parts:
        return Group(name, agents, agent_space, agent_space, action_space, None)
    space = gym.spaces.Dict({"obs": agent_space, **parts})
    view = None
    if state_size:
        paths = list(leaf_spaces(space))
        view = CriticView(
            actor=tuple(p for p in paths if p != "state"),
            critic=tuple(p for p in paths if p in ("state", "agent_id")),
        )
    return Group(name, agents, agent_space, space, action_space, view)


def presence(g: Group, envs: list[Any]) -> np.ndarray:
    """Which of the group's rows (env-major) have their agent in its env now."""
    return np.array([agent in env.agents for env in envs for agent in g.agents], dtype=bool)


def flat_state(team: Team, env: Any, observations: dict[str, Any]) -> np.ndarray:
    """The central critic's input in one env: its state, or every agent's observation
    flattened in the env's agent order (zeros for agents absent now)."""
    if team.critic_input == "state":
        return np.asarray(env.state(), dtype=np.float32).reshape(-1)
    parts = []
    for agent in team.agents:
        space = team.agent_spaces[agent]
        if agent in observations:
            parts.append(np.asarray(gym.spaces.flatten(space, observations[agent]), np.float32))
        else:
            parts.append(np.zeros(gym.spaces.flatdim(space), np.float32))
    return np.concatenate(parts)
