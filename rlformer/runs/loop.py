"""The one run loop behind ``rlformer train``, whatever the algorithm.

It owns what every run needs and no algorithm should repeat: an exclusive run directory with the
resolved config, checks of the run root before the first step, metrics (JSONL + TensorBoard),
checkpoints written atomically every ``run.checkpoint_every`` iterations, resume from the newest
readable checkpoint, a checkpoint on SIGINT/SIGTERM, run problems turned into one-line
:class:`RunFailed` errors, evaluations during training (``eval.every``, keeping the best weights
in ``checkpoints/best.pt`` as SB3's EvalCallback does) and the final evaluation.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from rlformer.config import ConfigError, TrainConfig, dump_config, load_saved_config
from rlformer.config.sections.registry import algorithm_spec
from rlformer.core.device import resolve_device
from rlformer.learners.learner_group import LearnerError
from rlformer.learners.nonfinite import NonFiniteError
from rlformer.rollout.env_guard import EnvCrash, EnvDataError
from rlformer.rollout.ray_collector import RolloutError
from rlformer.runs.algorithm import (
    FINAL_EVAL_SEED_OFFSET,
    PERIODIC_EVAL_SEED_OFFSET,
    Algorithm,
    Evaluation,
    algorithm_class,
)
from rlformer.runs.checkpoints import (
    CheckpointError,
    atomic_write_bytes,
    newest_readable_checkpoint,
    read_checkpoint_file,
    save_checkpoint,
    write_checkpoint_file,
)
from rlformer.runs.directory import (
    MIN_FREE_BYTES,
    MetricsLogger,
    RunLock,
    check_run_root,
    new_run_dir,
)
from rlformer.runs.errors import RunFailed
from rlformer.runs.resume import describe_changes
from rlformer.runs.signals import Interrupted, StopRequest

RUN_FAILURES = (NonFiniteError, EnvCrash, EnvDataError, RolloutError, LearnerError)
"""Problems found while training that stop the run (the CLI prints them as one line)."""


BEST_CHECKPOINT = "best.pt"
"""In ``checkpoints/``: the weights of the best evaluation during training (``eval.every``)."""


@dataclass
class TrainResult:
    """Where the run lives and how it ended."""

    run_dir: Path
    env_steps: int
    iterations: int
    evaluation: dict[str, float] | None
    best_periodic_score: float | None = None
    """The best score of the evaluations during training (``checkpoints/best.pt``), if any."""


def log_line(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def write_checkpoint(
    run_dir: Path, step: int, payload: dict[str, Any], keep: int, label: str, best: bool = False
) -> None:
    """:func:`save_checkpoint` (or, with ``best``, ``checkpoints/best.pt``), with a full disk or
    an I/O error turned into :class:`RunFailed` (the atomic write leaves the previous
    checkpoints as they were)."""
    try:
        if best:
            write_checkpoint_file(run_dir / "checkpoints" / BEST_CHECKPOINT, payload)
        else:
            save_checkpoint(run_dir, step, payload, keep=keep)
    except OSError as err:
        raise RunFailed(
            f"could not write the checkpoint of {label} to {run_dir} "
            f"({err.strerror or err}); the previous checkpoints are intact"
        ) from None


def checkpoint_bytes_estimate(model: torch.nn.Module) -> int:
    """Rough size of one checkpoint: weights plus Adam's two moments, plus env state slack."""
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    return 3 * weights + 2**20


@dataclass
class PeriodicEvaluation:
    """``eval.every``: when to evaluate during training, and the best score so far."""

    every: int
    episodes: int
    seed: int
    best: float | None = None

    def due(self, iteration: int, done: bool) -> bool:
        return self.every > 0 and (iteration % self.every == 0 or done)

    def run(self, algo: Algorithm) -> tuple[Evaluation, bool]:
        """Evaluate; the result and whether it beats every earlier one."""
        result = algo.evaluate(self.episodes, self.seed)
        improved = self.best is None or result.score > self.best
        if improved:
            self.best = result.score
        return result, improved

    def restore(self, run_dir: Path, from_checkpoint: float | None) -> None:
        """The best score of a resumed run: ``best.pt``'s own, when the run wrote one after its
        last checkpoint (the resumed iterations replay those evaluations, so the higher holds)."""
        scores = [from_checkpoint]
        best_file = run_dir / "checkpoints" / BEST_CHECKPOINT
        # An unreadable best.pt is simply replaced by the next best evaluation.
        with contextlib.suppress(CheckpointError):
            if best_file.exists():
                scores.append(read_checkpoint_file(best_file).get("best_eval"))
        known = [float(score) for score in scores if score is not None]
        self.best = max(known) if known else None


def build_algorithm(cfg: TrainConfig, resuming: bool = False) -> Algorithm:
    """``cfg.algo``'s implementation, built on the configured device."""
    torch.set_num_threads(cfg.run.torch_threads)
    return algorithm_class(cfg.algo)(cfg, resolve_device(cfg.run.device), resuming)


def _restore_cuda_rng(states: list[torch.Tensor]) -> None:
    """Put back the GPUs' generator states a CUDA run saved, on the GPUs this machine has.

    A run resumed on a machine without a GPU needs none of them; one resumed on CUDA draws
    the same dropout masks as the run it continues.
    """
    if states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states[: torch.cuda.device_count()])


def run(
    cfg: TrainConfig,
    resume_dir: str | Path | None = None,
    trust: bool = False,
    on_iteration: Callable[[int, dict[str, float]], None] | None = None,
) -> TrainResult:
    """Train (or resume) the run described by ``cfg``; returns where it was written.

    Args:
        cfg: The resolved config.
        resume_dir: Continue this run directory from its newest readable checkpoint.
        trust: Accept checkpoint parts that need unpickling (env states another user or
            machine wrote, format-1 files).
        on_iteration: Called with (iteration, metrics) after each iteration is logged (and
            checkpointed when due); a sweep reports to Ray Tune from here.

    Raises:
        Interrupted: SIGINT/SIGTERM arrived; a checkpoint was written first.
        RunFailed: NaN/inf values, an env that keeps failing, or a checkpoint that cannot be
            written; the run directory keeps its last good checkpoint.
    """
    algo = build_algorithm(cfg, resuming=resume_dir is not None)
    root = Path(resume_dir).parent if resume_dir is not None else Path(cfg.run.root)
    per_checkpoint = algo.checkpoint_bytes()
    check_run_root(root, max(MIN_FREE_BYTES, (cfg.run.keep_checkpoints + 1) * per_checkpoint))
    with ExitStack() as run_scope:  # held until the end: signals, the run's lock and logs
        stop = run_scope.enter_context(StopRequest())  # closed last: covers all clean-up
        payload, ckpt_path = None, None
        if resume_dir is not None:
            run_dir = Path(resume_dir)
            run_scope.enter_context(RunLock(run_dir))
            ckpt_path, payload = newest_readable_checkpoint(run_dir, trust)
        else:
            run_dir = new_run_dir(cfg.run.root, cfg.run.name)
            run_scope.enter_context(RunLock(run_dir))
            (run_dir / "config.yaml").write_text(dump_config(cfg))
        with ExitStack() as loop_scope:  # the algorithm's workers, the progress bar
            if payload is not None and ckpt_path is not None:
                algo.restore(payload, ckpt_path, trust)
            try:
                algo.start()
            except RUN_FAILURES as err:  # e.g. no Ray cluster at rollout.ray_address
                raise RunFailed(f"{err} (run directory: {run_dir})") from None
            loop_scope.callback(algo.close)
            if payload is not None and ckpt_path is not None:
                torch.set_rng_state(payload["torch_rng"])
                _restore_cuda_rng(payload.get("cuda_rng", []))
                _record_resumed_config(run_dir, cfg)  # once the checkpoint has restored
                logger = MetricsLogger(run_dir, resume_step=algo.log_step())
                progress = algo.progress()
                log_line(f"resuming {run_dir} at {progress.unit} {progress.done}/{progress.total}")
                if progress.done >= progress.total:
                    length = algorithm_spec(cfg.algo).budget_key or "the run's length"
                    log_line(f"nothing left to train: raise {length} to train on")
            else:
                logger = MetricsLogger(run_dir)
                log_line(f"run directory: {run_dir}")
            run_scope.callback(logger.close)
            periodic = PeriodicEvaluation(
                cfg.eval.every, cfg.eval.every_episodes, cfg.run.seed + PERIODIC_EVAL_SEED_OFFSET
            )
            if payload is not None:
                periodic.restore(run_dir, payload.get("best_eval"))
            _train(cfg, algo, run_dir, logger, stop, loop_scope, on_iteration, periodic)

        stop.restore()  # Ctrl-C during the final evaluation just interrupts it
        if periodic.best is not None:
            log_line(
                f"best evaluation during training: {periodic.best:.2f} "
                f"({run_dir / 'checkpoints' / BEST_CHECKPOINT})"
            )
        evaluation = None
        if cfg.eval.episodes > 0:
            result = algo.evaluate(cfg.eval.episodes, cfg.run.seed + FINAL_EVAL_SEED_OFFSET)
            evaluation = result.metrics
            logger.log(algo.log_step(), {f"eval/{k}": v for k, v in evaluation.items()})
            (run_dir / "eval.json").write_text(json.dumps(evaluation, indent=2))
            for line in result.lines:
                log_line(line)
    env_steps = int(getattr(algo, "env_steps", algo.log_step()))
    return TrainResult(run_dir, env_steps, algo.iteration, evaluation, periodic.best)


def _record_resumed_config(run_dir: Path, cfg: TrainConfig) -> None:
    """Rewrite ``config.yaml`` (atomically) when a resume changes settings, and say which, so
    the run directory describes what it continues with; checkpoints keep their own configs."""
    path = run_dir / "config.yaml"
    try:
        changes = describe_changes(cfg, load_saved_config(path))
    except ConfigError:  # missing or unreadable: the resumed config replaces it
        changes = ["config.yaml written from the resumed config"]
    if changes:
        log_line("resuming with changed settings: " + "; ".join(changes))
        atomic_write_bytes(path, dump_config(cfg).encode())


def _train(
    cfg: TrainConfig,
    algo: Algorithm,
    run_dir: Path,
    logger: MetricsLogger,
    stop: StopRequest,
    scope: ExitStack,
    on_iteration: Callable[[int, dict[str, float]], None] | None,
    periodic: PeriodicEvaluation,
) -> None:
    """Iterate until the algorithm is finished, evaluating and checkpointing on schedule and
    checkpointing on a signal."""

    def checkpoint(regular: bool, best: bool) -> None:
        """One payload (workers' state gathered once) for the regular checkpoint and best.pt."""
        try:
            state = algo.state()
        except RUN_FAILURES as err:  # e.g. workers lost past the restart budget
            raise RunFailed(f"{err}; {run_dir} keeps its earlier checkpoints") from None
        payload = {
            "kind": algo.kind,
            "algo": cfg.algo,
            "config": cfg.model_dump(mode="json"),
            "torch_rng": torch.get_rng_state(),
            # A CUDA learner's dropout draws from the GPU's generator, not the CPU one.
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else [],
            "iteration": algo.iteration,
            "best_eval": periodic.best,
            **state,
        }
        label, keep = f"iteration {algo.iteration}", cfg.run.keep_checkpoints
        if best:
            write_checkpoint(run_dir, algo.log_step(), payload, keep, f"{label} (best)", best=True)
        if regular:
            write_checkpoint(run_dir, algo.log_step(), payload, keep, label)

    interactive = cfg.run.progress and sys.stderr.isatty()
    start = algo.progress()
    bar = tqdm(total=start.total, initial=start.done, unit=start.unit, disable=not interactive)
    scope.callback(bar.close)
    last_decile = 10 * start.done // max(start.total, 1)
    while not algo.finished():
        try:
            metrics = algo.iterate()
        except RUN_FAILURES as err:
            raise RunFailed(
                f"{err}; {run_dir} keeps its checkpoints up to the last good one"
            ) from None
        done = algo.finished()
        # Also when a signal asked to stop: a resumed run must log what an uninterrupted one
        # logs (a second signal still stops at once).
        improved = False
        if periodic.due(algo.iteration, done):
            evaluation, improved = periodic.run(algo)
            metrics |= {f"periodic_eval/{k}": v for k, v in evaluation.metrics.items()}
        logger.log(algo.log_step(), metrics)
        summary = algo.summary(metrics)
        progress = algo.progress()
        bar.total, bar.unit = progress.total, progress.unit
        bar.update(progress.done - bar.n)
        bar.set_postfix_str(summary)
        stopping = stop.requested  # read once: a later signal stops after the next checkpoint
        regular = algo.iteration % cfg.run.checkpoint_every == 0 or done or stopping
        if regular or improved:
            checkpoint(regular, improved)
        decile = 10 * progress.done // max(progress.total, 1)
        if not interactive and cfg.run.progress and (done or decile > last_decile):
            log_line(f"{progress.unit} {progress.done}/{progress.total} {summary}")
        last_decile = decile
        if on_iteration is not None:
            on_iteration(algo.iteration, {"env_steps": getattr(algo, "env_steps", 0), **metrics})
        if stopping and not done:
            raise Interrupted(str(stop.signal_name), run_dir, progress.done, progress.total)
