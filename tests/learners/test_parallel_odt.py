"""Online Decision Transformer steps split into chunks of windows or over learner processes equal
the one-learner step, temperature included: every loss term and the entropy that steers
``alpha`` are normalised over the whole batch's real steps, so each replica takes the same
temperature step. Discrete actions here: their entropy is exact, where a continuous policy's is
a one-sample estimate that other shares draw differently."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from rlformer.algos.odt.algorithm import ODT
from rlformer.algos.odt.data_parallel import ParallelODTLearner, make_odt_learner
from rlformer.algos.odt.learner import ODTLearner, ShardedODTLearner
from rlformer.config import ConfigError, TrainConfig, load_config
from rlformer.data.d4rl_format import write_d4rl
from rlformer.data.synthetic import tmaze_walks
from rlformer.runs.checkpoints import newest_readable_checkpoint
from rlformer.runs.directory import read_metrics
from rlformer.runs.training import resume, train

LENGTH, CONTEXT = 4, 3
PARALLEL = ["learner.num_learners=2", "learner.cpus_per_learner=0.5", "learner.timeout_s=120"]


def _config(tmp_path: Path, segments: int, *extra: str) -> TrainConfig:
    """A small ODT on T-Maze walks (corridor 4): pretraining, then online with local workers."""
    data = tmp_path / "walks.hdf5"
    if not data.exists():
        write_d4rl(data, tmaze_walks(LENGTH, 40, seed=0, p_correct=0.5), {})
    return load_config(
        None,
        [
            "algo=odt",
            "env.id=rlformer/TMaze-v0",
            f"env.kwargs.length={LENGTH}",
            f"dt.dataset={data}",
            f"dt.context={CONTEXT}",
            "dt.batch_size=6",
            "dt.warmup_steps=2",
            "dt.learning_rate=0.001",
            "dt.log_every=2",
            f"dt.memory_segments={segments}",
            "dt.target_returns=[1]",
            "dt.core.n_layers=1",
            "dt.core.d_model=16",
            "dt.core.d_ff=32",
            "dt.core.dropout=0.0",  # the replicas draw other dropout masks than one learner
            f"dt.core.memory_length={3 * (LENGTH + 1)}",
            "odt.temperature_learning_rate=0.01",  # a visible alpha step
            "rollout.num_workers=1",
            "rollout.envs_per_worker=2",
            "eval.episodes=0",
            f"run.root={tmp_path}",
            "run.progress=false",
            *extra,
        ],
    )


def _batches(cfg: TrainConfig) -> tuple[ODT, list]:
    """The algorithm and three batches of 6 window rows, some padded."""
    algo = ODT(cfg, torch.device("cpu"))
    batches = [algo.sample_windows(algo.sampler) for _ in range(3)]
    flat = [b for batch in batches for b in (batch if isinstance(batch, list) else [batch])]
    assert any(not bool(b.mask.all()) for b in flat)
    return algo, batches


def _one_learner(cfg: TrainConfig, algo: ODT, batches: list, k: int = 1):
    args = (copy.deepcopy(algo.model), cfg.dt, cfg.odt, torch.device("cpu"))
    learner = ODTLearner(*args) if k == 1 else ShardedODTLearner(*args, accumulate=k)
    return learner, [learner.update(batch) for batch in batches]


def _assert_same_steps(a: ODTLearner, b, metrics_a: list[dict], metrics_b: list[dict]) -> None:
    """Weights tensor by tensor, both optimisers, the schedule, alpha and every metric."""
    for (name, x), y in zip(
        a.model.state_dict().items(), b.model.state_dict().values(), strict=True
    ):
        torch.testing.assert_close(y, x, rtol=1e-5, atol=1e-5, msg=name)
    state_a, state_b = a.state_dict(), b.state_dict()
    assert state_a["schedule"] == state_b["schedule"] and state_a["step"] == state_b["step"] == 3
    torch.testing.assert_close(state_b["optimizer"], state_a["optimizer"], rtol=1e-4, atol=1e-9)
    torch.testing.assert_close(state_b["log_alpha"], state_a["log_alpha"], rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(
        state_b["alpha_optimizer"], state_a["alpha_optimizer"], rtol=1e-4, atol=1e-9
    )
    assert float(state_a["log_alpha"]) != pytest.approx(-2.302585, abs=1e-4)  # alpha moved
    for step_a, step_b in zip(metrics_a, metrics_b, strict=True):
        assert step_a.keys() == step_b.keys() and "policy/alpha" in step_a
        for key, value in step_a.items():
            assert step_b[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key


@pytest.mark.parametrize("segments", [0, 2])
def test_accumulated_windows_give_the_one_chunk_odt_step(tmp_path: Path, segments: int) -> None:
    cfg = _config(tmp_path, segments)
    algo, batches = _batches(cfg)
    one, metrics_one = _one_learner(cfg, algo, batches)
    chunked, metrics = _one_learner(cfg, algo, batches, k=4)  # chunks of 2, 2, 1 and 1 rows
    _assert_same_steps(one, chunked, metrics_one, metrics)


def test_the_learner_section_picks_the_odt_learner(tmp_path: Path) -> None:
    model = ODT(_config(tmp_path, 0), torch.device("cpu")).model
    cpu = torch.device("cpu")
    kinds = {
        (): ODTLearner,
        ("learner.accumulate=2",): ShardedODTLearner,
        tuple(PARALLEL): ParallelODTLearner,
        ("learner.resources={learner_node: 1}",): ParallelODTLearner,  # one learner, placed
    }
    for overrides, kind in kinds.items():
        assert type(make_odt_learner(model, _config(tmp_path, 0, *overrides), cpu)) is kind
    with pytest.raises(ConfigError, match="needs at least 8 windows per batch; dt.batch_size=6"):
        _config(tmp_path, 0, "learner.num_learners=2", "learner.accumulate=4")


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("segments", [0, 2])
def test_two_odt_learners_give_the_one_learner_step(
    tmp_path: Path, local_ray: None, segments: int
) -> None:
    cfg = _config(tmp_path, segments, *PARALLEL)
    algo, batches = _batches(cfg)
    one, metrics_one = _one_learner(cfg, algo, batches)
    two = ParallelODTLearner(copy.deepcopy(algo.model), cfg, torch.device("cpu"))
    two.start()
    try:
        metrics_two = [two.update(batch) for batch in batches]
        two.sync()
        _assert_same_steps(one, two, metrics_one, metrics_two)
    finally:
        two.close()


def _weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return newest_readable_checkpoint(run_dir, trust=False)[1]["model"]


@pytest.mark.ray
@pytest.mark.slow
def test_a_two_learner_odt_run_goes_online_and_resumes_with_one_learner(
    tmp_path: Path, local_ray: None
) -> None:
    """Pretraining and online iterations with two learners (the rollout workers playing the
    replicas' synced weights), resumed by one learner, end where a one-learner run does."""
    run = ["odt.pretrain_steps=4", "odt.updates_per_iteration=2", "run.checkpoint_every=1"]
    reference = train(_config(tmp_path / "one", 0, *run, "odt.online_steps=24"))
    first = train(_config(tmp_path / "two", 0, *run, "odt.online_steps=8", *PARALLEL))
    assert first.iterations < reference.iterations
    assert any("rollout/env_steps" in row for row in read_metrics(first.run_dir))  # online
    result = resume(first.run_dir, ["odt.online_steps=24", "learner.num_learners=1"])
    assert result.iterations == reference.iterations
    one, resumed = _weights(reference.run_dir), _weights(result.run_dir)
    for name, value in one.items():
        torch.testing.assert_close(resumed[name], value, rtol=1e-4, atol=1e-5, msg=name)
