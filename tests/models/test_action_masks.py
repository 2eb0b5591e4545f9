"""Action masks in the distributions and the actor-critic: no masked action is ever taken,
and log-probabilities and entropies are those of the masked distribution."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlformer.config import ModelConfig
from rlformer.core import CoreConfig
from rlformer.networks.actor_critic import ActorCritic
from rlformer.rollout.action_masks import ActionMaskError, mask_size, rows_without_valid_action

SPACES = {
    "discrete": gym.spaces.Discrete(6),
    "multidiscrete": gym.spaces.MultiDiscrete([3, 4, 2]),
}
_MODELS: dict[str, ActorCritic] = {}


def _model(kind: str) -> ActorCritic:
    if kind not in _MODELS:
        torch.manual_seed(0)
        core = CoreConfig(n_layers=1, d_model=16, n_heads=2, d_ff=32, memory_length=4)
        obs = gym.spaces.Box(-1.0, 1.0, (5,), np.float32)
        _MODELS[kind] = ActorCritic(obs, SPACES[kind], ModelConfig(core=core))
    return _MODELS[kind]


def _random_masks(kind: str, rows: int, seed: int, density: float) -> np.ndarray:
    """Random masks with at least one valid action per component."""
    rng = np.random.default_rng(seed)
    space = SPACES[kind]
    sizes = [int(n) for n in np.atleast_1d(getattr(space, "nvec", [getattr(space, "n", 0)]))]
    parts = []
    for size in sizes:
        part = rng.random((rows, size)) < density
        part[np.arange(rows), rng.integers(0, size, rows)] = True
        parts.append(part)
    return np.concatenate(parts, axis=1)


@settings(max_examples=40, deadline=None)
@given(
    kind=st.sampled_from(sorted(SPACES)),
    seed=st.integers(0, 10_000),
    density=st.floats(0.0, 0.9),
    deterministic=st.booleans(),
)
def test_no_masked_action_is_ever_taken(
    kind: str, seed: int, density: float, deterministic: bool
) -> None:
    model = _model(kind)
    rows = 64
    masks = _random_masks(kind, rows, seed, density)
    obs = torch.as_tensor(np.random.default_rng(seed).normal(size=(rows, 5)), dtype=torch.float32)
    out = model.act(
        obs,
        model.initial_state(rows),
        torch.ones(rows, dtype=torch.bool),
        deterministic,
        torch.Generator().manual_seed(seed),
        torch.as_tensor(masks),
    )
    actions = out.action.numpy().reshape(rows, -1)
    offsets = np.cumsum([0, *np.atleast_1d(getattr(SPACES[kind], "nvec", [6]))[:-1]])
    chosen = actions + offsets  # index into the concatenated mask
    assert np.take_along_axis(masks, chosen, axis=1).all()
    assert torch.isfinite(out.log_prob).all()


def test_masked_log_probs_and_entropy_are_those_of_the_renormalised_distribution() -> None:
    model = _model("discrete")
    obs = torch.zeros(1, 5)
    mask = torch.tensor([[True, False, True, False, False, False]])
    state, starts = model.initial_state(1), torch.ones(1, dtype=torch.bool)
    out = model.act(obs, state, starts, False, torch.Generator().manual_seed(0), mask)
    params = model.policy_head(
        model.actor_torso.step(model._features(obs, None, None, starts), state.actor, starts)[0]
    )
    p = torch.softmax(params[0, [0, 2]], -1)
    evaluated = model.evaluate(
        obs[:, None], out.action[:, None], state, starts[:, None], None, mask[:, None]
    )
    chosen = 0 if int(out.action) == 0 else 1
    torch.testing.assert_close(evaluated.log_prob[0, 0], p[chosen].log())
    torch.testing.assert_close(evaluated.entropy[0, 0], -(p * p.log()).sum())


def test_masks_need_discrete_actions_and_the_right_size() -> None:
    with pytest.raises(ActionMaskError, match="Discrete and MultiDiscrete"):
        mask_size(gym.spaces.Box(-1, 1, (2,)))
    model = _model("discrete")
    with pytest.raises(ValueError, match="needs 6 entries"):
        model.act(
            torch.zeros(1, 5),
            model.initial_state(1),
            torch.ones(1, dtype=torch.bool),
            True,
            None,
            torch.ones(1, 4, dtype=torch.bool),
        )


def test_rows_without_a_valid_action_are_found_per_component() -> None:
    space = SPACES["multidiscrete"]
    masks = np.ones((3, 9), bool)
    masks[1, 3:7] = False  # the second component of row 1 allows nothing
    assert rows_without_valid_action(masks, space).tolist() == [1]
