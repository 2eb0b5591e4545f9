"""``dt.condition_on_return: false``: the DT's own network as a behaviour-cloning baseline.

The returns-to-go input is zeroed inside the model, so every path that runs the model (training,
acting, evaluation sweeps, export) reads the setting from the saved config; ODT refuses it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rlformer.config import ConfigError, load_config
from rlformer.core import CoreConfig
from rlformer.networks.decision_transformer import DecisionTransformer
from rlformer.runs.checkpoints import CheckpointError
from rlformer.runs.loop import build_algorithm
from rlformer.runs.training import train
from tests.algos.test_odt_runs import TINY_DT


def _dt(condition_on_return: bool, memory_length: int = 36) -> DecisionTransformer:
    torch.manual_seed(0)
    core = CoreConfig(
        n_layers=2, d_model=32, n_heads=2, d_ff=64, memory_length=memory_length, precision="fp32"
    )
    return DecisionTransformer(
        state_dim=3, act_dim=4, discrete=True, core=core, condition_on_return=condition_on_return
    ).eval()


def _window(steps: int = 6) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(1)
    states = torch.randn(2, steps, 3, generator=g)
    actions = torch.randint(0, 4, (2, steps), generator=g)
    rtg = torch.randn(2, steps, 1, generator=g)
    return states, actions, rtg, torch.arange(steps).expand(2, steps)


@torch.no_grad()
def test_without_return_conditioning_the_returns_to_go_never_reach_the_actions() -> None:
    states, actions, rtg, timesteps = _window()
    other = rtg * 7.0 + 3.0
    conditioned, cloning = _dt(True), _dt(False)
    assert (
        conditioned(states, actions, rtg, timesteps).action_preds
        - conditioned(states, actions, other, timesteps).action_preds
    ).abs().max() > 1e-4
    preds = cloning(states, actions, rtg, timesteps).action_preds
    assert torch.equal(preds, cloning(states, actions, other, timesteps).action_preds)
    # The same weights and tokens: exactly the conditioned model shown zero returns.
    zeros = conditioned(states, actions, torch.zeros_like(rtg), timesteps).action_preds
    assert torch.equal(preds, zeros)
    assert sum(p.numel() for p in cloning.parameters()) == sum(
        p.numel() for p in conditioned.parameters()
    )


@torch.no_grad()
def test_a_memory_dt_without_return_conditioning_ignores_returns_in_its_memory_too() -> None:
    states, actions, rtg, timesteps = _window(12)
    model = _dt(False)

    def second_window(returns: torch.Tensor) -> torch.Tensor:
        first = model(states[:, :6], actions[:, :6], returns[:, :6], timesteps[:, :6])
        return model(
            states[:, 6:], actions[:, 6:], returns[:, 6:], timesteps[:, 6:], memory=first.memory
        ).action_preds

    assert torch.equal(second_window(rtg), second_window(-5.0 * rtg))


def test_the_setting_reaches_the_model_of_a_dt_and_a_memory_dt(tmaze_dt: list[str]) -> None:
    base = tmaze_dt
    assert load_config(None, base).dt.condition_on_return  # the default: a DT
    for extra in ([], ["dt.memory_segments=2", "dt.core.memory_length=12"]):
        cfg = load_config(None, [*base, "dt.condition_on_return=false", *extra])
        assert not build_algorithm(cfg).model.condition_on_return


def test_an_online_dt_refuses_behaviour_cloning_in_one_line(walks: Path, tmp_path: Path) -> None:
    env = ["env.id=rlformer/TMaze-v0", "env.kwargs.length=4", f"dt.dataset={walks}", *TINY_DT]
    with pytest.raises(ConfigError) as refused:
        load_config(None, ["algo=odt", *env, "dt.condition_on_return=false"])
    message = str(refused.value)
    assert "dt.condition_on_return: false" in message and "algo dt" in message
    assert len(message.splitlines()) == 1
    # Nor does it fine-tune a behaviour-cloning checkpoint, which never read a return.
    runs = [f"run.root={tmp_path}", "run.progress=false", "eval.episodes=0"]
    cloning = ["algo=dt", *env, *runs, "dt.train_steps=5", "dt.condition_on_return=false"]
    run_dir = train(load_config(None, cloning)).run_dir
    online = load_config(None, ["algo=odt", *env, *runs, f"odt.init_from={run_dir}"])
    with pytest.raises(CheckpointError, match="behaviour-cloning DT"):
        build_algorithm(online)


@pytest.mark.slow
def test_behaviour_cloning_trains_and_evaluates_through_the_cli(tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            [sys.executable, "-m", "rlformer.cli", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert out.returncode == 0, out.stderr
        return out

    data = tmp_path / "cartpole.hdf5"
    cli("collect", "--env", "CartPole-v1", "--steps", "600", "--num-envs", "4", "--out", str(data))
    sets = [
        "algo=dt",
        "env.id=CartPole-v1",
        f"dt.dataset={data}",
        *TINY_DT,
        "dt.train_steps=10",
        "dt.condition_on_return=false",
        "dt.target_returns=[500]",
        "eval.episodes=2",
        f"run.root={tmp_path / 'runs'}",
    ]
    cli("train", *[item for s in sets for item in ("--set", s)])
    (run_dir,) = list((tmp_path / "runs").iterdir())
    assert "target_500/return_mean" in json.loads((run_dir / "eval.json").read_text())
    # The saved config carries the setting into evaluation and export: every target of a sweep
    # plays the same episodes (same env seeds, greedy actions).
    cli("export", str(run_dir), "--out", "exported")
    for agent in (str(run_dir), "exported"):
        out = f"{Path(agent).name}.json"
        cli("eval", agent, "--target-return", "10,500", "--episodes", "3", "--json", out)
        reports = json.loads((tmp_path / out).read_text())["reports"]
        assert [r["target_return"] for r in reports] == [10.0, 500.0]
        low, high = ([e["return"] for e in r["episodes_detail"]] for r in reports)
        assert low == high
