"""Decision Transformer on the shared core: token order, masking, padding, memory, overfitting."""

from __future__ import annotations

import pytest
import torch

from rlformer.core import CoreConfig
from rlformer.networks.decision_transformer import DecisionTransformer, dt_loss


def _dt(discrete: bool = False, memory_length: int = 30) -> DecisionTransformer:
    torch.manual_seed(0)
    core = CoreConfig(
        n_layers=2, d_model=32, n_heads=2, d_ff=64, memory_length=memory_length, precision="fp32"
    )
    return DecisionTransformer(state_dim=3, act_dim=2, discrete=discrete, core=core).eval()


def _batch(batch: int = 2, steps: int = 6, discrete: bool = False):
    g = torch.Generator().manual_seed(1)
    states = torch.randn(batch, steps, 3, generator=g)
    actions = (
        torch.randint(0, 2, (batch, steps), generator=g)
        if discrete
        else torch.randn(batch, steps, 2, generator=g)
    )
    rtg = torch.randn(batch, steps, 1, generator=g)
    timesteps = torch.arange(steps).expand(batch, steps)
    return states, actions, rtg, timesteps


@pytest.mark.parametrize("discrete", [False, True])
def test_prediction_of_a_t_never_sees_a_t_or_later(discrete: bool) -> None:
    dt = _dt(discrete)
    states, actions, rtg, timesteps = _batch(discrete=discrete)
    with torch.no_grad():
        base = dt(states, actions, rtg, timesteps).action_preds
        t = 3
        changed_actions = actions.clone()
        changed_actions[:, t:] = (1 - actions[:, t:]) if discrete else actions[:, t:] + 5.0
        changed_future = dt(states, changed_actions, rtg, timesteps).action_preds
        # a_t's prediction ignores a_t and all later actions...
        torch.testing.assert_close(base[:, : t + 1], changed_future[:, : t + 1])
        # ...but does see s_t and R_t (token order R, s, a).
        moved_state = states.clone()
        moved_state[:, t] += 1.0
        assert (
            dt(moved_state, actions, rtg, timesteps).action_preds[:, t] - base[:, t]
        ).abs().max() > 1e-4
        moved_rtg = rtg.clone()
        moved_rtg[:, t] += 1.0
        assert (
            dt(states, actions, moved_rtg, timesteps).action_preds[:, t] - base[:, t]
        ).abs().max() > 1e-4
        # and a_{t-1} influences step t.
        prev = actions.clone()
        prev[:, t - 1] = (1 - actions[:, t - 1]) if discrete else actions[:, t - 1] + 5.0
        assert (dt(states, prev, rtg, timesteps).action_preds[:, t] - base[:, t]).abs().max() > 1e-4


def test_left_padding_is_invisible() -> None:
    dt = _dt()
    states, actions, rtg, timesteps = _batch(batch=1, steps=4)
    pad = 3
    padded = [
        torch.cat([torch.randn(1, pad, *x.shape[2:]) * 50, x], 1) for x in (states, actions, rtg)
    ]
    padded_t = torch.cat([torch.zeros(1, pad, dtype=torch.long), timesteps], 1)
    mask = torch.cat([torch.zeros(1, pad, dtype=torch.bool), torch.ones(1, 4, dtype=torch.bool)], 1)
    with torch.no_grad():
        plain = dt(states, actions, rtg, timesteps).action_preds
        out = dt(*padded, padded_t, mask=mask).action_preds
    torch.testing.assert_close(out[:, pad:], plain, atol=1e-5, rtol=0)


def test_memory_carries_across_windows() -> None:
    """Two consecutive windows with carried memory equal one window over both (M covers it)."""
    dt = _dt(memory_length=36)
    states, actions, rtg, timesteps = _batch(batch=2, steps=12)
    with torch.no_grad():
        whole = dt(states, actions, rtg, timesteps).action_preds
        first = dt(states[:, :6], actions[:, :6], rtg[:, :6], timesteps[:, :6])
        second = dt(
            states[:, 6:], actions[:, 6:], rtg[:, 6:], timesteps[:, 6:], memory=first.memory
        )
        fresh = dt(states[:, 6:], actions[:, 6:], rtg[:, 6:], timesteps[:, 6:]).action_preds
    torch.testing.assert_close(
        torch.cat([first.action_preds, second.action_preds], 1), whole, atol=1e-5, rtol=0
    )
    assert (second.action_preds - fresh).abs().max() > 1e-4  # memory did matter
    restart = dt(
        states[:, 6:],
        actions[:, 6:],
        rtg[:, 6:],
        timesteps[:, 6:],
        memory=first.memory,
        episode_start=torch.ones(2, dtype=torch.bool),
    ).action_preds
    torch.testing.assert_close(restart, fresh.detach(), atol=1e-5, rtol=0)


@pytest.mark.parametrize("discrete", [False, True])
def test_overfits_a_tiny_dataset(discrete: bool) -> None:
    dt = _dt(discrete).train()
    states, actions, rtg, timesteps = _batch(batch=4, steps=5, discrete=discrete)
    if not discrete:
        actions = actions.tanh() * 0.9  # inside the tanh head's range
    mask = torch.ones(4, 5, dtype=torch.bool)
    optimizer = torch.optim.AdamW(dt.parameters(), lr=3e-3)
    for _ in range(300):
        loss = dt_loss(
            dt(states, actions, rtg, timesteps, mask).action_preds, actions, mask, discrete
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < (0.02 if discrete else 1e-3)


def test_loss_ignores_padded_steps() -> None:
    preds = torch.tensor([[[0.0, 0.0], [1.0, 1.0]]])
    target = torch.tensor([[[9.0, 9.0], [1.0, 1.0]]])
    mask = torch.tensor([[False, True]])
    assert float(dt_loss(preds, target, mask, discrete=False)) == 0.0
    logits = torch.tensor([[[5.0, -5.0], [-5.0, 5.0]]])
    assert float(dt_loss(logits, torch.tensor([[1, 1]]), mask, discrete=True)) < 1e-3
