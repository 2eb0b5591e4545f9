"""Small envs of every space kind rlformer encodes, registered on import as ``SpaceTest-v0``.

``gymnasium.make("tests.space_envs:SpaceTest-v0", obs=..., action=...)`` (the ``module:EnvId``
form imports this module). Episodes last 3-6 steps (so resets fall inside fragments); the
reward is 1 when the action's first component matches the first observation's cue, so a
memory policy can learn it, though the tests here only need the spaces.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

OBSERVATIONS = {
    "box": lambda: spaces.Box(-1.0, 1.0, (3,), np.float32),
    "discrete": lambda: spaces.Discrete(4, start=1),
    "multidiscrete": lambda: spaces.MultiDiscrete([3, 2, 4]),
    "multibinary": lambda: spaces.MultiBinary(5),
    "image": lambda: spaces.Box(0, 255, (9, 9, 3), np.uint8),
    "tuple": lambda: spaces.Tuple((spaces.Discrete(2), spaces.Discrete(4))),
    # Everything at once, nested: an HWC image, a CHW image, a vector, and a Tuple of the rest.
    "dict": lambda: spaces.Dict(
        {
            "image": spaces.Box(0, 255, (9, 9, 3), np.uint8),
            "chw": spaces.Box(0, 255, (1, 6, 6), np.uint8),
            "vector": spaces.Box(-5.0, 5.0, (2,), np.float32),
            "inner": spaces.Tuple(
                (
                    spaces.Discrete(4, start=1),
                    spaces.MultiDiscrete([3, 2]),
                    spaces.Dict({"bits": spaces.MultiBinary(3)}),
                )
            ),
        }
    ),
    "text": lambda: spaces.Dict(
        {"vector": spaces.Box(-1.0, 1.0, (2,), np.float32), "mission": spaces.Text(8)}
    ),
}

ACTIONS = {
    "discrete": lambda: spaces.Discrete(3),
    "box": lambda: spaces.Box(-1.0, 1.0, (2,), np.float32),
    "multidiscrete": lambda: spaces.MultiDiscrete([3, 4], start=[1, 0]),
    "multibinary": lambda: spaces.MultiBinary(3),
    "tuple": lambda: spaces.Tuple((spaces.Discrete(2), spaces.Discrete(2))),
}


class SpaceTestEnv(gym.Env):
    """Random observations of the chosen space; the first one carries a cue to recall."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, obs: str = "dict", action: str = "multidiscrete") -> None:
        self.observation_space = OBSERVATIONS[obs]()
        self.action_space = ACTIONS[action]()
        self._length = 0
        self._t = 0
        self._cue = 0

    def _observation(self) -> Any:
        return self.observation_space.sample()

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        self.action_space.seed(int(self.np_random.integers(2**31)))
        self._length = int(self.np_random.integers(3, 7))
        self._t = 0
        self._cue = int(self.np_random.integers(2))
        return self._observation(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        assert self.action_space.contains(action), (action, self.action_space)
        first = np.asarray(action if not isinstance(action, tuple) else action[0]).reshape(-1)[0]
        reward = float(int(first) % 2 == self._cue) if self._t == self._length - 1 else 0.0
        self._t += 1
        done = self._t >= self._length
        return self._observation(), reward, done, False, {}


if "SpaceTest-v0" not in gym.registry:
    gym.register("SpaceTest-v0", entry_point=SpaceTestEnv)


class AddMission(gym.ObservationWrapper):
    """Adds a Text ``mission`` key: a wrapper whose output rlformer cannot encode (tests)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.observation_space = spaces.Dict(
            {"obs": env.observation_space, "mission": spaces.Text(8)}
        )

    def observation(self, observation: Any) -> Any:
        return {"obs": observation, "mission": "go"}
