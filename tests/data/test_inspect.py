"""`rlformer dataset info`: numbers by hand, D4RL-normalised scores, and exit-2 errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from rlformer.cli import app
from rlformer.data.d4rl_format import write_d4rl
from rlformer.data.episodes import Dataset, Episode
from rlformer.data.inspect import Stats, format_summary, summarize_dataset


def _episode(rewards: list[float], terminated: bool) -> Episode:
    n = len(rewards)
    return Episode(
        observations=np.linspace(-1, 2, n * 11, dtype=np.float32).reshape(n, 11),
        actions=np.full((n, 3), 0.5, np.float32),
        rewards=np.asarray(rewards, np.float32),
        terminated=terminated,
        truncated=not terminated,
    )


def _hopper() -> Dataset:
    episodes = [_episode([1.0, 2.0], True), _episode([10.0, 0.0, 5.0], False)]
    return Dataset(episodes, "test", {"env_id": "Hopper-v5"})


def test_summary_numbers_by_hand() -> None:
    summary = summarize_dataset(_hopper())
    assert (summary.episodes, summary.terminated_episodes, summary.transitions) == (2, 1, 5)
    assert summary.returns == Stats(3.0, 9.0, 15.0)
    assert summary.lengths == Stats(2.0, 2.5, 3.0)
    assert summary.observation.shape == (11,) and summary.observation.dtype == "float32"
    assert (summary.observation.low, summary.observation.high) == (-1.0, 2.0)
    assert summary.action.shape == (3,) and summary.action.low == summary.action.high == 0.5
    # D4RL Hopper: random -20.272305, expert 3234.3.
    span = 3234.3 + 20.272305
    assert summary.normalized is not None
    assert summary.normalized.min == pytest.approx(100 * (3 + 20.272305) / span)
    assert summary.normalized.max == pytest.approx(100 * (15 + 20.272305) / span)
    text = format_summary(summary)
    assert "episodes      2 (1 terminated, 1 truncated or cut off)" in text
    assert "returns       min 3.00  mean 9.00  max 15.00" in text
    assert "observations  shape (11,) dtype float32 range [-1, 2]" in text
    assert "normalized    min 0.7  mean 0.9  max 1.1" in text


def test_no_normalized_line_without_references() -> None:
    data = Dataset([_episode([1.0], True)], "test", {"env_id": "CartPole-v1"})
    assert summarize_dataset(data).normalized is None
    assert "normalized" not in format_summary(summarize_dataset(data))


def test_info_cli_prints_the_summary_and_turns_bad_files_into_exit_2(tmp_path: Path) -> None:
    runner = CliRunner()
    good = tmp_path / "hopper.hdf5"
    data = _hopper()
    write_d4rl(good, data.episodes, data.metadata)
    result = runner.invoke(app, ["dataset", "info", str(good)])
    assert result.exit_code == 0, result.output
    assert "transitions   5" in result.stdout and "env           Hopper-v5" in result.stdout
    (tmp_path / "bad.hdf5").write_text("not hdf5")
    for spec, message in [
        (str(tmp_path / "bad.hdf5"), "not a readable HDF5 file"),
        (str(tmp_path / "missing.hdf5"), "dataset file not found; record one with"),
        ("minari:nothing/here-v0", "not found locally (looked in"),
    ]:
        result = runner.invoke(app, ["dataset", "info", spec], env={"MINARI_DATASETS_PATH": "/n"})
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith("error: ") and message in result.stderr
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
