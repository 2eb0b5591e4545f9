"""Envs that gymnasium's ``EzPickle`` rebuilds fresh on unpickling (Box2D, MuJoCo, MPE) cannot
have their episodes saved: a checkpoint leaves them out with the reason, and a worker resumed
from it, or from an older checkpoint that holds them, starts fresh episodes instead of stepping
an env that was never reset."""

from __future__ import annotations

import pickle

import cloudpickle
import gymnasium as gym
import numpy as np
import pytest

from rlformer.config import load_config
from rlformer.rollout.worker import RolloutWorker, rebuilt_on_unpickling

TINY = "model.core={n_layers: 1, d_model: 16, n_heads: 2, d_ff: 32, memory_length: 8}"


def test_ezpickle_envs_are_named_and_plain_ones_are_not() -> None:
    pytest.importorskip("Box2D")
    lander = gym.make("LunarLander-v3")
    assert "LunarLander pickles through gymnasium's EzPickle" in str(
        rebuilt_on_unpickling([gym.make("CartPole-v1"), lander])
    )
    assert rebuilt_on_unpickling([gym.make("CartPole-v1"), gym.make("Pendulum-v1")]) is None
    # what the check guards against: the unpickled env is new, its wrappers are not
    lander.reset(seed=0)
    copy = pickle.loads(cloudpickle.dumps(lander))
    with pytest.raises(AssertionError):
        copy.step(0)


def test_a_lunar_lander_worker_resumes_with_fresh_episodes() -> None:
    pytest.importorskip("Box2D")
    cfg = load_config(None, ["env.id=LunarLander-v3", "model.torso=mlp"])
    worker = RolloutWorker(cfg.env, cfg.model, 2, 8, 0)
    worker.set_weights(worker.model.state_dict(), 0)
    worker.sample()
    saved = worker.get_state()
    assert "EzPickle" in str(saved["unpicklable_envs"])
    # an older checkpoint: the envs pickled anyway
    old = pickle.loads(saved["state"])
    old["envs"] = cloudpickle.dumps(list(worker.envs.envs))
    for state in (saved, {"state": cloudpickle.dumps(old), "unpicklable_envs": None}):
        resumed = RolloutWorker(cfg.env, cfg.model, 2, 8, 0)
        resumed.set_weights(worker.model.state_dict(), 1)
        resumed.set_state(state)
        fragment = resumed.sample()
        assert fragment.episode_start[0].all()  # fresh episodes, not the saved ones
        assert np.isfinite(fragment.rewards).all()


def test_an_mpe_team_worker_resumes_with_fresh_episodes() -> None:
    pytest.importorskip("mpe2")
    from rlformer.algos.mappo.worker import MultiAgentWorker

    cfg = load_config(
        None,
        ["algo=mappo", "mappo.env=mpe2.simple_spread_v3:parallel_env",
         "mappo.env_kwargs={N: 2, max_cycles: 10}", TINY],
    )  # fmt: skip
    worker = MultiAgentWorker(cfg.mappo, cfg.model, 2, 4, 0)  # type: ignore[attr-defined]
    worker.set_weights(worker.models.state_dict(), 0)
    worker.sample()
    saved = worker.get_state()
    assert "raw_env pickles through gymnasium's EzPickle" in str(saved["unpicklable_envs"])
    old = pickle.loads(saved["state"])
    old["envs"] = cloudpickle.dumps(worker.envs)
    for state in (saved, {"state": cloudpickle.dumps(old), "unpicklable_envs": None}):
        resumed = MultiAgentWorker(cfg.mappo, cfg.model, 2, 4, 0)  # type: ignore[attr-defined]
        resumed.set_weights(worker.models.state_dict(), 1)
        resumed.set_state(state)
        fragment = resumed.sample().fragments["agent"]
        assert fragment.episode_start[0].all()
