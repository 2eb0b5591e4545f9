"""Data the DT and ODT tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlformer.data.d4rl_format import write_d4rl
from rlformer.data.synthetic import tmaze_walks
from tests.algos.test_odt_runs import TINY_DT


@pytest.fixture(scope="module")
def walks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Passive T-Maze walks (corridor 4) that turn towards the cue 3 times in 4."""
    path = tmp_path_factory.mktemp("data") / "walks.hdf5"
    write_d4rl(path, tmaze_walks(4, 40, seed=0, p_correct=0.75), {"env_id": "rlformer/TMaze-v0"})
    return path


@pytest.fixture
def tmaze_dt(walks: Path, tmp_path: Path) -> list[str]:
    """Overrides for a tiny offline DT on the walks, writing its runs under ``tmp_path``."""
    return [
        "algo=dt",
        "env.id=rlformer/TMaze-v0",
        "env.kwargs.length=4",
        f"dt.dataset={walks}",
        *TINY_DT,
        f"run.root={tmp_path}",
    ]
