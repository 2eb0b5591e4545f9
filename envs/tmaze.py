"""Passive T-Maze: remember a cue seen once, walk a featureless corridor, turn the right way.

A standard long-memory credit-assignment test (Bakker 2001; the passive variant of Ni et al. 2023,
"When do Transformers shine in RL?"). The reward depends only on information that disappears
after the first step, so a memoryless policy cannot beat chance.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

FORWARD, UP, DOWN = 0, 1, 2


class TMazeEnv(gym.Env[np.ndarray, np.int64]):
    """Passive T-Maze.

    * Observation ``Box(3,)`` float32: ``[cue_up, cue_down, at_junction]``. The cue (one of the two
      first entries set to 1) is shown only on the first step of the episode; afterwards the
      corridor looks the same everywhere (all zeros) until the junction (``at_junction = 1``).
      With ``show_position=True`` a fourth entry gives ``position / length`` (still no cue).
    * Actions ``Discrete(3)``: 0 forward, 1 turn up, 2 turn down. In the default *passive*
      corridor every action moves the agent one cell forward, so only memory is tested (no
      exploration problem, as in Ni et al.'s passive T-Maze). With ``passive=False`` only
      "forward" moves; a turn inside the corridor does not move the agent and costs
      ``turn_penalty``. Forward at the junction does nothing.
    * Reward: ``+1`` for turning at the junction towards the cue, ``0`` for the other side; the
      episode terminates on either turn. ``info["is_success"]`` is True iff the turn was right.
    * Time limit: ``length + 1 + slack`` steps (truncated, not a success); ``slack`` defaults to
      ``max(10, length // 2)`` so that the limit grows with the corridor.
    * ``reset`` returns ``info["cue"]`` (1 up, 2 down) for diagnostics and oracle tests; a policy
      must not read it.
    * Optimum: ``length`` forward steps then the cued turn: return 1, success 100%, ``length + 1``
      steps. Chance (and the best memoryless policy): success 50%.
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        length: int = 10,
        slack: int | None = None,
        turn_penalty: float = 0.0,
        show_position: bool = False,
        passive: bool = True,
    ) -> None:
        if length < 1:
            raise ValueError(f"TMaze length must be >= 1, got {length}")
        self.length = int(length)
        self.slack = int(slack) if slack is not None else max(10, self.length // 2)
        self.turn_penalty = float(turn_penalty)
        self.show_position = show_position
        self.passive = passive
        size = 4 if show_position else 3
        self.observation_space = spaces.Box(0.0, 1.0, shape=(size,), dtype=np.float32)
        self.action_space = spaces.Discrete(3)
        self.max_steps = self.length + 1 + self.slack
        self._cue = UP
        self._position = 0
        self._steps = 0

    def _observation(self) -> np.ndarray:
        obs = np.zeros(self.observation_space.shape, dtype=np.float32)
        if self._steps == 0:
            obs[0 if self._cue == UP else 1] = 1.0
        if self._position == self.length:
            obs[2] = 1.0
        if self.show_position:
            obs[3] = self._position / self.length
        return obs

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._cue = UP if self.np_random.random() < 0.5 else DOWN
        self._position = 0
        self._steps = 0
        return self._observation(), {"cue": int(self._cue)}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        action = int(action)
        if not self.action_space.contains(action):
            raise ValueError(f"invalid TMaze action {action}; use 0 (forward), 1 (up), 2 (down)")
        self._steps += 1
        reward, terminated, info = 0.0, False, {}
        if self._position < self.length:
            if action == FORWARD or self.passive:
                self._position += 1
            else:
                reward = -self.turn_penalty
        elif action != FORWARD:
            success = action == self._cue
            reward, terminated = (1.0 if success else 0.0), True
            info["is_success"] = success
        truncated = not terminated and self._steps >= self.max_steps
        if truncated:
            info["is_success"] = False
        return self._observation(), reward, terminated, truncated, info
