"""Relay: a two-agent task where memory and communication both matter (PettingZoo Parallel API).

A *speaker* sees a cue (one of ``n_cues`` symbols) at the first step only. The *listener* never
sees the cue: at every step it sees the speaker's previous action, and at the last step
(``delay`` steps after the cue) it is asked for the cue; both agents get +1 if it answers right,
else 0. So the speaker must pass the cue on through its actions, and either the listener keeps
what it received until it is asked or the speaker keeps sending it, from memory: a memoryless
team, or any team with the channel cut (``channel=False``: the listener sees nothing), answers at
chance (``1 / n_cues``); a scripted oracle (:meth:`RelayEnv.oracle_actions`) answers every
episode right.

Observations (float32 Box): speaker ``[cue one-hot (step 0 only), 0]``; listener ``[the speaker's
previous action, one-hot (from step 1), question flag (last step)]``. Actions:
``Discrete(n_cues)`` for both. Episodes last ``delay + 1`` steps, then terminate;
``infos[agent]["is_success"]`` at the last step says whether the answer was right.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

SPEAKER, LISTENER = "speaker_0", "listener_0"


class RelayEnv(ParallelEnv):
    """See the module docstring."""

    metadata = {"name": "relay_v0", "render_modes": []}

    def __init__(self, delay: int = 20, n_cues: int = 4, channel: bool = True) -> None:
        if delay < 1 or n_cues < 2:
            raise ValueError(f"need delay >= 1 and n_cues >= 2; got delay={delay}, n_cues={n_cues}")
        self.delay, self.n_cues, self.channel = int(delay), int(n_cues), bool(channel)
        self.possible_agents = [SPEAKER, LISTENER]
        self.agents: list[str] = []
        box = spaces.Box(0.0, 1.0, shape=(self.n_cues + 1,), dtype=np.float32)
        self.observation_spaces = {agent: box for agent in self.possible_agents}
        self.action_spaces = {agent: spaces.Discrete(self.n_cues) for agent in self.possible_agents}
        self._rng = np.random.default_rng()
        self._cue = 0
        self._signal = -1  # the speaker's previous action
        self._first_signal = -1
        self._t = 0

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self._cue = int(self._rng.integers(self.n_cues))
        self._signal = self._first_signal = -1
        self._t = 0
        return self._observations(), {agent: {} for agent in self.agents}

    def _observations(self) -> dict[str, np.ndarray]:
        speaker = np.zeros(self.n_cues + 1, dtype=np.float32)
        listener = np.zeros(self.n_cues + 1, dtype=np.float32)
        if self._t == 0:
            speaker[self._cue] = 1.0
        if self.channel and self._signal >= 0:
            listener[self._signal] = 1.0
        if self._t == self.delay:
            listener[-1] = 1.0
        return {SPEAKER: speaker, LISTENER: listener}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        self._signal = int(actions[SPEAKER])
        if self._t == 0:
            self._first_signal = self._signal
        done = self._t == self.delay
        right = done and int(actions[LISTENER]) == self._cue
        reward = 1.0 if right else 0.0
        self._t += 1
        observations = self._observations()
        rewards = {agent: reward for agent in self.agents}
        terminations = {agent: done for agent in self.agents}
        truncations = {agent: False for agent in self.agents}
        infos: dict[str, dict[str, Any]] = {agent: {} for agent in self.agents}
        if done:
            infos = {agent: {"is_success": right} for agent in self.agents}
            self.agents = []
        return observations, rewards, terminations, truncations, infos

    def oracle_actions(self) -> dict[str, int]:
        """What a scripted team that knows the rules does now: the speaker sends the cue it saw,
        the listener answers with the first signal it received (nothing, with the channel cut)."""
        return {SPEAKER: self._cue, LISTENER: max(self._first_signal, 0) if self.channel else 0}


def parallel_env(**kwargs: Any) -> RelayEnv:
    """The Parallel env (``mappo.env: rlformer_envs.relay:parallel_env``)."""
    return RelayEnv(**kwargs)
