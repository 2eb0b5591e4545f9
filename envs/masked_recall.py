"""Masked Recall: a memory task where most actions are invalid at every step.

The agent sees a cue (one of ``cues``) on the first step only, then walks a corridor of
``length`` steps. At each corridor step only ``valid`` of the ``actions`` actions are allowed, a
fresh random subset every step, shown in the observation. An invalid action costs
``invalid_cost`` and the agent stays where it is. At the end the allowed actions are the
``cues`` answer actions; answering the cue's action earns +1, any other answer 0, and the
episode ends. The time limit leaves room for a few wasted steps.

So an agent that takes the mask as an input must first learn which actions the observation
allows (a costly lesson when most are invalid); an agent given the mask never wastes a step and
only has to carry the cue through the corridor. The mask is available the three ways
rlformer's ``env.action_mask`` reads it: ``info["action_mask"]``, the ``mask`` key of the
observation (``mask_in_obs=True``), and the :meth:`action_masks` method (sb3-contrib's
convention).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class MaskedRecallEnv(gym.Env):
    """See the module docstring. Observation: cue one-hot (step 0 only), allowed actions,
    at-the-end flag; with ``mask_in_obs`` a Dict with the same under ``obs`` and ``mask``."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        length: int = 8,
        actions: int = 12,
        valid: int = 2,
        cues: int = 3,
        invalid_cost: float = 0.1,
        slack: int = 8,
        mask_in_obs: bool = False,
    ) -> None:
        if not 1 <= valid <= actions or not 2 <= cues <= actions:
            raise ValueError(
                "need 1 <= valid <= actions and 2 <= cues <= actions, "
                f"got valid={valid}, cues={cues}, actions={actions}"
            )
        self.length, self.n, self.valid, self.cues = length, actions, valid, cues
        self.invalid_cost, self.max_steps, self.mask_in_obs = (
            invalid_cost,
            length + 1 + slack,
            mask_in_obs,
        )
        size = cues + actions + 1
        flat = gym.spaces.Box(0.0, 1.0, (size,), np.float32)
        self.observation_space: gym.Space = (
            gym.spaces.Dict({"obs": flat, "mask": gym.spaces.MultiBinary(actions)})
            if mask_in_obs
            else flat
        )
        self.action_space = gym.spaces.Discrete(actions)

    def action_masks(self) -> np.ndarray:
        """The actions allowed now (sb3-contrib's ``MaskablePPO`` calls this)."""
        return self._mask.copy()

    def _draw_mask(self) -> None:
        self._mask = np.zeros(self.n, dtype=bool)
        if self._position >= self.length:  # the end: the answer actions
            self._mask[: self.cues] = True
        else:
            self._mask[self.np_random.choice(self.n, self.valid, replace=False)] = True

    def _observe(self, show_cue: bool) -> Any:
        obs = np.zeros(self.cues + self.n + 1, np.float32)
        if show_cue:
            obs[self._cue] = 1.0
        obs[self.cues : self.cues + self.n] = self._mask
        obs[-1] = float(self._position >= self.length)
        if self.mask_in_obs:
            return {"obs": obs, "mask": self._mask.astype(np.int8)}
        return obs

    def _info(self, **extra: Any) -> dict[str, Any]:
        return {"action_mask": self._mask.copy(), **extra}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        super().reset(seed=seed)
        self._cue = int(self.np_random.integers(self.cues))
        self._position, self._steps = 0, 0
        self._draw_mask()
        return self._observe(show_cue=True), self._info()

    def step(self, action: Any) -> Any:
        action = int(action)
        self._steps += 1
        truncated = self._steps >= self.max_steps
        if not self._mask[action]:
            return self._observe(False), -self.invalid_cost, False, truncated, self._info()
        if self._position >= self.length:
            success = action == self._cue
            info = self._info(is_success=success)
            return self._observe(False), float(success), True, False, info
        self._position += 1
        self._draw_mask()
        return self._observe(False), 0.0, False, truncated, self._info()
