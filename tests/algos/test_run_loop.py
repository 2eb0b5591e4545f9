"""The one run loop drives any algorithm: a fourth one is a module, nothing else changes."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from rlformer.config import TrainConfig, load_config
from rlformer.config.sections.registry import register, unregister
from rlformer.config.sections.spec import AlgorithmSpec
from rlformer.runs.algorithm import (
    FINAL_EVAL_SEED_OFFSET,
    PERIODIC_EVAL_SEED_OFFSET,
    Evaluation,
    Progress,
)
from rlformer.runs.checkpoints import load_checkpoint, read_checkpoint_file, write_checkpoint_file
from rlformer.runs.directory import read_metrics
from rlformer.runs.loop import PeriodicEvaluation, run
from rlformer.runs.signals import Interrupted


class Counter:
    """A made-up algorithm: each iteration adds a random number to a running total."""

    kind = "counter"
    signal_at: int | None = None

    def __init__(self, cfg: TrainConfig, device: torch.device, resuming: bool = False) -> None:
        self.cfg = cfg
        self.resuming, self.started = resuming, False
        self.iteration = 0
        self.total = torch.zeros(())
        self.generator = torch.Generator().manual_seed(cfg.run.seed)
        self.evaluations: list[tuple[int, int, int]] = []  # (iteration, episodes, seed)

    @classmethod
    def dry_run(cls, cfg: TrainConfig) -> str:
        return "ok"

    def checkpoint_bytes(self) -> int:
        return 1024

    def start(self) -> None:
        self.started = True

    def close(self) -> None:
        pass

    def restore(self, payload: dict[str, Any], path: Path, trust: bool) -> None:
        assert self.resuming and not self.started, "restore comes before start, when resuming"
        self.iteration = payload["iteration"]
        self.total = payload["total"]
        self.generator.set_state(payload["generator"])

    def finished(self) -> bool:
        return self.iteration >= 7

    def iterate(self) -> dict[str, float]:
        self.total = self.total + torch.rand((), generator=self.generator)
        self.iteration += 1
        if self.iteration == Counter.signal_at:
            os.kill(os.getpid(), signal.SIGINT)
        return {"total": float(self.total)}

    def log_step(self) -> int:
        return 10 * self.iteration

    def progress(self) -> Progress:
        return Progress(self.iteration, 7, "iteration")

    def summary(self, metrics: dict[str, float]) -> str:
        return f"total {metrics['total']:.3f}"

    def state(self) -> dict[str, Any]:
        return {"total": self.total, "generator": self.generator.get_state()}

    # What an evaluation after iteration i scores: best after iteration 4, not at the end.
    SCORES = {2: 1.0, 4: 5.0, 5: 0.5, 6: 3.0, 7: 4.0}

    def evaluate(self, episodes: int, seed: int) -> Evaluation:
        self.evaluations.append((self.iteration, episodes, seed))
        score = Counter.SCORES.get(self.iteration, -1.0)
        return Evaluation({"total": float(self.total), "score": score}, ["evaluated"], score)


COUNTER = AlgorithmSpec(
    name="counter",
    summary="a test's counter",
    section=None,
    reads=("run", "env", "rollout", "model", "eval", "learner"),
    algorithm=f"{__name__}:Counter",
    budget_key="counter.total",
)


@pytest.fixture
def counter_algo() -> Iterator[TrainConfig]:
    register(COUNTER)
    Counter.signal_at = None
    cfg = load_config(None, ["run.progress=false", "run.checkpoint_every=3"])
    yield cfg.model_copy(update={"algo": "counter"})
    unregister("counter")


def test_loop_checkpoints_resumes_and_evaluates_a_new_algorithm(
    counter_algo: TrainConfig, tmp_path: Path
) -> None:
    straight = run(counter_algo.model_copy(update={"run": _root(counter_algo, tmp_path / "a")}))
    assert straight.iterations == 7
    steps = sorted(p.name for p in (straight.run_dir / "checkpoints").glob("*.pt"))
    assert steps == ["ckpt_000000030.pt", "ckpt_000000060.pt", "ckpt_000000070.pt"]
    payload = load_checkpoint(straight.run_dir)
    assert payload["kind"] == "counter" and payload["iteration"] == 7

    Counter.signal_at = 4
    stopped_cfg = counter_algo.model_copy(update={"run": _root(counter_algo, tmp_path / "b")})
    with pytest.raises(Interrupted) as stopped:
        run(stopped_cfg)
    assert stopped.value.exit_code == 130
    assert load_checkpoint(stopped.value.run_dir)["iteration"] == 4  # written on the signal
    Counter.signal_at = None
    resumed = run(stopped_cfg, resume_dir=stopped.value.run_dir)

    assert read_metrics(resumed.run_dir) == read_metrics(straight.run_dir)
    assert json.loads((resumed.run_dir / "eval.json").read_text()) == straight.evaluation
    assert torch.equal(load_checkpoint(resumed.run_dir)["total"], payload["total"])


def _root(cfg: TrainConfig, root: Path) -> Any:
    return cfg.run.model_copy(update={"root": str(root)})


def test_evaluations_during_training_keep_the_best_weights_across_a_resume(
    counter_algo: TrainConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """eval.every=2 over 7 iterations evaluates after 2, 4, 6 and 7 (the last), on its own
    seeds; best.pt holds iteration 4 (score 5), also when the run is stopped after 5 and
    resumed, where later evaluations score less."""
    seen: list[Counter] = []
    original_init = Counter.__init__

    def recording_init(self: Counter, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        seen.append(self)

    monkeypatch.setattr(Counter, "__init__", recording_init)
    cfg = counter_algo.model_copy(
        update={
            "eval": counter_algo.eval.model_copy(update={"every": 2, "every_episodes": 3}),
            "run": _root(counter_algo, tmp_path / "a").model_copy(update={"seed": 5}),
        }
    )
    straight = run(cfg)
    periodic, final = 5 + PERIODIC_EVAL_SEED_OFFSET, 5 + FINAL_EVAL_SEED_OFFSET
    assert seen[0].evaluations == [(2, 3, periodic), (4, 3, periodic), (6, 3, periodic)] + [
        (7, 3, periodic),
        (7, cfg.eval.episodes, final),
    ]
    rows = read_metrics(straight.run_dir)
    scores = [row.get("periodic_eval/score") for row in rows]  # the last row: final eval
    assert scores == [None, 1.0, None, 5.0, None, 3.0, 4.0, None]
    best = read_checkpoint_file(straight.run_dir / "checkpoints" / "best.pt")
    assert best["iteration"] == 4 and best["best_eval"] == 5.0
    assert straight.best_periodic_score == 5.0
    assert load_checkpoint(straight.run_dir)["best_eval"] == 5.0  # carried into checkpoints

    # Stopped between evaluations (5) and on an iteration whose evaluation is due (6): the
    # resumed run's metrics, best.pt and best score equal the uninterrupted run's.
    for stop_at in (5, 6):
        Counter.signal_at = stop_at
        root = str(tmp_path / f"stopped_at_{stop_at}")
        stopped_cfg = cfg.model_copy(update={"run": cfg.run.model_copy(update={"root": root})})
        with pytest.raises(Interrupted) as stopped:
            run(stopped_cfg)
        Counter.signal_at = None
        resumed = run(stopped_cfg, resume_dir=stopped.value.run_dir)
        assert read_metrics(resumed.run_dir) == rows, stop_at
        best = read_checkpoint_file(resumed.run_dir / "checkpoints" / "best.pt")
        assert best["iteration"] == 4 and best["best_eval"] == 5.0
        assert resumed.best_periodic_score == 5.0


def test_a_resumed_run_takes_the_best_score_of_best_pt_when_it_is_newer(tmp_path: Path) -> None:
    """A run killed after writing best.pt but before its next checkpoint: the checkpoint knows
    an older best, best.pt the newer one; a corrupt best.pt falls back to the checkpoint's."""
    periodic = PeriodicEvaluation(every=2, episodes=3, seed=0)
    write_checkpoint_file(tmp_path / "checkpoints" / "best.pt", {"best_eval": 5.0})
    periodic.restore(tmp_path, from_checkpoint=1.0)
    assert periodic.best == 5.0
    (tmp_path / "checkpoints" / "best.pt").write_bytes(b"not a checkpoint")
    periodic.restore(tmp_path, from_checkpoint=1.0)
    assert periodic.best == 1.0
    periodic.restore(tmp_path / "elsewhere", from_checkpoint=None)
    assert periodic.best is None


def test_ppo_evaluations_during_training_leave_training_unchanged(tmp_path: Path) -> None:
    """Real PPO on T-Maze: evaluating after every iteration changes no weight and no training
    metric, and best.pt replays its recorded score on the periodic evaluation's episodes."""
    from rlformer.algos.ppo.algorithm import load_agent
    from rlformer.algos.ppo.evaluation import run_episodes

    tiny = [
        "env.id=rlformer/TMaze-v0",
        "env.kwargs.length=3",
        "rollout.envs_per_worker=4",
        "rollout.fragment_length=16",
        "model.core.d_model=16",
        "model.core.n_heads=2",
        "model.core.d_ff=32",
        "model.core.memory_length=8",
        "ppo.total_steps=640",
        "eval.episodes=4",
        "run.progress=false",
    ]
    plain = run(load_config(None, [*tiny, f"run.root={tmp_path / 'plain'}"]))
    cfg = load_config(
        None, [*tiny, f"run.root={tmp_path / 'evaluated'}", "eval.every=1", "eval.every_episodes=6"]
    )
    evaluated = run(cfg)

    def training_rows(run_dir: Path) -> list[dict[str, float]]:
        return [
            {k: v for k, v in row.items() if k.split("/")[0] not in ("time", "periodic_eval")}
            for row in read_metrics(run_dir)
        ]

    assert training_rows(evaluated.run_dir) == training_rows(plain.run_dir)
    a, b = load_checkpoint(plain.run_dir)["model"], load_checkpoint(evaluated.run_dir)["model"]
    assert all(torch.equal(a[key], b[key]) for key in a)
    assert evaluated.evaluation == plain.evaluation

    scores = [row["periodic_eval/return_mean"] for row in read_metrics(evaluated.run_dir)[:-1]]
    assert len(scores) == 10 and evaluated.best_periodic_score == max(scores)
    model, _, _ = load_agent(evaluated.run_dir / "checkpoints" / "best.pt")
    replay = run_episodes(
        model,
        cfg.env,
        cfg.eval.every_episodes,
        cfg.eval.num_envs,
        seed=cfg.run.seed + PERIODIC_EVAL_SEED_OFFSET,
    )
    assert replay.summary()["return_mean"] == max(scores)
