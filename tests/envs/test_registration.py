"""Registration: ids, idempotence, keyword pass-through, and Gymnasium's ``module:id`` form."""

from __future__ import annotations

import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import rlformer_envs
from rlformer_envs.repeat_previous import RepeatPreviousEnv
from rlformer_envs.tmaze import TMazeEnv

IDS = (
    "rlformer/TMaze-v0",
    "rlformer/RepeatPrevious-v0",
    "rlformer/CartPoleNoVel-v0",
    "rlformer/PendulumNoVel-v0",
    "rlformer/LunarLanderNoVel-v0",
)


def test_register_is_idempotent() -> None:
    before = {env_id: gym.spec(env_id) for env_id in IDS}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Gymnasium warns when an id is registered twice
        rlformer_envs.register_envs()
        rlformer_envs.register_envs()
    assert all(gym.spec(env_id) is spec for env_id, spec in before.items())


def test_make_passes_keyword_arguments() -> None:
    tmaze = gym.make("rlformer/TMaze-v0", length=50, show_position=True).unwrapped
    assert isinstance(tmaze, TMazeEnv) and tmaze.length == 50
    assert tmaze.observation_space.shape == (4,)
    repeat = gym.make("rlformer/RepeatPrevious-v0", k=5, n_symbols=7).unwrapped
    assert isinstance(repeat, RepeatPreviousEnv) and (repeat.k, repeat.n_symbols) == (5, 7)


def test_vector_env() -> None:
    envs = gym.make_vec("rlformer/TMaze-v0", num_envs=3, vectorization_mode="sync", length=4)
    obs, _ = envs.reset(seed=[0, 1, 2])
    assert obs.shape == (3, 3) and obs.dtype == np.float32
    assert np.all(obs[:, :2].sum(axis=1) == 1)  # every slot shows its cue at the first step
    envs.close()


def test_module_colon_id_works_without_importing_the_package() -> None:
    """In a fresh interpreter, ``rlformer_envs:rlformer/TMaze-v0`` imports and registers."""
    code = (
        "import sys, gymnasium as gym\n"
        "assert 'rlformer_envs' not in sys.modules\n"
        "env = gym.make('rlformer_envs:rlformer/TMaze-v0', length=7)\n"
        "print(env.unwrapped.length, env.spec.id)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.split() == ["7", "rlformer/TMaze-v0"]
