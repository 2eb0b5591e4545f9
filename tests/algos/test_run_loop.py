"""The one run loop drives any algorithm: a fourth one is a module, nothing else changes."""

from __future__ import annotations

import json
import os
import signal
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch

from rlformer.algos.base import Evaluation, Progress
from rlformer.algos.loop import run
from rlformer.checkpoints import load_checkpoint
from rlformer.config import TrainConfig, load_config
from rlformer.interrupts import Interrupted
from rlformer.runs import read_metrics


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

    def evaluate(self) -> Evaluation | None:
        return Evaluation({"total": float(self.total)}, [f"total {float(self.total):.3f}"])


@pytest.fixture
def counter_algo(monkeypatch: pytest.MonkeyPatch) -> TrainConfig:
    module = types.ModuleType("rlformer.algos.counter")
    module.ALGORITHM = Counter  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "rlformer.algos.counter", module)
    Counter.signal_at = None
    cfg = load_config(None, ["run.progress=false", "run.checkpoint_every=3"])
    return cfg.model_copy(update={"algo": "counter"})


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
