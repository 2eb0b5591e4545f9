"""Local backend: fragment bookkeeping across episodes and fragments, resume, lazy Ray import."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch

from rlformer.algos.ppo.algorithm import build_model
from rlformer.config import TrainConfig, load_config
from rlformer.rollout.collector import LocalCollector
from rlformer.rollout.worker import RolloutWorker


def _cfg(*extra: str) -> TrainConfig:
    return load_config(
        None,
        [
            "env.id=CartPole-v1",
            "env.max_episode_steps=5",
            "rollout.envs_per_worker=3",
            "rollout.fragment_length=10",
            "model.core.d_model=16",
            "model.core.n_heads=2",
            "model.core.memory_length=4",
            "ppo.num_minibatches=1",
            *extra,
        ],
    )


def test_in_process_workers_act_on_one_thread_and_leave_the_learners_alone() -> None:
    """``run.torch_threads`` holds for the learner with the local backend; acting stays on one
    thread, as in a Ray actor."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        cfg = _cfg()
        collector = LocalCollector(cfg)
        assert torch.get_num_threads() == 2
        worker = collector.workers[0]
        seen = []
        sample = worker.sample
        worker.sample = lambda: seen.append(torch.get_num_threads()) or sample()
        collector.collect(build_model(cfg).state_dict(), 0)
        assert seen == [1]
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_fragment_bookkeeping_across_fragments() -> None:
    torch.manual_seed(0)
    cfg = _cfg()
    model = build_model(cfg)
    collector = LocalCollector(cfg)
    a = collector.collect(model.state_dict(), 0)
    b = collector.collect(model.state_dict(), 1)
    assert a.obs.shape == (10, 3, 4) and a.actions.shape == (10, 3) and a.actions.dtype == np.int64
    for name in ("log_probs", "values", "rewards", "truncation_values"):
        assert getattr(a, name).shape == (10, 3) and getattr(a, name).dtype == np.float32, name
    for name in ("terminated", "truncated", "episode_start"):
        assert getattr(a, name).shape == (10, 3) and getattr(a, name).dtype == bool, name
    assert a.last_value.shape == (3,)
    assert a.policy_version == 0 and b.policy_version == 1
    assert a.episode_start[0].all()  # first observation of the run
    for frag in (a, b):
        done = frag.terminated | frag.truncated
        np.testing.assert_array_equal(frag.episode_start[1:], done[:-1])
    np.testing.assert_array_equal(b.episode_start[0], (a.terminated | a.truncated)[-1])
    # Truncation values only where the time limit (not a failure) ended the episode.
    trunc_only = a.truncated & ~a.terminated
    assert trunc_only.any()
    assert (a.truncation_values[~trunc_only] == 0).all() and (
        a.truncation_values[trunc_only] != 0
    ).all()
    # Finished-episode returns are sums of that episode's rewards (CartPole: 1 per step).
    assert a.episode_returns == [float(n) for n in a.episode_lengths]
    assert all(n <= 5 for n in a.episode_lengths)
    collector.close()


def test_episode_returns_are_sums_of_their_rewards() -> None:
    torch.manual_seed(0)
    cfg = _cfg("env.id=Pendulum-v1", "model.torso=mlp")  # rewards vary from step to step
    model = build_model(cfg)
    collector = LocalCollector(cfg)
    frags = [collector.collect(model.state_dict(), v) for v in range(3)]
    collector.close()
    rewards = np.concatenate([f.rewards for f in frags])  # [3F, E]
    done = np.concatenate([f.terminated | f.truncated for f in frags])
    expected, running = [], np.zeros(rewards.shape[1])
    for t in range(rewards.shape[0]):  # the worker's order: by step, then by slot
        running += rewards[t]
        for slot in np.flatnonzero(done[t]):
            expected.append(running[slot])
            running[slot] = 0.0
    got = [r for f in frags for r in f.episode_returns]
    assert len(got) == len(expected) == 18  # 30 steps x 3 slots / 5 steps per episode
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_memory_carried_between_fragments() -> None:
    torch.manual_seed(0)
    cfg = _cfg("env.max_episode_steps=100")
    model = build_model(cfg)
    collector = LocalCollector(cfg)
    collector.collect(model.state_dict(), 0)
    worker = collector.workers[0]
    end_state = worker.state
    b = collector.collect(model.state_dict(), 1)
    assert torch.equal(b.state.actor.hidden, end_state.actor.hidden)
    assert torch.equal(b.state.actor.valid, end_state.actor.valid)
    assert b.state.actor.valid.any(), (
        "memory of running episodes must survive the fragment boundary"
    )
    collector.close()


def test_get_set_state_reproduces_next_fragment() -> None:
    torch.manual_seed(0)
    cfg = _cfg("env.id=Pendulum-v1")
    model = build_model(cfg)
    collector = LocalCollector(cfg)
    collector.collect(model.state_dict(), 0)
    saved = collector.get_state()
    expected = collector.collect(model.state_dict(), 1)
    other = LocalCollector(cfg)
    other.set_state(saved)
    got = other.collect(model.state_dict(), 1)
    for name in ("obs", "actions", "log_probs", "rewards", "values", "episode_start"):
        np.testing.assert_array_equal(getattr(got, name), getattr(expected, name))
    collector.close()
    other.close()


def test_local_backend_does_not_import_ray() -> None:
    code = (
        "import sys; from rlformer.config import load_config; "
        "from rlformer.rollout.collector import make_collector; "
        "make_collector(load_config(None, ['model.torso=mlp'])).close(); "
        "print('ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_truncation_values_are_final_observation_values_with_the_episodes_memory() -> None:
    """The worker batches final observations with the next step's call; the values must equal
    the sequence path over the episode with its final observation appended."""
    torch.manual_seed(0)
    cfg = _cfg("env.max_episode_steps=4")
    model = build_model(cfg)
    model.eval()
    worker = RolloutWorker(cfg.env, cfg.model, num_envs=3, fragment_length=10, seed=0)
    worker.set_weights(model.state_dict(), 0)
    final_obs: dict[tuple[int, int], np.ndarray] = {}
    env_step, steps = worker.envs.step, [0]

    def recording_step(action: np.ndarray) -> tuple:
        result = env_step(action)
        for slot in np.flatnonzero(result[3] & ~result[2]):
            final_obs[steps[0], int(slot)] = np.asarray(result[4]["final_obs"][slot])
        steps[0] += 1
        return result

    worker.envs.step = recording_step  # type: ignore[method-assign]
    frag = worker.sample()
    worker.close()
    truncated = frag.truncated & ~frag.terminated
    # Episodes that started at the fragment's first step: their whole memory is in the fragment.
    checked = 0
    for (t, slot), last in final_obs.items():
        if (frag.terminated[:t, slot] | frag.truncated[:t, slot]).any():
            continue
        assert truncated[t, slot]
        obs = torch.as_tensor(np.concatenate([frag.obs[: t + 1, slot], last[None]]))[None]
        actions = torch.as_tensor(np.concatenate([frag.actions[: t + 1, slot], [0]]))[None]
        starts = torch.zeros(1, t + 2, dtype=torch.bool)
        starts[0, 0] = True
        with torch.no_grad():
            values = model.evaluate(obs, actions, model.initial_state(1), starts).value
        assert frag.truncation_values[t, slot] == pytest.approx(float(values[0, -1]), abs=1e-5)
        checked += 1
    assert checked >= 2  # CartPole rarely fails within 4 random steps
    assert (frag.truncation_values[~truncated] == 0).all()


@pytest.mark.slow
def test_a_compiled_policy_step_samples_the_eager_fragments() -> None:
    """``rollout.compile_act`` changes how the step is computed, not what is sampled: the same
    actions from the same generator, log-probabilities and values to float tolerance, across
    episode starts, carried memory and the extra rows of time-limited episodes' final
    observations (a batch whose size changes from step to step). A copy (Ray's pickle,
    export's deepcopy) runs eager."""
    torch.manual_seed(0)
    cfg = _cfg("env.max_episode_steps=4", "model.prev_action_reward=true")
    weights = build_model(cfg).state_dict()
    workers = [
        RolloutWorker(cfg.env, cfg.model, 3, 10, seed=0, compile_act=flag) for flag in (False, True)
    ]
    for worker in workers:
        worker.set_weights(weights, 0)
    for _ in range(2):  # the second fragment starts from carried memory
        eager, compiled = (worker.sample() for worker in workers)
        assert compiled.truncated.any() and compiled.episode_start.any()
        np.testing.assert_array_equal(compiled.actions, eager.actions)
        for name in ("log_probs", "values", "truncation_values"):
            np.testing.assert_allclose(getattr(compiled, name), getattr(eager, name), atol=1e-5)
    assert workers[1].model._compiled_step is not None
    assert copy.deepcopy(workers[1].model)._compiled_step is None
    assert pickle.loads(pickle.dumps(workers[1].model))._compiled_step is None
    for worker in workers:
        worker.close()
