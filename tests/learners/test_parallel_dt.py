"""Decision Transformer steps split into chunks of windows or over learner processes equal the
one-learner step: each share's loss is normalised over the whole batch's real steps, so padded
windows weigh as in one batch, and a memory DT's consecutive windows stay with their row."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from rlformer.algos.dt.algorithm import DT
from rlformer.algos.dt.data_parallel import ParallelDTLearner
from rlformer.algos.dt.learner import DTLearner
from rlformer.algos.dt.shards import ShardedDTLearner
from rlformer.config import TrainConfig, load_config
from rlformer.data.d4rl_format import write_d4rl
from rlformer.data.synthetic import tmaze_walks
from rlformer.runs.checkpoints import newest_readable_checkpoint
from rlformer.runs.training import resume, train

LENGTH, CONTEXT = 8, 3
SEGMENTS = [0, 4]  # a plain DT (left-padded windows); a memory DT whose 4th window is padding
PARALLEL = ["learner.num_learners=2", "learner.cpus_per_learner=0.5"]


def _setup(tmp_path: Path, segments: int, *extra: str) -> tuple[TrainConfig, DT, list]:
    """A small DT config on T-Maze walks, its algorithm and three sampled batches of 6 rows."""
    data = tmp_path / "walks.hdf5"
    write_d4rl(data, tmaze_walks(LENGTH, 40, seed=0, p_correct=0.5), {})
    cfg = load_config(
        None,
        [
            "algo=dt",
            "env.id=rlformer/TMaze-v0",
            f"env.kwargs.length={LENGTH}",
            f"dt.dataset={data}",
            f"dt.context={CONTEXT}",
            "dt.batch_size=6",
            "dt.warmup_steps=2",
            "dt.learning_rate=0.001",
            f"dt.memory_segments={segments}",
            "dt.core.n_layers=2",
            "dt.core.d_model=32",
            "dt.core.d_ff=64",
            "dt.core.dropout=0.0",  # the replicas draw other dropout masks than one learner
            f"dt.core.memory_length={3 * (LENGTH + 1)}",
            f"run.root={tmp_path}",
            *extra,
        ],
    )
    algo = DT(cfg, torch.device("cpu"))
    batches = [algo.sample_windows(algo.sampler) for _ in range(3)]
    assert any(not bool(b.mask.all()) for b in (batches[0] if segments else batches))  # padding
    return cfg, algo, batches


def _assert_same_steps(a: DTLearner, b, metrics_a: list[dict], metrics_b: list[dict]) -> None:
    for (name, x), y in zip(
        a.model.state_dict().items(), b.model.state_dict().values(), strict=True
    ):
        torch.testing.assert_close(y, x, rtol=1e-5, atol=1e-5, msg=name)
    state_a, state_b = a.state_dict(), b.state_dict()
    assert state_a["schedule"] == state_b["schedule"] and state_a["step"] == state_b["step"] == 3
    torch.testing.assert_close(state_b["optimizer"], state_a["optimizer"], rtol=1e-4, atol=1e-9)
    for step_a, step_b in zip(metrics_a, metrics_b, strict=True):
        assert step_a.keys() == step_b.keys()
        for key, value in step_a.items():
            assert step_b[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key


def _weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return newest_readable_checkpoint(run_dir, trust=False)[1]["model"]


def _one_learner(cfg: TrainConfig, algo: DT, batches: list, k: int = 1):
    args = (copy.deepcopy(algo.model), cfg.dt, torch.device("cpu"))
    learner = DTLearner(*args) if k == 1 else ShardedDTLearner(*args, accumulate=k)
    return learner, [learner.update(batch) for batch in batches]


@pytest.mark.parametrize("segments", SEGMENTS)
def test_accumulated_windows_give_the_one_chunk_step(tmp_path: Path, segments: int) -> None:
    cfg, algo, batches = _setup(tmp_path, segments)
    one, metrics_one = _one_learner(cfg, algo, batches)
    chunked, metrics = _one_learner(cfg, algo, batches, k=4)  # chunks of 2, 2, 1 and 1 rows
    _assert_same_steps(one, chunked, metrics_one, metrics)


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("segments", SEGMENTS)
def test_two_learners_give_the_one_learner_step(
    tmp_path: Path, local_ray: None, segments: int
) -> None:
    cfg, algo, batches = _setup(tmp_path, segments, *PARALLEL)
    one, metrics_one = _one_learner(cfg, algo, batches)
    two = ParallelDTLearner(copy.deepcopy(algo.model), cfg, torch.device("cpu"))
    two.start()
    try:
        metrics_two = [two.update(batch) for batch in batches]
        two.sync()
        _assert_same_steps(one, two, metrics_one, metrics_two)
    finally:
        two.close()


@pytest.mark.ray
@pytest.mark.slow
def test_a_two_learner_run_resumes_with_one_learner(tmp_path: Path, local_ray: None) -> None:
    run = ["dt.log_every=2", "run.checkpoint_every=1", "eval.episodes=0", "run.progress=false"]
    one_cfg, _, _ = _setup(tmp_path / "one", 0, "dt.train_steps=6", *run)
    reference = train(one_cfg)
    two_cfg, _, _ = _setup(tmp_path / "two", 0, "dt.train_steps=4", *run, *PARALLEL)
    first = train(two_cfg)
    assert first.iterations == 2
    result = resume(first.run_dir, ["dt.train_steps=6", "learner.num_learners=1"])
    assert result.iterations == reference.iterations == 3
    one, resumed = _weights(reference.run_dir), _weights(result.run_dir)
    for name, value in one.items():
        torch.testing.assert_close(resumed[name], value, rtol=1e-4, atol=1e-5, msg=name)
