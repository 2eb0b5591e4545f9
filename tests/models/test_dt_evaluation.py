"""Return-conditioned evaluation bookkeeping, and DT training end to end through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from rlformer.algos.dt.evaluation import run_return_conditioned
from rlformer.algos.dt.policy import DTPolicy
from rlformer.config import EnvConfig
from rlformer.core import CoreConfig
from rlformer.networks.decision_transformer import DecisionTransformer


def _recording_policy(
    carry_memory: bool, context: int = 4, history: int | None = None
) -> tuple[DTPolicy, list[dict]]:
    torch.manual_seed(0)
    core = CoreConfig(
        n_layers=1, d_model=16, n_heads=1, d_ff=32, memory_length=3 * context, precision="fp32"
    )
    model = DecisionTransformer(state_dim=4, act_dim=2, discrete=True, core=core)
    calls: list[dict] = []

    def record(module, args, kwargs):  # noqa: ANN001, ANN202
        states, actions, rtg, timesteps, mask = args[:5]
        calls.append(
            {
                "rtg": rtg[..., 0].clone(),
                "timesteps": timesteps.clone(),
                "mask": mask.clone(),
                "memory": kwargs.get("memory") is not None,
            }
        )

    model.register_forward_pre_hook(record, with_kwargs=True)
    policy = DTPolicy(
        model,
        np.zeros(4, np.float32),
        np.ones(4, np.float32),
        return_scale=2.0,
        context=context,
        carry_memory=carry_memory,
        history=history,
    )
    return policy, calls


def test_plain_dt_decrements_return_to_go_and_keeps_last_k_steps() -> None:
    policy, calls = _recording_policy(carry_memory=False)
    env = EnvConfig(id="CartPole-v1", max_episode_steps=7)
    result = run_return_conditioned(policy, env, target_return=10.0, episodes=2)
    assert result.lengths == [7, 7] and result.returns == [7.0, 7.0]
    assert len(calls) == 7
    # CartPole pays 1 per step: at step t the model sees R_t = (10 - t) / 2 for the last K steps.
    step5 = calls[5]
    np.testing.assert_allclose(step5["rtg"][0].numpy(), [(10 - t) / 2 for t in (2, 3, 4, 5)])
    np.testing.assert_array_equal(step5["timesteps"][0].numpy(), [2, 3, 4, 5])
    # Early steps are left-padded.
    np.testing.assert_array_equal(calls[1]["mask"][0].numpy(), [False, False, True, True])
    np.testing.assert_allclose(calls[1]["rtg"][0].numpy(), [0, 0, 5.0, 4.5])
    assert not any(c["memory"] for c in calls)


def test_shorter_acting_history_feeds_only_the_last_steps() -> None:
    # ODT's evaluation context: trained on K = 4 windows, each action sees the last 2 steps.
    policy, calls = _recording_policy(carry_memory=False, history=2)
    run_return_conditioned(policy, EnvConfig(id="CartPole-v1", max_episode_steps=6), 10.0, 1)
    assert [c["timesteps"].shape[1] for c in calls] == [2] * 6
    np.testing.assert_array_equal(calls[5]["timesteps"][0].numpy(), [4, 5])
    np.testing.assert_allclose(calls[5]["rtg"][0].numpy(), [(10 - 4) / 2, (10 - 5) / 2])
    np.testing.assert_array_equal(calls[0]["mask"][0].numpy(), [False, True])


def test_acting_history_must_fit_a_plain_dt() -> None:
    from pydantic import ValidationError

    from rlformer.algos.dt.config import DTConfig

    assert DTConfig(context=20, act_context=5).act_context == 5
    with pytest.raises(ValidationError, match=r"act_context \(21\) is longer"):
        DTConfig(context=20, act_context=21)
    with pytest.raises(ValidationError, match="memory DT"):
        DTConfig(context=20, act_context=5, memory_segments=2)
    # A memory DT acts on its whole windows even if a history is set on the policy.
    policy, _ = _recording_policy(carry_memory=True, history=2)
    assert policy.window == 4


def test_memory_dt_fills_aligned_windows_and_passes_memory_on() -> None:
    policy, calls = _recording_policy(carry_memory=True)
    run_return_conditioned(policy, EnvConfig(id="CartPole-v1", max_episode_steps=6), 10.0, 1)
    # Steps 0-3 fill window [0, 4) (right-padded while filling), then one extra call completes it
    # with the real actions to produce memory; steps 4-5 use window [4, 8) with that memory.
    masks = [c["mask"][0].tolist() for c in calls]
    assert masks[0] == [True, False, False, False]
    assert masks[3] == [True, True, True, True] and masks[4] == [True, True, True, True]
    assert masks[5] == [True, False, False, False]
    np.testing.assert_array_equal(calls[5]["timesteps"][0].numpy(), [4, 0, 0, 0])
    np.testing.assert_allclose(calls[5]["rtg"][0, 0].item(), (10 - 4) / 2)
    assert [c["memory"] for c in calls] == [False] * 4 + [False, True, True]


def _untrained_policy(env_id: str, discrete: bool, stochastic: bool) -> DTPolicy:
    import gymnasium as gym

    from rlformer.algos.dt.policy import action_bounds

    env = gym.make(env_id)
    space = env.action_space
    env.close()
    torch.manual_seed(0)
    core = CoreConfig(n_layers=1, d_model=16, n_heads=1, d_ff=32, precision="fp32")
    act_dim = int(space.n) if discrete else int(np.prod(space.shape))
    state_dim = 4 if discrete else 3
    model = DecisionTransformer(state_dim, act_dim, discrete, core, stochastic=stochastic)
    low, high = action_bounds(space)
    mean, std = np.zeros(state_dim, np.float32), np.ones(state_dim, np.float32)
    return DTPolicy(model, mean, std, 100.0, 4, False, action_low=low, action_high=high)


@pytest.mark.parametrize(
    ("env_id", "discrete", "stochastic"),
    [("Pendulum-v1", False, True), ("CartPole-v1", True, False)],
    ids=["online-dt", "discrete-dt"],
)
def test_sampled_evaluation_repeats_per_seed_and_differs_from_the_mode(
    env_id: str, discrete: bool, stochastic: bool
) -> None:
    policy = _untrained_policy(env_id, discrete, stochastic)
    env = EnvConfig(id=env_id, max_episode_steps=30)

    def returns(deterministic: bool, seed: int = 5) -> list[float]:
        run = run_return_conditioned(policy, env, -100.0, 3, seed=seed, deterministic=deterministic)
        return run.returns

    sampled = returns(False)
    assert returns(False) == sampled  # the generator is seeded with the evaluation seed
    assert returns(True) != sampled
    assert returns(True) == returns(True)


def test_a_regression_dt_refuses_to_sample() -> None:
    policy = _untrained_policy("Pendulum-v1", discrete=False, stochastic=False)
    with pytest.raises(ValueError, match="algo: odt"):
        run_return_conditioned(policy, EnvConfig(id="Pendulum-v1"), -100.0, 1, deterministic=False)


@pytest.mark.slow
def test_dt_trains_from_a_recorded_dataset_and_resumes(tmp_path: Path) -> None:
    def cli(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            [sys.executable, "-m", "rlformer.cli", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert (out.returncode == 0) == ok, out.stderr
        return out

    data = tmp_path / "pend.hdf5"
    cli("collect", "--env", "Pendulum-v1", "--steps", "800", "--out", str(data))
    common = [
        "--set",
        "algo=dt",
        "--set",
        "env.id=Pendulum-v1",
        "--set",
        f"dt.dataset={data}",
        "--set",
        "dt.context=5",
        "--set",
        "dt.batch_size=8",
        "--set",
        "dt.log_every=5",
        "--set",
        "run.checkpoint_every=2",
        "--set",
        "dt.core.n_layers=1",
        "--set",
        "dt.core.d_model=16",
        "--set",
        "dt.core.d_ff=32",
        "--set",
        "dt.core.dropout=0.0",
        "--set",
        "eval.episodes=2",
        "--set",
        "dt.target_returns=[-200,-800]",
        "--set",
        "dt.act_context=3",
        "--set",
        f"run.root={tmp_path / 'runs'}",
    ]
    cli("train", "--set", "dt.train_steps=20", *common)
    (run_dir,) = list((tmp_path / "runs").iterdir())
    evaluation = json.loads((run_dir / "eval.json").read_text())
    assert {"target_-200/return_mean", "target_-800/return_mean"} <= evaluation.keys()
    cli("train", "--resume", str(run_dir), "--set", "dt.train_steps=30")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "loss/action" in r] == [5, 10, 15, 20, 25, 30]
    from rlformer.policies import load_policy

    assert load_policy(run_dir).window == 3  # the run's act_context
    short = cli("eval", str(run_dir), "--act-context", "2", "--episodes", "2", "--json", "ac.json")
    assert "Pendulum-v1" in short.stdout
    assert len(json.loads((tmp_path / "ac.json").read_text())["reports"]) == 2
    too_long = cli("eval", str(run_dir), "--act-context", "6", ok=False)
    assert "longer than" in too_long.stderr and "at most 5" in too_long.stderr
    # A squared-error DT on continuous actions has nothing to sample: refused before any episode,
    # in evaluation as in a training config.
    sampled = cli("eval", str(run_dir), "--stochastic", ok=False)
    assert "--stochastic" in sampled.stderr and "algo: odt" in sampled.stderr
    runs_before = set((tmp_path / "runs").iterdir())
    refused = cli("train", "--set", "eval.deterministic=false", *common, ok=False)
    assert "eval.deterministic: false" in refused.stderr and "algo: odt" in refused.stderr
    assert set((tmp_path / "runs").iterdir()) == runs_before
    # Targets as a comma list, a repeated option, and space-separated (`--target-return 50 100`).
    result = cli(
        "eval",
        str(run_dir),
        "--target-return",
        "-300,-900",
        "--target-return",
        "50",
        "100",
        "--episodes",
        "2",
        "--json",
        "targets.json",
    )
    assert "-300" in result.stdout and "-900" in result.stdout and "Pendulum-v1" in result.stdout
    reports = json.loads((tmp_path / "targets.json").read_text())["reports"]
    assert [r["target_return"] for r in reports] == [-300.0, -900.0, 50.0, 100.0]

    # A sweep over a target range: one report per target, data as JSON/CSV, a PNG plot.
    cli(
        "eval",
        str(run_dir),
        "--target-return",
        "-900:-300:3",
        "--episodes",
        "2",
        "--seeds",
        "2",
        "--json",
        "sweep.json",
        "--csv",
        "sweep.csv",
        "--plot",
        "sweep.png",
    )
    sweep = json.loads((tmp_path / "sweep.json").read_text())
    reports = sweep["reports"]
    assert [r["target_return"] for r in reports] == [-900.0, -600.0, -300.0]
    for r in reports:
        returns = [row["return"] for row in r["episodes_detail"]]
        assert r["episodes"] == 4 and sorted({row["seed"] for row in r["episodes_detail"]}) == [
            0,
            1,
        ]
        assert r["mean"] == pytest.approx(np.mean(returns))
        assert r["mean_ci"][0] <= r["mean"] <= r["mean_ci"][1]
    # Different seeds start from different initial states.
    assert len({row["return"] for row in reports[0]["episodes_detail"]}) > 1
    from rlformer.data import load_dataset

    data_returns = [float(np.sum(e.rewards)) for e in load_dataset(str(data)).episodes]
    (recorded,) = sweep["dataset_returns"].values()
    assert recorded["min"] == pytest.approx(min(data_returns))
    assert recorded["max"] == pytest.approx(max(data_returns))
    assert len((tmp_path / "sweep.csv").read_text().splitlines()) == 1 + 12
    import matplotlib.image

    image = matplotlib.image.imread(tmp_path / "sweep.png")
    assert image.ndim == 3 and image.shape[0] > 100 and image.std() > 0
