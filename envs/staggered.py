"""Staggered: agents that join late and finish at different steps (PettingZoo Parallel API).

A small task for the mechanics of multi-agent rollouts rather than for learning: agent ``i``
is present from step ``joins[i]`` to step ``leaves[i]`` (both inclusive), and the episode ends
when the last one leaves. Each step, a present agent observes ``[its clock, the step's bit]``
and earns 1 for repeating the bit it saw one step earlier (its first step is not scored), so
memory helps and a random policy scores half. The last step of an agent is ``terminated``,
except that ``truncate=True`` truncates the agents still present when the episode's last
agent leaves (a time limit).

With ``state=True`` the env also has a global state (``state_space``, ``state()``: the clock and
the step's bit), and, as in envs that take a fallen agent's body out of the world (SISL's
multiwalker), the state cannot be read once the episode has terminated (not truncated) until
the next reset; ``state_reads`` counts the reads.

With ``mask="obs"`` or ``mask="info"`` the env gives action masks, in PettingZoo's layout
(``int8`` ones for allowed actions) under the key ``action_mask`` of a Dict observation
(``{"observation", "action_mask"}``) or of each agent's info: at odd steps only the scored
action (the bit seen one step earlier) is allowed, at even steps both actions are.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class StaggeredEnv(ParallelEnv):
    """See the module docstring."""

    metadata = {"name": "staggered_v0", "render_modes": []}

    def __init__(
        self,
        joins: tuple[int, ...] = (0, 0, 2),
        leaves: tuple[int, ...] = (3, 6, 8),
        truncate: bool = False,
        state: bool = False,
        mask: str | None = None,
    ) -> None:
        if mask not in (None, "obs", "info"):
            raise ValueError(f"mask must be None, 'obs' or 'info'; got {mask!r}")
        if len(joins) != len(leaves) or any(j > k for j, k in zip(joins, leaves, strict=True)):
            raise ValueError(f"need one join <= leave per agent; got {joins} and {leaves}")
        self.joins, self.leaves, self.truncate = tuple(joins), tuple(leaves), bool(truncate)
        self.possible_agents = [f"agent_{i}" for i in range(len(joins))]
        self.agents: list[str] = []
        box = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        self._box = box
        if state:
            self.state_space = box
        self.mask = mask
        self._mask_box = spaces.Box(0, 1, shape=(2,), dtype=np.int8)
        if mask == "obs":
            self._obs_space: spaces.Space = spaces.Dict(
                {"observation": box, "action_mask": self._mask_box}
            )
        else:
            self._obs_space = box
        self.state_reads = 0
        self._ended = False
        self._rng = np.random.default_rng()
        self._t = 0
        self._bits = np.zeros(max(leaves) + 2, dtype=np.int64)

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Space:
        return spaces.Discrete(2)

    def _present(self, t: int) -> list[str]:
        return [
            agent
            for agent, join, leave in zip(
                self.possible_agents, self.joins, self.leaves, strict=True
            )
            if join <= t <= leave
        ]

    def _observe(self, agents: list[str]) -> dict[str, Any]:
        clock = self._t / (max(self.leaves) + 1)
        bit = float(self._bits[self._t])
        values = {agent: np.array([clock, bit], dtype=np.float32) for agent in agents}
        if self.mask != "obs":
            return values
        return {a: {"observation": v, "action_mask": self.action_mask()} for a, v in values.items()}

    def action_mask(self) -> np.ndarray:
        """The actions allowed now: at odd steps only the previous step's bit."""
        if self._t % 2 == 0:
            return np.ones(2, dtype=np.int8)
        mask = np.zeros(2, dtype=np.int8)
        mask[self._bits[self._t - 1]] = 1
        return mask

    def _infos(self, agents: Any) -> dict[str, dict[str, Any]]:
        if self.mask == "info":
            return {agent: {"action_mask": self.action_mask()} for agent in agents}
        return {agent: {} for agent in agents}

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._t = 0
        self._ended = False
        self._bits = self._rng.integers(0, 2, size=max(self.leaves) + 2)
        self.agents = self._present(0)
        return self._observe(self.agents), self._infos(self.agents)

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        acting = list(self.agents)
        last = self._t == max(self.leaves)
        rewards = {}
        for agent in acting:
            first_step = self._t == self.joins[self.possible_agents.index(agent)]
            right = self._t > 0 and int(actions[agent]) == self._bits[self._t - 1]
            rewards[agent] = 0.0 if first_step else float(right)
        leaving = {a for a in acting if self.leaves[self.possible_agents.index(a)] == self._t}
        terminations = {a: a in leaving and not (last and self.truncate) for a in acting}
        truncations = {a: last and self.truncate for a in acting}
        self._t += 1
        observations = self._observe(acting)  # the leaving agents' final observations too
        joining = [a for a in self._present(self._t) if a not in acting]
        self.agents = [a for a in acting if a not in leaving] + joining
        self._ended = not self.agents and any(terminations.values())
        observations.update(self._observe(joining))
        infos = self._infos(observations)
        return observations, rewards, terminations, truncations, infos

    def state(self) -> np.ndarray:
        """The clock and the step's bit (``state=True`` only); unreadable after the episode's
        termination."""
        if getattr(self, "state_space", None) is None:
            raise AttributeError("StaggeredEnv(state=False) has no global state")
        if self._ended:
            raise RuntimeError("the episode has terminated: no state until reset()")
        self.state_reads += 1
        clock = self._t / (max(self.leaves) + 1)
        return np.array([clock, float(self._bits[self._t])], dtype=np.float32)


def parallel_env(**kwargs: Any) -> StaggeredEnv:
    """The Parallel env (``mappo.env: rlformer_envs.staggered:parallel_env``)."""
    return StaggeredEnv(**kwargs)
