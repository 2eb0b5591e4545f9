"""scripts/make_hopper_datasets.py end to end with tiny sizes: three loadable D4RL-style files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlformer.data import load_dataset

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "make_hopper_datasets.py"


@pytest.mark.slow
def test_recipe_writes_expert_medium_and_medium_replay(tmp_path: Path) -> None:
    sizes = [
        "--expert-steps=400",
        "--learning-starts=100",
        "--eval-every=200",
        "--eval-episodes=1",
        "--medium-score=0",  # reached at the first evaluation (Hopper returns are > -20)
        "--dataset-steps=160",
        "--device=cpu",
    ]
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--out-dir", str(tmp_path), *sizes],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "medium level reached" in result.stdout
    for name in ("sac_expert.zip", "sac_medium.zip", "sac_evaluations.json", "timings.json"):
        assert (tmp_path / name).is_file()
    expert = load_dataset(tmp_path / "hopper-expert.hdf5")
    medium = load_dataset(tmp_path / "hopper-medium.hdf5")
    replay = load_dataset(tmp_path / "hopper-medium-replay.hdf5")
    assert expert.num_transitions == medium.num_transitions == 160
    assert expert.metadata["env_id"] == "Hopper-v5" and "sac_expert" in expert.metadata["policy"]
    # The replay file is SAC's buffer when the first evaluation (step 200) ran.
    assert replay.num_transitions in (199, 200)
    assert replay.metadata["sac_train_steps"] == 200
    for episode in replay.episodes:
        np.testing.assert_array_equal(episode.observations[1:], episode.next_observations[:-1])
        assert np.abs(episode.actions).max() <= 1.0
    assert sum(e.terminated for e in replay.episodes) >= 1  # an untrained hopper falls over
