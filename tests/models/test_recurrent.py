"""LSTM / GRU torsos: training on sequences equals stepping, and episode starts forget."""

from __future__ import annotations

import pytest
import torch

from rlformer.networks.recurrent import RecurrentState, RecurrentTorso


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("layers", [1, 2])
def test_sequence_equals_stepping_across_episode_starts(kind: str, layers: int) -> None:
    torch.manual_seed(0)
    torso = RecurrentTorso(5, kind, hidden=8, layers=layers)
    batch, steps = 3, 12
    x = torch.randn(batch, steps, 5)
    starts = torch.zeros(batch, steps, dtype=torch.bool)
    starts[0, 4] = starts[1, 4] = starts[2, 9] = starts[1, 0] = True
    state = torso.initial_state(batch)
    state = RecurrentState(*(None if t is None else torch.randn_like(t) for t in state))

    stepped, running = [], state
    for t in range(steps):
        out, running = torso.step(x[:, t], running, starts[:, t])
        stepped.append(out)
    whole, final = torso.sequence(x, state, starts)
    torch.testing.assert_close(whole, torch.stack(stepped, dim=1), rtol=0, atol=1e-6)
    torch.testing.assert_close(final.h, running.h, rtol=0, atol=1e-6)


@pytest.mark.parametrize("layers", [1, 2])
def test_unfused_lstm_step_equals_the_fused_step(layers: int) -> None:
    torch.manual_seed(0)
    torso = RecurrentTorso(5, "lstm", hidden=8, layers=layers)
    with torch.no_grad():  # biases start near zero; make them matter
        for name, parameter in torso.rnn.named_parameters():
            if name.startswith("bias"):
                parameter.normal_()
    x = torch.randn(3, 5)
    state = torso.initial_state(3)
    state = RecurrentState(*(None if t is None else torch.randn_like(t) for t in state))
    start = torch.tensor([False, True, False])
    fused, fused_state = torso.step(x, state, start)
    unfused, unfused_state = torso.step_unfused(x, state, start)
    torch.testing.assert_close(unfused, fused, rtol=0, atol=1e-6)
    torch.testing.assert_close(unfused_state.h, fused_state.h, rtol=0, atol=1e-6)
    torch.testing.assert_close(unfused_state.c, fused_state.c, rtol=0, atol=1e-6)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_episode_start_forgets_and_memory_carries(kind: str) -> None:
    torch.manual_seed(0)
    torso = RecurrentTorso(2, kind, hidden=8, layers=1)
    first = torch.tensor([[[1.0, 0.0], [0.0, 0.0]], [[-1.0, 0.0], [0.0, 0.0]]])  # [2, 2, 2]
    no_start = torch.zeros(2, 2, dtype=torch.bool)
    out, _ = torso.sequence(first, torso.initial_state(2), no_start)
    assert not torch.allclose(out[0, 1], out[1, 1]), "the second step must remember the first"
    reset = no_start.clone()
    reset[:, 1] = True
    out, _ = torso.sequence(first, torso.initial_state(2), reset)
    torch.testing.assert_close(out[0, 1], out[1, 1], rtol=0, atol=0)


def test_state_rows_index_and_concatenate() -> None:
    torso = RecurrentTorso(3, "lstm", hidden=4, layers=2)
    state = RecurrentState(torch.randn(2, 5, 4), torch.randn(2, 5, 4))
    part = state.index(torch.tensor([1, 3]))
    assert part.h.shape == (2, 2, 4) and torch.equal(part.c[:, 1], state.c[:, 3])
    merged = RecurrentState.cat([state.index(slice(0, 2)), state.index(slice(2, 5))])
    assert torch.equal(merged.h, state.h) and torch.equal(merged.c, state.c)
    assert torso.initial_state(7).c.shape == (2, 7, 4)
