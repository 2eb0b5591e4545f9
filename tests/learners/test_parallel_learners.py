"""Data-parallel PPO learners and gradient accumulation give the one-learner update.

Every minibatch's loss is normalised over the whole minibatch (advantage statistics included),
so splitting its env rows into chunks (``learner.accumulate``) or over replicas
(``learner.num_learners``) changes float rounding only. The replicas run as Ray actors in a
gloo process group; a lost or hung replica stops the run at once with one line, and the
checkpoint it leaves resumes with any number of learners.
"""

from __future__ import annotations

import copy
import os
import signal
import time
from pathlib import Path

import pytest
import torch

from rlformer.algos.ppo.algorithm import build_model, load_agent
from rlformer.algos.ppo.data_parallel import ParallelPPOLearner
from rlformer.algos.ppo.learner import PPOLearner
from rlformer.algos.ppo.shards import ShardedPPOLearner
from rlformer.config import TrainConfig
from rlformer.learners.learner_group import GroupMember, LearnerError, LearnerGroup
from rlformer.rollout.collector import LocalCollector
from rlformer.rollout.fragment import Fragment
from rlformer.runs.training import RunFailed, resume, train
from tests.learners.test_ppo_memory import _config
from tests.reliability.tiny import tiny_config

TORSOS = {  # the LSTM run also merges observation statistics into every replica's normaliser
    "gtrxl": {},
    "lstm": {"model.torso": "lstm", "model.recurrent_hidden": "32", "model.normalize_obs": "true"},
}
PARALLEL = ["learner.num_learners=2", "learner.cpus_per_learner=0.5", "learner.timeout_s=60"]


def _fragment(torso: str, **extra: str) -> tuple[TrainConfig, torch.nn.Module, Fragment]:
    """A config, a fresh model and one real T-Maze fragment of 6 env rows it sampled."""
    torch.manual_seed(0)
    cfg = _config("rlformer/TMaze-v0", **TORSOS[torso], **extra)
    model = build_model(cfg)
    collector = LocalCollector(cfg)
    try:
        return cfg, model, collector.collect(model.state_dict(), 0)
    finally:
        collector.close()


def _one_learner_update(cfg: TrainConfig, model: torch.nn.Module, fragment: Fragment, k: int):
    args = (copy.deepcopy(model), cfg.ppo, torch.device("cpu"), 3)
    learner = PPOLearner(*args) if k == 1 else ShardedPPOLearner(*args, accumulate=k)
    return learner, learner.update(fragment)


def _assert_same_update(a: PPOLearner, b, metrics_a: dict, metrics_b: dict) -> None:
    """Weights and normaliser statistics tensor by tensor, Adam's state, the RNG and metrics."""
    for (name, x), y in zip(
        a.model.state_dict().items(), b.model.state_dict().values(), strict=True
    ):
        torch.testing.assert_close(y, x, rtol=1e-5, atol=1e-6, msg=name)
    state_a, state_b = a.state_dict(), b.state_dict()
    assert state_a["iteration"] == state_b["iteration"] == 1
    assert torch.equal(state_a["generator"], state_b["generator"])
    torch.testing.assert_close(state_b["optimizer"], state_a["optimizer"], rtol=1e-4, atol=1e-9)
    assert metrics_a.keys() == metrics_b.keys()
    for key, value in metrics_a.items():
        assert metrics_b[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key


@pytest.mark.parametrize("torso", list(TORSOS))
def test_accumulated_chunks_give_the_one_chunk_update(torso: str) -> None:
    cfg, model, fragment = _fragment(torso)
    one, metrics_one = _one_learner_update(cfg, model, fragment, k=1)
    # 3 rows per minibatch: 2 chunks of 2 and 1 rows, 3 chunks of one row each.
    for k in (2, 3):
        chunked, metrics = _one_learner_update(cfg, model, fragment, k=k)
        _assert_same_update(one, chunked, metrics_one, metrics)


def test_accumulation_leaves_a_non_finite_minibatch_to_skip(monkeypatch) -> None:
    """A NaN in one chunk's loss skips the whole minibatch step, as with one chunk."""
    from rlformer.algos.ppo import learner as ppo_module

    cfg, model, fragment = _fragment("gtrxl", **{"run.nonfinite": "skip"})
    real, calls = ppo_module.ppo_loss, []

    def nan_in_second_call(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - ppo_loss's
        loss, metrics = real(*args, **kwargs)
        calls.append(1)
        return (loss * float("nan"), metrics) if len(calls) == 2 else (loss, metrics)

    monkeypatch.setattr(ppo_module, "ppo_loss", nan_in_second_call)
    learner = ShardedPPOLearner(
        model, cfg.ppo, torch.device("cpu"), 3, nonfinite="skip", accumulate=2
    )
    before = copy.deepcopy(model.state_dict())
    metrics = learner.update(fragment)
    assert metrics["nonfinite/skipped_minibatches"] == 1.0  # chunks 1-2 are minibatch 1
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())


# ------------------------------------------------------------------ on Ray


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize(("torso", "k"), [("gtrxl", 1), ("lstm", 1), ("gtrxl", 2)])
def test_two_learners_give_the_one_learner_update(local_ray: None, torso: str, k: int) -> None:
    # 6 env rows, 2 minibatches of 3: the replicas take 2 and 1 rows of each (in k chunks).
    cfg, model, fragment = _fragment(torso, **dict(p.split("=") for p in PARALLEL))
    one, metrics_one = _one_learner_update(cfg, model, fragment, k=1)
    cfg = cfg.model_copy(update={"learner": cfg.learner.model_copy(update={"accumulate": k})})
    two = ParallelPPOLearner(copy.deepcopy(model), cfg, torch.device("cpu"), 3)
    two.start()
    try:
        metrics_two = two.update(fragment)
        _assert_same_update(one, two, metrics_one, metrics_two)
    finally:
        two.close()


class _Member(GroupMember):
    """A group member that sums a tensor with the others, or dies or hangs instead."""

    def reduce(self, fault: str) -> float:
        if fault == "exit":
            os._exit(1)
        if fault == "hang":
            time.sleep(600)
        if fault == "idle":  # no collective: the hung member is the only one late
            return 0.0
        value = torch.ones(1)
        torch.distributed.all_reduce(value)
        return float(value)


def _group(timeout_s: float) -> LearnerGroup:
    return LearnerGroup(_Member, (), size=2, cpus=0.5, gpus=0, timeout_s=timeout_s)


@pytest.mark.ray
@pytest.mark.slow
def test_a_member_lost_in_a_collective_stops_the_group_at_once(local_ray: None) -> None:
    group = _group(timeout_s=120)
    assert group.call("reduce", ("",)) == [2.0, 2.0]
    started = time.monotonic()
    # Rank 0 waits in the all-reduce for rank 1, which dies: no waiting for the gloo timeout.
    with pytest.raises(LearnerError) as failure:
        group.call("reduce", [("",), ("exit",)])
    assert time.monotonic() - started < 60
    assert str(failure.value).startswith("learner 1 of 2 was lost during reduce (")
    assert "\n" not in str(failure.value) and group.actors == []


@pytest.mark.ray
@pytest.mark.slow
def test_a_member_that_hangs_stops_the_group_after_the_timeout(local_ray: None) -> None:
    group = _group(timeout_s=3)
    started = time.monotonic()
    with pytest.raises(LearnerError, match=r"^learner 1 of 2 did not finish reduce within "):
        group.call("reduce", [("idle",), ("hang",)])
    assert time.monotonic() - started < 30 and group.actors == []


def _weights(run_dir: Path) -> dict[str, torch.Tensor]:
    model, _, _ = load_agent(run_dir)
    return model.state_dict()


@pytest.mark.ray
@pytest.mark.slow
def test_a_killed_learner_ends_the_run_and_one_learner_resumes_it(
    tmp_path: Path, local_ray: None, monkeypatch
) -> None:
    steps = ["ppo.total_steps=256", "run.checkpoint_every=1"]  # 4 iterations of 64 steps
    reference = train(tiny_config(tmp_path / "one", *steps))
    started: list[ParallelPPOLearner] = []
    real_start = ParallelPPOLearner.start

    def recording_start(self: ParallelPPOLearner) -> None:
        real_start(self)
        started.append(self)

    def kill_a_learner(iteration: int, metrics: dict) -> None:
        if iteration == 2:  # after its checkpoint
            assert started[0].group is not None
            os.kill(started[0].group.process_ids()[1], signal.SIGKILL)

    monkeypatch.setattr(ParallelPPOLearner, "start", recording_start)
    cfg = tiny_config(tmp_path / "two", *steps, *PARALLEL)
    with pytest.raises(RunFailed) as failure:
        train(cfg, on_iteration=kill_a_learner)
    message = str(failure.value)
    assert message.startswith("learner 1 of 2 was lost during begin (") and "\n" not in message
    assert "keeps its checkpoints up to the last good one" in message
    (run_dir,) = (tmp_path / "two").iterdir()
    # The two-learner checkpoint resumes with one learner and ends where the one-learner run did.
    result = resume(run_dir, ["learner.num_learners=1"])
    assert result.iterations == reference.iterations == 4
    one, resumed = _weights(reference.run_dir), _weights(run_dir)
    for name, value in one.items():
        torch.testing.assert_close(resumed[name], value, rtol=1e-4, atol=1e-5, msg=name)


# Memoryless policies top out at 50% on T-Maze; this short run solves length 3 (seeds 0-3 with
# one learner: 100%).
TMAZE_RUN = [
    "ppo.total_steps=8192",
    "ppo.learning_rate=0.002",
    "model.normalize_reward=false",
    "eval.episodes=20",
]
TMAZE_SUCCESS = 0.9


@pytest.mark.ray
@pytest.mark.slow
def test_two_learners_solve_tmaze_in_a_short_run(tmp_path: Path, local_ray: None) -> None:
    """A whole short run, not one update: the T-Maze memory is learnt with two learners as
    with one (whose updates they equal, above), and the final greedy evaluation shows it."""
    two = train(tiny_config(tmp_path / "two", *TMAZE_RUN, *PARALLEL))
    assert two.evaluation is not None
    assert two.evaluation["success_rate"] >= TMAZE_SUCCESS, two.evaluation
