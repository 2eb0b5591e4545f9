"""rlformer's Gymnasium memory tasks, registered under the ``rlformer/`` namespace.

Importing this package (or ``rlformer``) registers them::

    import gymnasium, rlformer_envs
    env = gymnasium.make("rlformer/TMaze-v0", length=50)

Without an import, Gymnasium's ``module:id`` form works too (Gymnasium imports the module, which
registers the ids): ``gymnasium.make("rlformer_envs:rlformer/TMaze-v0")``. Gymnasium 1.x loads no
plugin entry points, so a bare ``gymnasium.make("rlformer/TMaze-v0")`` needs one of the two.
"""

from __future__ import annotations

import gymnasium as gym
from rlformer_envs.masked_recall import MaskedRecallEnv
from rlformer_envs.repeat_previous import RepeatPreviousEnv
from rlformer_envs.tmaze import TMazeEnv
from rlformer_envs.wrappers import (
    HideObservationEntries,
    KeepActions,
    SuccessFromReward,
    cartpole_no_velocity,
    lunar_lander_no_velocity,
    pendulum_no_velocity,
)

__all__ = [
    "HideObservationEntries",
    "KeepActions",
    "MaskedRecallEnv",
    "RepeatPreviousEnv",
    "SuccessFromReward",
    "TMazeEnv",
    "cartpole_no_velocity",
    "lunar_lander_no_velocity",
    "pendulum_no_velocity",
    "register_envs",
]

_SPECS = {
    "rlformer/TMaze-v0": {"entry_point": "rlformer_envs.tmaze:TMazeEnv"},
    "rlformer/MaskedRecall-v0": {"entry_point": "rlformer_envs.masked_recall:MaskedRecallEnv"},
    "rlformer/RepeatPrevious-v0": {
        "entry_point": "rlformer_envs.repeat_previous:RepeatPreviousEnv"
    },
    "rlformer/CartPoleNoVel-v0": {
        "entry_point": "rlformer_envs.wrappers:cartpole_no_velocity",
        "max_episode_steps": 500,
        "reward_threshold": 475.0,
    },
    "rlformer/PendulumNoVel-v0": {
        "entry_point": "rlformer_envs.wrappers:pendulum_no_velocity",
        "max_episode_steps": 200,
    },
    "rlformer/LunarLanderNoVel-v0": {
        "entry_point": "rlformer_envs.wrappers:lunar_lander_no_velocity",
        "max_episode_steps": 1000,
        "reward_threshold": 200.0,
    },
}


def register_envs() -> None:
    """Register every task under ``rlformer/``.

    Idempotent (ids already registered are left alone) because both ``import rlformer`` and
    ``import rlformer_envs`` call it, as do Ray workers and subprocess vector envs that import
    either; re-registering would make Gymnasium warn about overriding.
    """
    for env_id, spec in _SPECS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, **spec)


register_envs()
