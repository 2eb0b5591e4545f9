"""A team behind ``rlformer serve``: one session per episode, holding every agent's memory.

``POST /v1/sessions/ID/act`` takes one env step of the whole team,
``{"observations": {agent: obs, ...}, "rewards": {agent: r, ...} | null, "episode_start": bool,
"deterministic": bool, "action_masks": {agent: [bool, ...], ...} | null}``, and answers
``{"actions": {agent: action, ...}}``, one action per agent it was given. An agent's mask
(Discrete and MultiDiscrete actions) rules out the actions it marks false, as
``mappo.action_mask`` does in training; its observation is sent without the mask.

Why one session per episode rather than one per agent:

- a PettingZoo Parallel env steps every agent at once, so its client holds every agent's
  observation at each step and needs every action back: one round trip per env step, not one
  per agent;
- the server applies training's rules for agents that come and go, so a client cannot get them
  wrong: the agents named in ``observations`` are the ones acting now (the env's ``agents``);
  an agent missing from a step is absent, and when it comes back its memory restarts, as the
  rollout worker restarts a row that rejoins;
- an episode's memories live on one replica, so a lost replica ends the episode (410) rather
  than leaving half a team with memory and half without.

``rewards`` are each agent's reward for its previous action (what ``env.step`` returned), read
by models with the previous-reward input. A centralised critic's input is never asked for: the
actor does not read it (:class:`~rlformer.networks.actor_critic.CriticView`).

Agents of one group, from every session in a batch, share one forward pass of the group's
network (:mod:`rlformer.serve.batched_steps` does the same for single agents).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from rlformer.algos.mappo.team import Group, Team
from rlformer.policies.base import Policy
from rlformer.rollout.action_masks import mask_size
from rlformer.serve.batched_steps import Result, RowOps, row_ops, session_rounds
from rlformer.serve.messages import (
    RequestError,
    concat,
    decode,
    decode_mask,
    decode_reward,
    encode_row,
    jsonable,
)
from rlformer.serve.sessions import SessionStore

_KEYS = {"observations", "rewards", "episode_start", "deterministic", "action_masks"}


@dataclass
class TeamRequest:
    """One session's team step, decoded and checked."""

    session_id: str
    observations: dict[str, Any]  # agent -> its observation, leading dimension 1
    rewards: dict[str, float] = field(default_factory=dict)
    episode_start: bool = False
    deterministic: bool = True
    action_masks: dict[str, np.ndarray] = field(default_factory=dict)  # agent -> [n] bool


@dataclass
class TeamSession:
    """A session's memories: one one-row policy state per agent present at its last step."""

    states: dict[str, Any]


class TeamSteps:
    """Parses team steps and runs batches of them, one forward pass per group.

    Args:
        team: The task's groups and spaces.
        policies: Each group's policy (a checkpoint's actor-critic or an exported graph).
        name: What is served (a run directory or export), for ``GET /v1/policy``.
        task: The task's env factory (``mappo.env``).
    """

    def __init__(self, team: Team, policies: dict[str, Policy], name: str, task: str) -> None:
        self.team, self.policies, self.name, self.task = team, policies, name, task
        self.ops: dict[str, RowOps] = {g: row_ops(p) for g, p in policies.items()}
        self.place = {agent: (g, k) for g in team.groups for k, agent in enumerate(g.agents)}

    # ------------------------------------------------------------ requests
    def parse(self, session_id: str | None, body: Any) -> TeamRequest:
        if session_id is None:
            raise RequestError(500, "a team is served with sessions only")
        if not isinstance(body, dict):
            raise RequestError(400, "the body must be a JSON object")
        unknown = sorted(set(body) - _KEYS)
        if unknown:
            raise RequestError(400, f"unknown fields {unknown} (known: {sorted(_KEYS)})")
        flags = {"episode_start": False, "deterministic": True}
        for key, default in flags.items():
            value = body.get(key, default)
            if not isinstance(value, bool):
                raise RequestError(400, f"{key}: expected true or false")
            flags[key] = value
        observations = self._agents_object(body.get("observations"), "observations")
        if not observations:
            raise RequestError(400, "observations: name at least one agent")
        decoded = {
            agent: decode(self.place[agent][0].agent_space, value, f"observations.{agent}")
            for agent, value in observations.items()
        }
        rewards = {}
        if body.get("rewards") is not None:
            for agent, value in self._agents_object(body["rewards"], "rewards").items():
                reward = decode_reward(value)
                if reward is not None:
                    rewards[agent] = reward
        masks = {}
        if body.get("action_masks") is not None:
            for agent, value in self._agents_object(body["action_masks"], "action_masks").items():
                space = self.place[agent][0].action_space
                mask = decode_mask(space, value, f"action_masks.{agent}")
                if mask is not None:
                    masks[agent] = mask
        return TeamRequest(
            session_id, decoded, rewards, flags["episode_start"], flags["deterministic"], masks
        )

    def _agents_object(self, value: Any, where: str) -> dict[str, Any]:
        """``value`` as ``{agent: ...}`` over this team's agents (400 otherwise)."""
        if not isinstance(value, dict):
            raise RequestError(400, f"{where}: expected an object of agent name -> value")
        unknown = sorted(set(value) - set(self.place))
        if unknown:
            raise RequestError(
                400, f"{where}: unknown agents {unknown} (this team's: {list(self.team.agents)})"
            )
        return value

    # ------------------------------------------------------------ batches
    def step(
        self, requests: list[Any], store: SessionStore, on_batch: Callable[[int], None]
    ) -> list[Result]:
        """Every request's answer; each session appears once per round, in arrival order."""
        results: list[Result] = [{} for _ in requests]
        for round_ in session_rounds(requests):
            for deterministic in (True, False):
                chosen = [i for i in round_ if requests[i].deterministic == deterministic]
                if chosen:
                    self._step_round(requests, chosen, store, results, on_batch)
        return results

    def _step_round(
        self,
        requests: list[TeamRequest],
        chosen: list[int],
        store: SessionStore,
        results: list[Result],
        on_batch: Callable[[int], None],
    ) -> None:
        before: dict[int, dict[str, Any]] = {}
        for i in chosen:
            request = requests[i]
            try:
                held = {} if request.episode_start else store.get(request.session_id).states
            except RequestError as err:
                results[i] = err.payload()
                continue
            before[i] = held
        actions: dict[int, dict[str, Any]] = {i: {} for i in before}
        after: dict[int, dict[str, Any]] = {i: {} for i in before}
        for g in self.team.groups:
            rows = [(i, a) for i in before for a in requests[i].observations if a in g.agents]
            rows = [(i, a) for i, a in rows if i in actions]  # not failed in an earlier group
            if rows:
                self._act_group(g, requests, rows, before, actions, after, results, on_batch)
        for i in actions:
            store.put(requests[i].session_id, TeamSession(after[i]))
            results[i] = {"actions": actions[i]}

    def _act_group(
        self,
        g: Group,
        requests: list[TeamRequest],
        rows: list[tuple[int, str]],
        before: dict[int, dict[str, Any]],
        actions: dict[int, dict[str, Any]],
        after: dict[int, dict[str, Any]],
        results: list[Result],
        on_batch: Callable[[int], None],
    ) -> None:
        """One forward pass of group ``g`` for ``rows`` (request, agent); an agent acting
        without a held memory (a new episode, or back after a step away) starts afresh."""
        policy, ops = self.policies[g.name], self.ops[g.name]
        starts = np.array([agent not in before[i] for i, agent in rows])
        states = [
            ops.initial(None) if start else before[i][agent]
            for (i, agent), start in zip(rows, starts, strict=True)
        ]
        rewards = None
        if any(requests[i].rewards for i, _ in rows):
            rewards = np.array([requests[i].rewards.get(a, 0.0) for i, a in rows], np.float32)
        masks = None
        if any(a in requests[i].action_masks for i, a in rows):
            size = mask_size(g.action_space)  # an agent sent without a mask may take any action
            everything = np.ones(size, dtype=bool)
            masks = np.stack([requests[i].action_masks.get(a, everything) for i, a in rows])
        try:
            acted, state = policy.act(
                self._observations(g, requests, rows),
                ops.cat(states),
                starts,
                rewards,
                masks,
                deterministic=requests[rows[0][0]].deterministic,
            )
        except Exception as err:  # a policy failure fails these requests, never the server
            message = f"the policy of group {g.name!r} failed: {err}".splitlines()[0][:500]
            for i in {i for i, _ in rows}:
                results[i] = RequestError(500, message, "internal").payload()
                actions.pop(i, None)
            return
        on_batch(len(rows))
        for row, (i, agent) in enumerate(rows):
            if i in actions:
                actions[i][agent] = encode_row(acted, row)
                after[i][agent] = ops.row(state, row)

    def _observations(
        self, g: Group, requests: list[TeamRequest], rows: list[tuple[int, str]]
    ) -> Any:
        """The rows' observations as the group's network reads them (see team.py): the
        agent's own, its one-hot index where the run added it, and zeros for a centralised
        critic's input, which the actor does not read."""
        own = concat([requests[i].observations[agent] for i, agent in rows])
        if g.observation_space is g.agent_space:
            return own
        parts = dict(_as_dict(g.observation_space).spaces)
        value: dict[str, Any] = {"obs": own}
        if "agent_id" in parts:
            index = [self.place[agent][1] for _, agent in rows]
            value["agent_id"] = np.eye(g.size, dtype=np.int8)[index]
        if "state" in parts:
            size = gym.spaces.flatdim(parts["state"])
            value["state"] = np.zeros((len(rows), size), dtype=np.float32)
        return value

    # ------------------------------------------------------------ description
    def describe(self) -> dict[str, Any]:
        from rlformer.export.space_codec import space_to_data

        agents = {
            agent: {
                "group": g.name,
                "index": k,
                "observation_space": space_to_data(g.agent_space),
                "action_space": space_to_data(g.action_space),
            }
            for agent, (g, k) in self.place.items()
        }
        return jsonable(
            {
                "info": {"name": self.name, "kind": "mappo", "task": self.task},
                "team": {
                    "groups": {g.name: list(g.agents) for g in self.team.groups},
                    "agents": agents,
                    # where training read the masks (None: none); requests send them apart
                    "action_mask": ":".join(mask) if (mask := self.team.action_mask) else None,
                },
                "serving": {"stateless": False, "sessions": "one per episode, every agent"},
            }
        )


def _as_dict(space: gym.Space) -> gym.spaces.Dict:
    assert isinstance(space, gym.spaces.Dict)
    return space
