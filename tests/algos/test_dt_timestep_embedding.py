"""``dt.timestep_embedding: false``: a DT without an absolute clock.

The timestep input is zeroed inside the model, so every path that runs it (training, acting,
export, serving) reads the setting from the saved config, and an online DT fine-tunes only a
checkpoint with the same setting. The memory benchmark uses it so that a plain DT cannot read
what lies before its window from the step number."""

from __future__ import annotations

import pytest
import torch

from rlformer.config import load_config
from rlformer.core import CoreConfig
from rlformer.networks.decision_transformer import DecisionTransformer
from rlformer.policies.registry import load_policy
from rlformer.runs.checkpoints import CheckpointError
from rlformer.runs.loop import build_algorithm
from rlformer.runs.training import train


def _dt(timestep_embedding: bool) -> DecisionTransformer:
    torch.manual_seed(0)
    core = CoreConfig(n_layers=2, d_model=32, n_heads=2, d_ff=64, memory_length=36)
    return DecisionTransformer(
        state_dim=3, act_dim=4, discrete=True, core=core, timestep_embedding=timestep_embedding
    ).eval()


@torch.no_grad()
def test_without_the_embedding_the_step_number_never_reaches_the_actions() -> None:
    g = torch.Generator().manual_seed(1)
    states = torch.randn(2, 12, 3, generator=g)
    actions = torch.randint(0, 4, (2, 12), generator=g)
    rtg = torch.randn(2, 12, 1, generator=g)
    early, late = torch.arange(12).expand(2, 12), torch.arange(12).expand(2, 12) + 40
    clock, no_clock = _dt(True), _dt(False)

    def preds(model: DecisionTransformer, timesteps: torch.Tensor) -> torch.Tensor:
        return model(states, actions, rtg, timesteps).action_preds

    assert (preds(clock, early) - preds(clock, late)).abs().max() > 1e-4
    assert torch.equal(preds(no_clock, early), preds(no_clock, late))
    # The same weights: exactly the model with a clock shown step 0 throughout.
    assert torch.equal(preds(no_clock, late), preds(clock, torch.zeros_like(late)))

    def second_window(timesteps: torch.Tensor) -> torch.Tensor:  # a memory DT's next window
        first = no_clock(states[:, :6], actions[:, :6], rtg[:, :6], timesteps[:, :6])
        return no_clock(
            states[:, 6:], actions[:, 6:], rtg[:, 6:], timesteps[:, 6:], memory=first.memory
        ).action_preds

    assert torch.equal(second_window(early), second_window(late))


def test_the_setting_reaches_training_the_saved_policy_and_online_fine_tuning(
    tmaze_dt: list[str],
) -> None:
    base = [*tmaze_dt, "run.progress=false", "eval.episodes=0"]
    assert load_config(None, base).dt.timestep_embedding  # the default: the DT paper's clock
    memory = ["dt.memory_segments=2", "dt.core.memory_length=12"]
    cfg = load_config(None, [*base, *memory, "dt.timestep_embedding=false"])
    assert not build_algorithm(cfg).model.timestep_embedding
    run_dir = train(load_config(None, [*base, "dt.train_steps=5", "dt.timestep_embedding=false"]))
    policy = load_policy(run_dir.run_dir)
    assert not policy.model.timestep_embedding
    online = ["algo=odt", *base[1:], f"odt.init_from={run_dir.run_dir}"]
    with pytest.raises(CheckpointError, match="dt.timestep_embedding is False there"):
        build_algorithm(load_config(None, online))
    refit = load_config(None, [*online, "dt.timestep_embedding=false"])
    assert not build_algorithm(refit).model.timestep_embedding
