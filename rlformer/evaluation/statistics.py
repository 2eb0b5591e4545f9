"""Robust summaries of per-episode scores: IQM and percentile-bootstrap confidence intervals.

The interquartile mean (mean of the middle 50% of scores) is what Agarwal et al. 2021
("Deep RL at the edge of the statistical precipice") recommend over the mean or median for few
runs: less sensitive to outliers than the mean, more statistically efficient than the median.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np


def interquartile_mean(scores: Sequence[float] | np.ndarray) -> float:
    """Mean of the scores between the 25th and 75th percentile, with fractional end weights.

    With n scores sorted ascending, exactly n/4 scores are dropped from each end; when n/4 is not
    an integer, the boundary scores get fractional weight (so the IQM of n and of the same
    scores repeated twice agree).
    """
    x = np.sort(np.asarray(scores, dtype=np.float64))
    n = x.size
    if n == 0:
        raise ValueError("interquartile_mean of no scores")
    # Weight of each score = length of its unit interval [i, i+1) that lies inside [n/4, 3n/4].
    lower, upper = n / 4.0, 3.0 * n / 4.0
    index = np.arange(n)
    weights = np.clip(np.minimum(index + 1, upper) - np.maximum(index, lower), 0.0, 1.0)
    return float((weights * x).sum() / weights.sum())


def bootstrap_ci(
    scores: Sequence[float] | np.ndarray,
    statistic: Callable[[np.ndarray], float],
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of ``statistic`` over episodes."""
    x = np.asarray(scores, dtype=np.float64)
    if x.size < 2:
        value = statistic(x)
        return value, value
    rng = np.random.default_rng(seed)
    samples = x[rng.integers(0, x.size, size=(resamples, x.size))]
    stats = np.array([statistic(row) for row in samples])
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    return float(low), float(high)


@dataclass
class ScoreSummary:
    """Statistics of one task's episode returns (and success rate when reported)."""

    episodes: int
    mean: float
    std: float
    median: float
    iqm: float
    mean_ci: tuple[float, float]
    iqm_ci: tuple[float, float]
    success_rate: float | None = None
    # The same statistics of the per-episode normalised scores (D4RL: 0 random, 100 expert).
    normalized_mean: float | None = None
    normalized_iqm: float | None = None
    normalized_mean_ci: tuple[float, float] | None = None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def summarize_scores(
    returns: Sequence[float],
    successes: Sequence[float] | None = None,
    normalizer: Callable[[float], float] | None = None,
    seed: int = 0,
) -> ScoreSummary:
    """Mean, std, median, IQM with bootstrap 95% CIs; success rate and normalised scores if given.

    ``normalizer`` maps one episode's return to a normalised score; the normalised mean, IQM and
    mean CI are computed from the per-episode normalised scores with the same bootstrap draws.
    """
    x = np.asarray(returns, dtype=np.float64)
    if x.size == 0:
        raise ValueError("no episodes to summarise")
    normalized: dict[str, object] = {}
    if normalizer is not None:
        z = np.array([normalizer(float(r)) for r in x])
        normalized = {
            "normalized_mean": float(z.mean()),
            "normalized_iqm": interquartile_mean(z),
            "normalized_mean_ci": bootstrap_ci(z, np.mean, seed=seed),
        }
    return ScoreSummary(
        episodes=int(x.size),
        mean=float(x.mean()),
        std=float(x.std()),
        median=float(np.median(x)),
        iqm=interquartile_mean(x),
        mean_ci=bootstrap_ci(x, np.mean, seed=seed),
        iqm_ci=bootstrap_ci(x, interquartile_mean, seed=seed),
        success_rate=float(np.mean(successes)) if successes else None,
        **normalized,  # type: ignore[arg-type]
    )
