"""A DT that carries memory across windows recalls what its context window cannot see.

T-Maze walks (corridor 8): the cue is shown at step 0, the turn that earns return 1 happens at
step 8, and the context window is K = 3 steps. Conditioned on return 1, a plain DT cannot see
the cue at the junction and is at chance; the memory DT must reach it through memory.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rlformer.config import load_config
from rlformer.data.d4rl_format import write_d4rl
from rlformer.data.synthetic import tmaze_walks
from rlformer.runs.training import train

LENGTH, CONTEXT = 8, 3


def _train(data: Path, root: Path, segments: int) -> float:
    cfg = load_config(
        None,
        [
            "algo=dt",
            "env.id=rlformer/TMaze-v0",
            f"env.kwargs.length={LENGTH}",
            f"dt.dataset={data}",
            f"dt.context={CONTEXT}",
            "dt.return_scale=1.0",
            "dt.batch_size=32",
            "dt.learning_rate=0.001",
            "dt.warmup_steps=50",
            "dt.train_steps=400",
            "dt.log_every=400",
            f"dt.memory_segments={segments}",
            "dt.core.n_layers=2",
            "dt.core.d_model=32",
            "dt.core.d_ff=64",
            "dt.core.dropout=0.0",
            f"dt.core.memory_length={3 * (LENGTH + 1)}",
            "dt.target_returns=[1.0]",
            "eval.episodes=60",
            f"run.root={root}",
            "run.progress=false",
        ],
    )
    return train(cfg).evaluation["target_1/success_rate"]


def test_walks_pay_for_the_cued_turn() -> None:
    walks = tmaze_walks(LENGTH, 40, seed=0, p_correct=0.5)
    assert all(len(e) == LENGTH + 1 and e.terminated for e in walks)
    for e in walks:
        cue = 1 if e.observations[0, 0] > 0.5 else 2
        assert e.rewards.sum() == float(e.actions[-1] == cue)
        assert (e.actions[:-1] == 0).all()
    assert 0 < sum(e.rewards.sum() for e in walks) < 40


@pytest.mark.slow
def test_memory_dt_recalls_a_cue_older_than_its_context(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    data = tmp_path / "walks.hdf5"
    write_d4rl(data, tmaze_walks(LENGTH, 400, seed=0, p_correct=1.0), {})
    segments = -(-(LENGTH + 1) // CONTEXT)  # windows covering a whole episode
    assert _train(data, tmp_path / "memory", segments) >= 0.95
    assert _train(data, tmp_path / "plain", 0) <= 0.75  # chance is 0.5
