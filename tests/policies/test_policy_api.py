"""One Policy protocol for every caller: loaders by checkpoint kind, explicit state, and the
same actions whichever caller drives a policy (evaluation, predict(), collect)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import rlformer_envs  # noqa: F401
import torch

from rlformer.algos.dt.policy import DTPolicy
from rlformer.config import EnvConfig, load_config
from rlformer.core import CoreConfig
from rlformer.data.d4rl_format import write_d4rl
from rlformer.data.recorder import collect_dataset
from rlformer.data.synthetic import tmaze_walks
from rlformer.evaluation.runner import run_policy_episodes
from rlformer.networks.decision_transformer import DecisionTransformer
from rlformer.policies import (
    Policy,
    PolicyInfo,
    Predictor,
    load_policy,
    policy_from_payload,
    register_policy_loader,
)
from rlformer.policies.simple import RandomPolicy
from rlformer.runs.checkpoints import CheckpointError
from rlformer.runs.training import train
from tests.reliability.tiny import tiny_config

TMAZE = EnvConfig(id="rlformer/TMaze-v0", kwargs={"length": 3})
TINY_DT = [
    "algo=dt",
    "env.id=rlformer/TMaze-v0",
    "env.kwargs.length=4",
    "dt.context=4",
    "dt.batch_size=8",
    "dt.log_every=5",
    "dt.warmup_steps=10",
    "dt.train_steps=10",
    "dt.target_returns=[1.0]",
    "dt.core.n_layers=1",
    "dt.core.d_model=16",
    "dt.core.d_ff=32",
    "eval.episodes=0",
    "run.progress=false",
]


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ppo")
    return train(tiny_config(root, "ppo.total_steps=128")).run_dir


@pytest.fixture(scope="module")
def dt_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dt")
    data = root / "walks.hdf5"
    write_d4rl(data, tmaze_walks(4, 40, seed=0, p_correct=0.75), {"env_id": "rlformer/TMaze-v0"})
    return train(load_config(None, [*TINY_DT, f"dt.dataset={data}", f"run.root={root}"])).run_dir


@pytest.mark.slow
def test_every_kind_loads_as_a_policy(ppo_run: Path, dt_run: Path, tmp_path: Path) -> None:
    from stable_baselines3 import PPO

    PPO("MlpPolicy", "CartPole-v1", n_steps=64, device="cpu").save(tmp_path / "ppo.zip")
    loaded = {
        "ppo": load_policy(ppo_run),
        "dt": load_policy(dt_run),
        "sb3": load_policy(f"sb3:{tmp_path / 'ppo.zip'}"),
    }
    for kind, policy in loaded.items():
        assert isinstance(policy, Policy) and policy.info.kind == kind
    assert loaded["dt"].info.return_conditioned and loaded["dt"].info.default_targets == [1.0]
    assert loaded["ppo"].info.training_env.id == "rlformer/TMaze-v0"
    assert not loaded["ppo"].info.return_conditioned


@pytest.mark.slow
def test_evaluation_predict_and_collect_take_the_same_actions(
    ppo_run: Path, tmp_path: Path
) -> None:
    """collect records what the policy does; predict() replaying those episodes with the same
    episode starts takes exactly the recorded actions."""
    data = collect_dataset(
        str(ppo_run),
        "rlformer/TMaze-v0",
        60,
        tmp_path / "d.hdf5",
        num_envs=1,
        progress=False,
        env_kwargs={"length": 3},
    )
    predictor = Predictor.from_checkpoint(ppo_run)
    assert data.num_episodes >= 2
    state = None
    for episode in data.episodes:
        for t, obs in enumerate(episode.observations):
            start = np.array([t == 0])
            action, state = predictor.predict(obs[None], state, start, deterministic=True)
            assert action[0] == episode.actions[t]
    policy = load_policy(ppo_run)
    first = run_policy_episodes(policy, TMAZE, episodes=6, num_envs=3, seed=5)
    again = run_policy_episodes(policy, TMAZE, episodes=6, num_envs=3, seed=5)
    assert first.returns == again.returns and first.lengths == again.lengths


@pytest.mark.slow
def test_collect_records_a_decision_transformer(dt_run: Path, tmp_path: Path) -> None:
    """A DT acts through the same protocol: collect feeds it its rewards, and replaying the
    recorded episodes through ``act`` reproduces every action."""
    data = collect_dataset(
        str(dt_run),
        "rlformer/TMaze-v0",
        40,
        tmp_path / "dt.hdf5",
        num_envs=2,
        progress=False,
        env_kwargs={"length": 4},
    )
    policy = load_policy(dt_run)
    for episode in data.episodes[:3]:
        state = policy.initial_state(1)
        reward = None
        for t, obs in enumerate(episode.observations):
            action, state = policy.act(obs[None], state, np.array([t == 0]), reward)
            assert action[0] == episode.actions[t]
            reward = episode.rewards[t : t + 1]


def _dt_policy(carry_memory: bool) -> DTPolicy:
    torch.manual_seed(0)
    core = CoreConfig(
        n_layers=2, d_model=16, n_heads=2, d_ff=32, memory_length=24, precision="fp32"
    )
    model = DecisionTransformer(state_dim=3, act_dim=3, discrete=True, core=core)
    info = PolicyInfo("dt", "dt", return_conditioned=True, default_targets=[2.0])
    return DTPolicy(
        model, np.zeros(3, np.float32), np.ones(3, np.float32), 1.0, 4, carry_memory, info=info
    )


@pytest.mark.parametrize("carry_memory", [False, True])
def test_a_dt_row_that_restarts_acts_like_a_fresh_row(carry_memory: bool) -> None:
    """Rows of one batch are independent: row 1 restarts its episode mid-way (out of step with
    row 0) and from then on acts, and computes its logits, exactly as a row of its own."""
    policy = _dt_policy(carry_memory)
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(14, 2, 3)).astype(np.float32)
    rewards = rng.integers(0, 2, size=(14, 2)).astype(np.float64)
    state, alone = policy.initial_state(2), policy.initial_state(1)
    restart = 5
    for t in range(14):
        starts = np.array([t == 0, t in (0, restart)])
        step = policy.step(obs[t], state, starts, rewards[t - 1] if t else None)
        state = step.state
        if t >= restart:
            own = policy.step(obs[t, 1:], alone, np.array([t == restart]), rewards[t - 1, 1:])
            alone = own.state
            assert step.env_actions[1] == own.env_actions[0]
            torch.testing.assert_close(step.prediction[1], own.prediction[0])
            np.testing.assert_array_equal(state.returns_to_go[1], alone.returns_to_go[0])
            if carry_memory and alone.memory is not None:
                valid = alone.memory.valid[0]
                assert torch.equal(state.memory.valid[1], valid)
                torch.testing.assert_close(
                    state.memory.hidden[:, 1][:, valid], alone.memory.hidden[:, 0][:, valid]
                )


def test_acting_never_changes_the_state_it_was_given() -> None:
    policy = _dt_policy(carry_memory=True)
    obs = np.ones((2, 3), np.float32)
    state = policy.initial_state(2)
    first, after = policy.act(obs, state, np.ones(2, bool))
    second, _ = policy.act(obs, state, np.ones(2, bool))
    np.testing.assert_array_equal(first, second)
    assert not state.valid.any() and after.valid[:, 0].all()


def test_a_dt_needs_the_reward_of_its_last_action() -> None:
    policy = _dt_policy(carry_memory=False)
    state = policy.act(np.ones((1, 3), np.float32), policy.initial_state(1), np.ones(1, bool))[1]
    with pytest.raises(ValueError, match="needs the reward of its last action"):
        policy.act(np.ones((1, 3), np.float32), state, np.zeros(1, bool))


def test_random_policy_samples_only_valid_actions_under_a_mask() -> None:
    import gymnasium as gym

    space = gym.spaces.MultiDiscrete([3, 2])
    policy = RandomPolicy(gym.spaces.Box(0, 1, (1,)), space, seed=0)
    mask = np.array([[True, False, False, False, True]] * 50)
    actions, _ = policy.act(np.zeros((50, 1)), None, np.ones(50, bool), action_mask=mask)
    assert (actions == [0, 1]).all()


def test_a_new_checkpoint_kind_registers_its_loader(ppo_run_payload: dict) -> None:
    with pytest.raises(CheckpointError, match="'toy' checkpoint, which no loaded module"):
        policy_from_payload({**ppo_run_payload, "kind": "toy"}, "toy.pt")
    seen = []

    def loader(payload: dict, name: str) -> Policy:
        seen.append(name)
        return RandomPolicy(TMAZE_SPACES[0], TMAZE_SPACES[1], 0)

    register_policy_loader("toy", loader)
    try:
        policy = policy_from_payload({**ppo_run_payload, "kind": "toy"}, "toy.pt")
        assert seen == ["toy.pt"] and isinstance(policy, Policy)
    finally:
        from rlformer.policies import registry

        registry._LOADERS.pop("toy")


def _tmaze_spaces() -> tuple:
    import gymnasium as gym

    env = gym.make(TMAZE.id, **TMAZE.kwargs)
    return env.observation_space, env.action_space


TMAZE_SPACES = _tmaze_spaces()


@pytest.fixture
def ppo_run_payload() -> dict:
    """A checkpoint payload whose weights are finite (the registry checks them first)."""
    return {"model": {"w": torch.zeros(2)}}


@pytest.mark.parametrize("torso", ["gtrxl", "gru"])
def test_a_policy_acts_as_training_does_without_running_a_critic_of_its_own(torso: str) -> None:
    """With a critic torso of its own, a policy's actions and actor memory equal the training
    step's; the critic torso never runs and its memory passes through unchanged."""
    import gymnasium as gym

    from rlformer.algos.ppo.policy import ActorCriticPolicy
    from rlformer.config.sections.model import ModelConfig
    from rlformer.networks.actor_critic import ActorCritic

    cfg = ModelConfig(torso=torso, shared_torso=False, prev_action_reward=True)
    obs_space, action_space = gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(4)
    model = ActorCritic(obs_space, action_space, cfg).eval()
    calls, step = [], model.critic_torso.step
    model.critic_torso.step = lambda *args: calls.append(1) or step(*args)  # counts its steps
    policy = ActorCriticPolicy(model, PolicyInfo("t", "ppo"))
    rng = np.random.default_rng(0)
    ours, theirs = policy.initial_state(4), model.initial_state(4)
    critic_before = ours.critic
    for t in range(6):
        obs = rng.uniform(-1, 1, (4, 3)).astype(np.float32)
        starts = np.array([t == 0, t == 0, t in (0, 3), t == 0])
        reward = rng.normal(size=4).astype(np.float32)
        acted, ours = policy.act(obs, ours, starts, None if t == 0 else reward)
        if t:
            theirs = theirs.with_reward(model.scale_rewards(reward))
        out = model.act(torch.as_tensor(obs), theirs, torch.as_tensor(starts), deterministic=True)
        theirs = out.state
        np.testing.assert_array_equal(acted, out.action.numpy())
        for mine, training in zip(ours.actor, theirs.actor, strict=True):  # Memory or h, c
            assert (mine is None) == (training is None)
            if mine is not None:
                torch.testing.assert_close(mine, training)
    assert ours.critic is critic_before
    assert len(calls) == 6  # the training steps only
