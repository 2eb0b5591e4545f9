"""Two probes of MiniGrid-MemoryS11-v0 that split its difficulty into parts.

Importing this module registers them (put ``benchmarks`` on PYTHONPATH and list the module in
``env.imports``, after ``minigrid``):

* ``MiniGrid-ProbeCueInEveryViewS11-v0``: the task as it is, but every view's top-left cell shows
  the cue object. No memory is needed, so it measures whether an encoder and PPO learn the
  decision itself: at the end of the hallway, go to the object that matches the cue.
* ``MiniGrid-ProbeStartBesideCueS11-v0``: the agent always starts in the cell next to the cue,
  so the cue is in view at the first step (and only then). No turning back is needed, so it
  measures whether memory carries the cue to the decision about 10 steps later.

Results and commands: docs/benchmarks/memory.md, MiniGrid-MemoryS11.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.envs.registration import register
from minigrid.envs.memory import MemoryEnv


def cue_cell(env: MemoryEnv) -> tuple[int, int]:
    """Where MemoryEnv puts the cue: the start room's cell above the hallway's row."""
    return 1, env.height // 2 - 1


class CueInEveryView(MemoryEnv):
    """MemoryEnv whose every observation carries the cue in the view's top-left cell."""

    def gen_obs(self) -> dict[str, Any]:
        obs = super().gen_obs()
        image = obs["image"].copy()
        image[0, 0] = self.grid.get(*cue_cell(self)).encode()
        return {**obs, "image": image}


class StartBesideCue(MemoryEnv):
    """MemoryEnv whose agent starts at the hallway's west end, with the cue beside it in view."""

    def _gen_grid(self, width: int, height: int) -> None:
        super()._gen_grid(width, height)
        self.agent_pos = np.array((1, height // 2))


register("MiniGrid-ProbeCueInEveryViewS11-v0", entry_point=CueInEveryView, kwargs={"size": 11})
register("MiniGrid-ProbeStartBesideCueS11-v0", entry_point=StartBesideCue, kwargs={"size": 11})
