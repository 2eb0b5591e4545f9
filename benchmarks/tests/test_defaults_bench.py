"""The fully observed tasks' peers: SB3 PPO as rl-baselines3-zoo tunes it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import defaults  # noqa: E402


def test_the_zoo_agent_builds_the_zoo_entry_with_its_wrappers_and_network() -> None:
    from stable_baselines3.common.vec_env import VecNormalize

    hopper, entry = defaults.sb3_ppo("hopper", 0, zoo=True)
    assert entry is defaults.ZOO_PPO["hopper"]
    env = hopper.get_env()
    assert isinstance(env, VecNormalize) and env.num_envs == 1
    assert env.gamma == hopper.gamma == 0.999  # returns normalised with the agent's discount
    assert (hopper.n_steps, hopper.batch_size, hopper.n_epochs) == (512, 32, 5)
    assert hopper.learning_rate == pytest.approx(9.80828e-05)
    assert hopper.policy.activation_fn is torch.nn.ReLU and not hopper.policy.ortho_init
    assert torch.all(hopper.policy.log_std.detach() == -2.0)
    widths = [
        m.out_features for m in hopper.policy.mlp_extractor.policy_net if hasattr(m, "out_features")
    ]
    assert widths == [256, 256]
    lander, _ = defaults.sb3_ppo("lunarlander", 0, zoo=True)
    assert lander.get_env().num_envs == 16 and not isinstance(lander.get_env(), VecNormalize)
    assert (lander.n_steps, lander.batch_size, lander.gae_lambda) == (1024, 64, 0.98)
    plain, none = defaults.sb3_ppo("lunarlander", 0, zoo=False)
    assert none == {} and plain.n_steps == 2048  # SB3's own defaults
    with pytest.raises(SystemExit, match="no rl-baselines3-zoo entry here for cartpole"):
        defaults.sb3_ppo("cartpole", 0, zoo=True)


def test_a_row_without_its_budget_counts_as_the_task_s_own() -> None:
    row = defaults.Result("hopper", "sb3_ppo", 0, 501_760, 1.0, 0.0, None, [])
    assert defaults.budget(row) == 500_000
    row.budget = 1_000_000
    assert defaults.budget(row) == 1_000_000
