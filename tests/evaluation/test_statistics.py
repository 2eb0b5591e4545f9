"""Evaluation statistics against values computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from rlformer.evaluation.statistics import bootstrap_ci, interquartile_mean, summarize_scores


def test_iqm_when_quarter_is_whole() -> None:
    # n = 8: drop 2 lowest and 2 highest -> mean(3, 4, 5, 6) = 4.5
    assert interquartile_mean([8, 1, 7, 2, 6, 3, 5, 4]) == pytest.approx(4.5)


def test_iqm_fractional_boundaries() -> None:
    # n = 6: keep [1.5, 4.5): half of x[1], x[2], x[3], half of x[4] -> (0.5*2 + 3 + 4 + 0.5*50)/3
    assert interquartile_mean([1, 2, 3, 4, 50, 100]) == pytest.approx((1 + 3 + 4 + 25) / 3)
    # Repeating every score does not change the IQM.
    scores = [1, 2, 3, 4, 50, 100]
    assert interquartile_mean(scores * 2) == pytest.approx(interquartile_mean(scores))


def test_iqm_ignores_outliers_that_move_the_mean() -> None:
    base = [10.0] * 7 + [1e6]
    assert interquartile_mean(base) == pytest.approx(10.0)
    assert np.mean(base) > 1e5


def test_bootstrap_ci_brackets_and_shrinks() -> None:
    rng = np.random.default_rng(1)
    small = rng.normal(5.0, 1.0, size=20)
    large = rng.normal(5.0, 1.0, size=2000)
    lo_s, hi_s = bootstrap_ci(small, np.mean)
    lo_l, hi_l = bootstrap_ci(large, np.mean)
    assert lo_s < small.mean() < hi_s
    assert lo_l < 5.0 < hi_l
    assert hi_l - lo_l < (hi_s - lo_s) / 4  # width ~ 1/sqrt(n)
    # For the mean, the bootstrap CI is close to the normal-theory one: 1.96 * std / sqrt(n).
    assert (hi_l - lo_l) / 2 == pytest.approx(1.96 * large.std() / np.sqrt(large.size), rel=0.15)


def test_constant_scores_have_degenerate_ci() -> None:
    assert bootstrap_ci([3.0, 3.0, 3.0], np.mean) == (3.0, 3.0)


def test_summary_fields() -> None:
    s = summarize_scores(
        [0.0, 1.0, 2.0, 3.0], successes=[0, 1, 1, 1], normalizer=lambda r: 100 * r / 3.0
    )
    assert s.mean == pytest.approx(1.5)
    assert s.std == pytest.approx(np.std([0, 1, 2, 3]))
    assert s.median == pytest.approx(1.5)
    assert s.iqm == pytest.approx(1.5)
    assert s.success_rate == pytest.approx(0.75)
    assert s.normalized_mean == pytest.approx(50.0)
    with pytest.raises(ValueError):
        summarize_scores([])
