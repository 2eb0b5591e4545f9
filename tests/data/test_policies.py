"""Policies for `rlformer collect`: noise statistics, SB3 class detection, rlformer runs."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlformer.data.recorder import collect_dataset
from rlformer.policies import PolicyError, PolicyInfo
from rlformer.policies.sb3 import load_sb3_model, sb3_policy_module
from rlformer.policies.simple import NoisyPolicy


class _Constant:
    """A policy that always answers the same action (so every change is the noise's doing)."""

    def __init__(self, action: np.ndarray, space: gym.Space) -> None:
        self.action, self.action_space = action, space
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (1,))
        self.info = PolicyInfo("constant", "test")

    def initial_state(self, n: int, target_return: float | None = None) -> None:
        return None

    def act(self, obs, state, episode_start, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN201
        return np.stack([self.action] * len(episode_start)), state


def _draws(policy: NoisyPolicy, rounds: int, num_envs: int) -> np.ndarray:
    obs, starts = np.zeros((num_envs, 1)), np.zeros(num_envs, dtype=bool)
    return np.concatenate([policy.act(obs, None, starts)[0] for _ in range(rounds)])


def test_gaussian_noise_has_the_requested_scale_and_stays_in_bounds() -> None:
    space = gym.spaces.Box(np.array([-4, 0], np.float32), np.array([4, 1], np.float32))
    inner = _Constant(np.array([0.0, 0.5], np.float32), space)
    actions = _draws(NoisyPolicy(inner, noise=0.1, random_fraction=0.0, seed=0), 200, 50)
    # std = noise x half range: 0.1 x 4 = 0.4 and 0.1 x 0.5 = 0.05; 10k draws -> ~1% error.
    np.testing.assert_allclose(actions.std(0), [0.4, 0.05], rtol=0.04)
    np.testing.assert_allclose(actions.mean(0), [0.0, 0.5], atol=0.01)
    assert actions.dtype == np.float32
    wide = _draws(NoisyPolicy(inner, noise=2.0, random_fraction=0.0, seed=0), 20, 50)
    assert (wide >= space.low).all() and (wide <= space.high).all()


def test_random_fraction_replaces_that_share_of_box_actions() -> None:
    space = gym.spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
    inner = _Constant(np.full(3, 0.25, np.float32), space)
    actions = _draws(NoisyPolicy(inner, noise=0.0, random_fraction=0.3, seed=1), 250, 40)
    replaced = (actions != 0.25).any(axis=1)
    n = len(actions)
    assert replaced.mean() == pytest.approx(0.3, abs=3 * (0.3 * 0.7 / n) ** 0.5)
    # Replacements are uniform over the box: mean 0, variance 1/3 per dimension.
    np.testing.assert_allclose(actions[replaced].var(0), 1 / 3, rtol=0.1)


@pytest.mark.parametrize(("epsilon", "fraction"), [(0.4, 0.0), (0.0, 0.5), (0.4, 0.5)])
def test_epsilon_and_random_fraction_on_discrete_actions(epsilon: float, fraction: float) -> None:
    space = gym.spaces.Discrete(4)
    inner = _Constant(np.array(0), space)
    actions = _draws(NoisyPolicy(inner, epsilon, fraction, seed=2), 250, 40)
    # Replaced with prob 1 - (1 - eps)(1 - f); a uniform replacement differs from 0 w.p. 3/4.
    expected = (1 - (1 - epsilon) * (1 - fraction)) * 0.75
    n = len(actions)
    assert (actions != 0).mean() == pytest.approx(expected, abs=3 * (expected / n) ** 0.5)
    assert set(np.unique(actions)) <= {0, 1, 2, 3} and actions.dtype == np.int64


def _save_sb3_models(folder: Path) -> dict[str, Path]:
    from sb3_contrib import RecurrentPPO
    from stable_baselines3 import A2C, DQN, PPO, SAC, TD3

    made = {
        "PPO": PPO("MlpPolicy", "CartPole-v1", n_steps=64, device="cpu", seed=0),
        "A2C": A2C("MlpPolicy", "CartPole-v1", device="cpu", seed=0),
        "DQN": DQN("MlpPolicy", "CartPole-v1", buffer_size=64, device="cpu", seed=0),
        "SAC": SAC("MlpPolicy", "Pendulum-v1", buffer_size=64, device="cpu", seed=0),
        "TD3": TD3("MlpPolicy", "Pendulum-v1", buffer_size=64, device="cpu", seed=0),
        "RecurrentPPO": RecurrentPPO(
            "MlpLstmPolicy", "CartPole-v1", n_steps=64, device="cpu", seed=0
        ),
    }
    paths = {}
    for name, model in made.items():
        paths[name] = folder / f"{name}.zip"
        model.save(paths[name])
    return paths


def test_sb3_algorithm_is_detected_from_the_zip(tmp_path: Path) -> None:
    paths = _save_sb3_models(tmp_path)
    # A2C and PPO save the same policy class, so PPO loads both (predictions are the policy's).
    expected = {"PPO": "PPO", "A2C": "PPO", "DQN": "DQN", "SAC": "SAC", "TD3": "TD3"}
    expected["RecurrentPPO"] = "RecurrentPPO"
    for name, path in paths.items():
        assert type(load_sb3_model(path)).__name__ == expected[name], name


def test_unknown_policy_module_falls_back_to_trying_loaders(tmp_path: Path) -> None:
    from stable_baselines3 import SAC

    original = SAC("MlpPolicy", "Pendulum-v1", buffer_size=64, device="cpu", seed=0)
    original.save(tmp_path / "sac.zip")
    custom = tmp_path / "custom.zip"
    with zipfile.ZipFile(tmp_path / "sac.zip") as src, zipfile.ZipFile(custom, "w") as dst:
        for item in src.infolist():
            payload = src.read(item.filename)
            if item.filename == "data":
                data = json.loads(payload)
                data["policy_class"]["__module__"] = "my_project.policies"
                payload = json.dumps(data).encode()
            dst.writestr(item, payload)
    assert sb3_policy_module(custom) == "my_project.policies"
    loaded = load_sb3_model(custom)
    obs = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    np.testing.assert_allclose(
        loaded.predict(obs, deterministic=True)[0], original.predict(obs, deterministic=True)[0]
    )
    (tmp_path / "junk.zip").write_bytes(b"not a zip")
    with pytest.raises(PolicyError, match="not a stable-baselines3 model zip"):
        load_sb3_model(tmp_path / "junk.zip")


def _tiny_run(root: Path, kind: str = "ppo") -> Path:
    from rlformer.algos.ppo.algorithm import build_model
    from rlformer.config import TrainConfig
    from rlformer.runs.checkpoints import encode_spec, save_checkpoint

    cfg = TrainConfig.model_validate({"env": {"id": "CartPole-v1"}})
    torch.manual_seed(0)
    model = build_model(cfg)
    run_dir = root / "run"
    payload = {
        "kind": kind,
        "config": cfg.model_dump(mode="json"),
        "spec": encode_spec(model.observation_space, model.action_space),
        "model": model.state_dict(),
    }
    save_checkpoint(run_dir, 0, payload)
    return run_dir


def test_rlformer_run_policy_resets_memory_at_episode_starts(tmp_path: Path) -> None:
    from rlformer.algos.ppo.algorithm import load_agent

    run_dir = _tiny_run(tmp_path)
    data = collect_dataset(
        str(run_dir), "CartPole-v1", 120, tmp_path / "r.hdf5", num_envs=1, progress=False
    )
    assert data.num_episodes >= 2  # an untrained policy drops the pole within ~10-60 steps
    # Replay the recorded observations through the agent with the same episode starts: the
    # greedy actions must be exactly the recorded ones (memory carried within, reset between).
    model, _, _ = load_agent(run_dir)
    state = model.initial_state(1)
    for episode in data.episodes:
        for t, obs in enumerate(episode.observations):
            out = model.act(
                torch.as_tensor(obs[None]), state, torch.tensor([t == 0]), deterministic=True
            )
            state = out.state
            assert model.env_action(out.action)[0] == episode.actions[t]


def test_a_checkpoint_of_unknown_kind_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    from rlformer.runs.checkpoints import CheckpointError

    with pytest.raises(CheckpointError, match="'sac' checkpoint, which no loaded module"):
        collect_dataset(
            str(_tiny_run(tmp_path, "sac")), "CartPole-v1", 10, tmp_path / "x.hdf5", progress=False
        )
    assert not (tmp_path / "x.hdf5").exists()
