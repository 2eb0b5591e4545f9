"""GAE against values computed by hand from the recursion's definition."""

from __future__ import annotations

import numpy as np
import pytest

from rlformer.learners.returns import compute_gae


def _column(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32)[:, None]


def test_gae_single_episode_matches_hand_computation() -> None:
    gamma, lam = 0.9, 0.8
    rewards = _column(1.0, 0.0, 2.0)
    values = _column(0.5, 1.0, 1.5)
    false = np.zeros((3, 1), bool)
    adv, ret = compute_gae(
        rewards,
        values,
        false,
        false,
        np.zeros((3, 1), np.float32),
        np.array([2.0], np.float32),
        gamma,
        lam,
    )
    d2 = 2.0 + 0.9 * 2.0 - 1.5  # 2.3
    d1 = 0.0 + 0.9 * 1.5 - 1.0  # 0.35
    d0 = 1.0 + 0.9 * 1.0 - 0.5  # 1.4
    a2 = d2
    a1 = d1 + 0.72 * a2
    a0 = d0 + 0.72 * a1
    np.testing.assert_allclose(adv[:, 0], [a0, a1, a2], rtol=1e-6)
    np.testing.assert_allclose(ret[:, 0], [a0 + 0.5, a1 + 1.0, a2 + 1.5], rtol=1e-6)


def test_gae_terminal_cuts_bootstrap_and_recursion() -> None:
    gamma, lam = 0.99, 0.95
    rewards = _column(1.0, 1.0)
    values = _column(0.3, 0.7)
    terminated = np.array([[True], [False]])
    false = np.zeros((2, 1), bool)
    adv, _ = compute_gae(
        rewards,
        values,
        terminated,
        false,
        np.zeros((2, 1), np.float32),
        np.array([5.0], np.float32),
        gamma,
        lam,
    )
    # Step 0 ends its episode: no value of step 1 and no advantage of step 1 leaks into it.
    assert adv[0, 0] == pytest.approx(1.0 - 0.3)
    assert adv[1, 0] == pytest.approx(1.0 + 0.99 * 5.0 - 0.7)


def test_gae_truncation_bootstraps_from_final_observation_value() -> None:
    gamma, lam = 0.99, 0.95
    rewards = _column(1.0, 1.0)
    values = _column(0.3, 0.7)
    truncated = np.array([[True], [False]])
    false = np.zeros((2, 1), bool)
    trunc_values = np.array([[4.0], [0.0]], np.float32)
    adv, _ = compute_gae(
        rewards, values, false, truncated, trunc_values, np.array([5.0], np.float32), gamma, lam
    )
    assert adv[0, 0] == pytest.approx(1.0 + 0.99 * 4.0 - 0.3)
    # A step that is both terminated and truncated is terminal: no bootstrap.
    adv_t, _ = compute_gae(
        rewards, values, truncated, truncated, trunc_values, np.array([5.0], np.float32), gamma, lam
    )
    assert adv_t[0, 0] == pytest.approx(1.0 - 0.3)


def test_gae_columns_are_independent() -> None:
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=(6, 3)).astype(np.float32)
    values = rng.normal(size=(6, 3)).astype(np.float32)
    terminated = rng.random((6, 3)) < 0.3
    false = np.zeros((6, 3), bool)
    zeros = np.zeros((6, 3), np.float32)
    last = rng.normal(size=3).astype(np.float32)
    adv, _ = compute_gae(rewards, values, terminated, false, zeros, last, 0.97, 0.9)
    for e in range(3):
        single, _ = compute_gae(
            rewards[:, e : e + 1],
            values[:, e : e + 1],
            terminated[:, e : e + 1],
            false[:, e : e + 1],
            zeros[:, e : e + 1],
            last[e : e + 1],
            0.97,
            0.9,
        )
        np.testing.assert_allclose(adv[:, e], single[:, 0], rtol=1e-6)
