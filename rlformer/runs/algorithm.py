"""The algorithm protocol: what the run loop needs from PPO, DT, ODT or any algorithm after them.

An algorithm is a class built as ``ALGORITHM(cfg, device, resuming)`` from the resolved config
(``cfg.algo == name``), named by its declaration's ``algorithm`` path
(:class:`~rlformer.config.sections.spec.AlgorithmSpec`). The run loop (:mod:`rlformer.runs.loop`)
owns everything else: the run directory and its lock, signals, metrics, checkpoints, resume and
the final evaluation. So a new algorithm is one package (its config section and declaration,
the class, its policy and export step) plus one entry point, and neither the loop nor the CLI
changes.

Life of an algorithm inside one run::

    algo = ALGORITHM(cfg, device, resuming)  # model, learner, data: no run directory yet
    algo.restore(payload, path, trust)    # only when resuming
    algo.start()                          # collectors / Ray workers (closed by algo.close())
    while not algo.finished():
        metrics = algo.iterate()          # one iteration; logged at algo.log_step()
        ... algo.state() when a checkpoint is due ...
        ... algo.evaluate(k, seed) every eval.every iterations, if set ...
    algo.evaluate(episodes, seed)         # the final evaluation
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from rlformer.config import TrainConfig
from rlformer.config.sections.registry import algorithm_spec, load_attr


@dataclass(frozen=True)
class Progress:
    """How far the run is, in the algorithm's own unit (iterations, gradient steps, env steps)."""

    done: int
    total: int
    unit: str


FINAL_EVAL_SEED_OFFSET = 1_000_000
"""The final evaluation plays episodes seeded from ``run.seed`` + this: never a training seed,
and the episodes the benchmarks score every other agent (SB3's too) on."""

PERIODIC_EVAL_SEED_OFFSET = 2_000_000
"""Evaluations during training use ``run.seed`` + this: other episodes than the final one's."""


@dataclass
class Evaluation:
    """Evaluation figures (the final ones go to ``eval.json``), the lines shown to the user, and
    the one number that ranks two evaluations of a run (higher is better; ``best.pt``)."""

    metrics: dict[str, float]
    lines: list[str]
    score: float


class Algorithm(Protocol):
    """One training algorithm behind the run loop."""

    kind: str
    """Checkpoint ``kind`` entry: which loader rebuilds the policy (``ppo`` or ``dt``)."""

    iteration: int
    """Iterations completed, counting those before a resume (checkpoint cadence)."""

    def __init__(self, cfg: TrainConfig, device: torch.device, resuming: bool = False) -> None:
        """``resuming``: :meth:`restore` follows, so inputs only a fresh run reads (such as
        ODT's ``odt.init_from``) are skipped; the checkpoint holds what they gave."""
        ...

    @classmethod
    def dry_run(cls, cfg: TrainConfig) -> str:
        """``rlformer train --dry-run``: build what a run needs once; a one-line summary."""
        ...

    def checkpoint_bytes(self) -> int:
        """Rough size of one checkpoint, for the free-space check before the first step."""
        ...

    def start(self) -> None:
        """Acquire what must be closed again (rollout workers, Ray)."""
        ...

    def restore(self, payload: dict[str, Any], path: Path, trust: bool) -> None:
        """Continue from a checkpoint payload written by :meth:`state` (before :meth:`start`,
        so workers start from the restored state)."""
        ...

    def finished(self) -> bool: ...

    def iterate(self) -> dict[str, float]:
        """One iteration; its metrics. Raises one of :data:`RUN_FAILURES` on a run problem."""
        ...

    def log_step(self) -> int:
        """The x-axis of metrics and checkpoint names; never decreases."""
        ...

    def progress(self) -> Progress: ...

    def summary(self, metrics: dict[str, float]) -> str:
        """A few words on the latest iteration for the progress bar."""
        ...

    def state(self) -> dict[str, Any]:
        """Everything :meth:`restore` needs, loadable with ``torch.load(weights_only=True)``."""
        ...

    def evaluate(self, episodes: int, seed: int) -> Evaluation:
        """Play ``episodes`` evaluation episodes from ``seed`` with a copy of the current policy,
        leaving the training state (weights, devices, random streams) as it was."""
        ...

    def close(self) -> None: ...


def algorithm_class(name: str) -> type[Algorithm]:
    """The class that algorithm ``name``'s declaration names
    (:mod:`rlformer.config.sections.registry`)."""
    return load_attr(algorithm_spec(name).algorithm)
