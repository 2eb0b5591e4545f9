"""Normalised scores, target-return parsing, suite files and learning-curve plotting."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rlformer.config import ConfigError
from rlformer.evaluation.plots import moving_average, plot_learning_curves
from rlformer.evaluation.report import d4rl_normalizer, parse_target_returns
from rlformer.evaluation.statistics import summarize_scores
from rlformer.evaluation.suites import load_suite

HOPPER_RANDOM, HOPPER_EXPERT = -20.272305, 3234.3


def test_d4rl_normalised_statistics_by_hand() -> None:
    returns = [HOPPER_RANDOM, HOPPER_EXPERT, 0.5 * (HOPPER_RANDOM + HOPPER_EXPERT), HOPPER_EXPERT]
    summary = summarize_scores(returns, normalizer=d4rl_normalizer("Hopper-v5"))
    # Scores 0, 100, 50, 100: mean 62.5; IQM keeps the middle two sorted scores (50, 100).
    assert summary.normalized_mean == pytest.approx(62.5)
    assert summary.normalized_iqm == pytest.approx(75.0)
    low, high = summary.normalized_mean_ci
    assert 0.0 <= low <= 62.5 <= high <= 100.0
    # The normalised CI is the raw CI mapped through the same affine map.
    scale = 100.0 / (HOPPER_EXPERT - HOPPER_RANDOM)
    assert low == pytest.approx((summary.mean_ci[0] - HOPPER_RANDOM) * scale)
    assert d4rl_normalizer("CartPole-v1") is None


def test_parse_target_returns_lists_and_ranges() -> None:
    assert parse_target_returns("3600, 1800") == [3600.0, 1800.0]
    assert parse_target_returns("0:100:5,150") == [0.0, 25.0, 50.0, 75.0, 100.0, 150.0]
    assert parse_target_returns("-1:1:3") == [-1.0, 0.0, 1.0]
    for bad in ("abc", "0:100", "0:100:1", "1:2:x"):
        with pytest.raises(ValueError, match="START:STOP:COUNT"):
            parse_target_returns(bad)
    with pytest.raises(ValueError, match="no numbers"):
        parse_target_returns(",")


def test_suite_errors_name_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("name: s\ntasks: []\n")
    with pytest.raises(ConfigError, match=r"s\.yaml: tasks: .*at least 1"):
        load_suite(path)
    path.write_text("name: s\nepisodes: 0\ntasks:\n  - {env: CartPole-v1}\n")
    with pytest.raises(ConfigError, match="episodes: got 0"):
        load_suite(path)
    path.write_text("name: s\ntasks:\n  - {env: CartPole-v1}\n  - {env: CartPole-v1}\n")
    with pytest.raises(ConfigError, match="repeated: CartPole-v1"):
        load_suite(path)
    with pytest.raises(ConfigError, match="not found"):
        load_suite(tmp_path / "missing.yaml")


def test_moving_average_is_trailing() -> None:
    values = np.array([1.0, 3.0, 5.0, 7.0])
    np.testing.assert_allclose(moving_average(values, 2), [1.0, 2.0, 4.0, 6.0])
    np.testing.assert_allclose(moving_average(values, 3), [1.0, 2.0, 3.0, 5.0])
    np.testing.assert_array_equal(moving_average(values, 1), values)


def _fake_run(root: Path, name: str, rows: list[dict[str, float]]) -> Path:
    run = root / name
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def test_learning_curves_pick_the_main_metric_and_reject_unknown_ones(tmp_path: Path) -> None:
    import matplotlib.image

    rows = [{"step": 64 * i, "rollout/return_mean": float(i), "loss/total": 1.0} for i in range(5)]
    a = _fake_run(tmp_path, "a", rows)
    b = _fake_run(tmp_path, "b", rows[:3])
    out = plot_learning_curves([a, b], tmp_path / "c.png", smooth=2)
    image = matplotlib.image.imread(out)
    assert image.shape[0] > 100 and image.std() > 0
    both = plot_learning_curves([a], tmp_path / "d.png", ["rollout/return_mean", "loss/total"])
    assert matplotlib.image.imread(both).shape[0] > image.shape[0]  # two panels are taller
    with pytest.raises(ValueError, match="not logged; these are: \\['loss/total'"):
        plot_learning_curves([a], tmp_path / "e.png", ["eval/return"])
    with pytest.raises(FileNotFoundError, match="no metrics.jsonl"):
        plot_learning_curves([tmp_path], tmp_path / "f.png")
