"""Generalised Advantage Estimation over time-major fragments.

GAE (Schulman et al. 2016): ``delta_t = r_t + gamma * V(s_{t+1}) * (1 - done_t) - V(s_t)`` and
``A_t = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}``. An episode that ended by its time limit
(truncated, not terminated) still has a future: its final observation's value is added to the
reward as ``gamma * V(s_final)`` (as stable-baselines3 does), and the recursion is cut at the
boundary like any other episode end because the next row belongs to a new episode.
"""

from __future__ import annotations

import numpy as np


def compute_gae(
    rewards: np.ndarray,
    values: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    truncation_values: np.ndarray,
    last_value: np.ndarray,
    gamma: float,
    gae_lambda: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and returns (advantage + value), arrays ``[F, E]``.

    Args:
        rewards, values, terminated, truncated, truncation_values: ``[F, E]`` as in a Fragment.
        last_value: ``[E]`` value of the observation that follows the fragment.
    """
    length = rewards.shape[0]
    done = terminated | truncated
    # Time-limit bootstrap: only for truncations that are not also terminal.
    bootstrapped = rewards + gamma * truncation_values * (truncated & ~terminated)
    advantages = np.zeros_like(values, dtype=np.float32)
    next_adv = np.zeros_like(last_value, dtype=np.float32)
    next_value = last_value.astype(np.float32)
    for t in reversed(range(length)):
        alive = 1.0 - done[t].astype(np.float32)
        delta = bootstrapped[t] + gamma * next_value * alive - values[t]
        next_adv = delta + gamma * gae_lambda * alive * next_adv
        advantages[t] = next_adv
        next_value = values[t]
    return advantages, advantages + values
