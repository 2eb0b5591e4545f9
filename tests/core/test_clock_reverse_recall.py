"""The sinusoidal episode clock, trained on POPGym Autoencode's lookup (reverse recall).

At step t the answer lies at step ``2 * cards - 2 - t``: attention can only aim there if queries
know their step. The core learns the lookup supervised (no RL noise), so what is measured is the
clock's encoding alone (``benchmarks/reverse_recall.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from reverse_recall import Setup, final_accuracy  # noqa: E402


def _accuracy(encoding: str, split: bool = False) -> float:
    setup = Setup(encoding, cards=32, width=32, heads=2, lr=3e-3, split=split)
    return final_accuracy(setup, steps=150)


@pytest.mark.slow
def test_sinusoidal_clock_learns_reverse_recall_where_free_vectors_lag() -> None:
    """One linear query map serves every step with the sinusoid; free vectors learn each step
    apart, so within the same 150 steps they recall far less."""
    torch.set_num_threads(1)
    sinusoidal, learned = _accuracy("sinusoidal"), _accuracy("learned")
    assert sinusoidal >= 0.95, (sinusoidal, learned)
    assert sinusoidal - learned >= 0.15, (sinusoidal, learned)


@pytest.mark.slow
def test_sinusoidal_clock_learns_across_a_detached_segment() -> None:
    """PPO's update sees an episode's cards from the previous fragment only as detached
    memory; the lookup must still be learnable through the keys' projections alone."""
    torch.set_num_threads(1)
    assert _accuracy("sinusoidal", split=True) >= 0.95
