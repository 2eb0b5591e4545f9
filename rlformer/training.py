"""The PPO training loop: collector -> learner -> metrics / checkpoints, resumable after a kill.

A resumed run continues bit-for-bit on CPU: the checkpoint holds the model, the optimiser, the
learner's minibatch RNG, torch's global RNG (dropout) and every rollout worker's env states,
observations, memory and action RNG, taken at an iteration boundary.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from rlformer.checkpoints import (
    CheckpointError,
    checkpoint_config,
    checkpoint_spaces,
    encode_spec,
    load_checkpoint,
    load_weights,
    newest_readable_checkpoint,
    save_checkpoint,
    seal_state,
    unseal_state,
)
from rlformer.config import TrainConfig, dump_config, load_config
from rlformer.core.device import resolve_device
from rlformer.evaluation.runner import EpisodeResults, run_episodes
from rlformer.interrupts import Interrupted, StopRequest
from rlformer.learners.finite import NonFiniteError
from rlformer.learners.ppo import PPOLearner
from rlformer.models.actor_critic import ActorCritic
from rlformer.models.spaces import SpaceError
from rlformer.rollout.collector import make_collector
from rlformer.rollout.env_factory import EnvError, check_spaces, describe_env, env_from_config
from rlformer.rollout.env_guard import EnvCrash, EnvDataError
from rlformer.rollout.ray_collector import RolloutError
from rlformer.runs import MIN_FREE_BYTES, MetricsLogger, RunLock, check_run_root, new_run_dir

RUN_FAILURES = (NonFiniteError, EnvCrash, EnvDataError, RolloutError)
"""Problems found while training that stop the run (the CLI prints them as one line)."""


@dataclass
class TrainResult:
    """Where the run lives and how it ended."""

    run_dir: Path
    env_steps: int
    iterations: int
    evaluation: dict[str, float] | None


def build_model(cfg: TrainConfig) -> ActorCritic:
    """An actor-critic for the configured env (spaces read from one throwaway env).

    Spaces rlformer cannot encode stop here, before any run directory exists, as an
    :class:`EnvError` naming the env, its wrappers and the fix.
    """
    env = env_from_config(cfg.env)
    try:
        check_spaces(env.observation_space, env.action_space, cfg.env)
        return ActorCritic(env.observation_space, env.action_space, cfg.model)
    except SpaceError as err:
        raise EnvError(f"{describe_env(cfg.env)}: {err}") from None
    finally:
        env.close()


def load_agent(
    path: str | Path, device: str = "cpu", trust: bool = False
) -> tuple[ActorCritic, TrainConfig, dict[str, Any]]:
    """Model, config and checkpoint payload from a checkpoint file or run directory.

    Needs nothing but the checkpoint: the resolved config travels inside it. Never unpickles
    unless ``trust`` (see :mod:`rlformer.checkpoints`).
    """
    payload = load_checkpoint(path, trust)
    model, cfg = agent_from_payload(payload, path)
    return model.to(device), cfg, payload


def agent_from_payload(
    payload: dict[str, Any], path: str | Path
) -> tuple[ActorCritic, TrainConfig]:
    """Rebuild a PPO checkpoint's model; any inconsistency is a :class:`CheckpointError`."""
    cfg = checkpoint_config(payload, path)
    observation_space, action_space = checkpoint_spaces(payload, path)
    try:
        model = ActorCritic(observation_space, action_space, cfg.model)
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"{path}: cannot rebuild its model: {err}") from None
    load_weights(model, payload, path)
    return model, cfg


def check_config(cfg: TrainConfig) -> str:
    """``rlformer train --dry-run``: build what a run needs once, without running; a summary.

    Catches an unknown env, spaces the model cannot handle and an unusable run folder before
    any time is spent; the config itself was validated when it was loaded.
    """
    if cfg.algo == "dt":
        env_from_config(cfg.env).close()
        check_run_root(cfg.run.root)
        return f"ok: dt on {cfg.env.id}, dataset {cfg.dt.dataset} (not read by --dry-run)"
    model = build_model(cfg)
    check_run_root(cfg.run.root, max(MIN_FREE_BYTES, checkpoint_bytes_estimate(model)))
    parameters = sum(p.numel() for p in model.parameters())
    return (
        f"ok: ppo on {cfg.env.id}, {cfg.model.torso} model with {parameters:,} parameters, "
        f"{cfg.ppo.total_steps:,} env steps, runs under {cfg.run.root}"
    )


class RunFailed(RuntimeError):
    """Training stopped on a problem found while running (NaN, env failure, full disk)."""


def _log_line(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def write_checkpoint(
    run_dir: Path, step: int, payload: dict[str, Any], keep: int, label: str
) -> None:
    """:func:`save_checkpoint`, with a full disk or an I/O error turned into :class:`RunFailed`
    (the atomic write leaves the previous checkpoints as they were)."""
    try:
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


def train(
    cfg: TrainConfig,
    resume_dir: str | Path | None = None,
    trust: bool = False,
    on_iteration: Callable[[int, dict[str, float]], None] | None = None,
) -> TrainResult:
    """Train (or resume) the run described by ``cfg``; returns where it was written.

    Args:
        cfg: The resolved config.
        resume_dir: Continue this run directory from its newest readable checkpoint.
        trust: Restore env states even if another user or machine wrote them (unpickles).
        on_iteration: Called with (iteration, metrics) after each iteration is logged (and
            checkpointed when due); a sweep reports to Ray Tune from here. PPO runs only.

    Raises:
        Interrupted: SIGINT/SIGTERM arrived; a checkpoint was written first.
        RunFailed: NaN/inf values, an env that keeps failing, or a checkpoint that cannot be
            written; the run directory keeps its last good checkpoint.
    """
    if cfg.algo == "dt":
        from rlformer.dt_training import train_dt

        return train_dt(cfg, resume_dir, trust)
    torch.set_num_threads(cfg.run.torch_threads)
    device = resolve_device(cfg.run.device)
    steps_per_iteration = (
        cfg.rollout.num_workers * cfg.rollout.envs_per_worker * cfg.rollout.fragment_length
    )
    iterations = math.ceil(cfg.ppo.total_steps / steps_per_iteration)

    torch.manual_seed(cfg.run.seed)
    np.random.seed(cfg.run.seed)
    model = build_model(cfg)
    learner = PPOLearner(
        model, cfg.ppo, device, iterations, seed=cfg.run.seed, nonfinite=cfg.run.nonfinite
    )
    root = Path(resume_dir).parent if resume_dir is not None else Path(cfg.run.root)
    per_checkpoint = checkpoint_bytes_estimate(model)
    check_run_root(root, max(MIN_FREE_BYTES, (cfg.run.keep_checkpoints + 1) * per_checkpoint))
    with ExitStack() as run_scope:  # held until the end: signals, the run's lock and logs
        stop = run_scope.enter_context(StopRequest())  # closed last: covers all clean-up
        if resume_dir is not None:
            run_dir = Path(resume_dir)
            run_scope.enter_context(RunLock(run_dir))
            ckpt_path, payload = newest_readable_checkpoint(run_dir, trust)
            worker_states = unseal_state(payload.get("collector"), ckpt_path, trust)
            start_iteration = int(payload["iteration"])
            logger = MetricsLogger(run_dir, resume_step=start_iteration * steps_per_iteration)
        else:
            run_dir = new_run_dir(cfg.run.root, cfg.run.name)
            run_scope.enter_context(RunLock(run_dir))
            (run_dir / "config.yaml").write_text(dump_config(cfg))
            start_iteration = 0
            logger = MetricsLogger(run_dir)
        run_scope.callback(logger.close)
        with ExitStack() as loop_scope:  # collector (Ray), progress bar
            collector = make_collector(cfg)
            loop_scope.callback(collector.close)
            recent_returns: list[float] = []
            recent_successes: list[float] = []
            if resume_dir is not None:
                load_weights(model, payload, ckpt_path)
                learner.load_state_dict(payload["learner"])
                collector.set_state([_checkpointed_worker(s) for s in worker_states])
                torch.set_rng_state(payload["torch_rng"])
                recent_returns = list(payload["recent_episodes"]["returns"])
                recent_successes = list(payload["recent_episodes"]["successes"])
                _log_line(f"resuming {run_dir} at iteration {start_iteration}/{iterations}")
            else:
                _log_line(f"run directory: {run_dir}")
            warned_envs = False

            def checkpoint(iteration: int) -> None:
                nonlocal warned_envs
                try:
                    states = collector.get_state()
                except RUN_FAILURES as err:  # workers lost past the restart budget
                    raise RunFailed(f"{err}; {run_dir} keeps its earlier checkpoints") from None
                problems = sorted({s["unpicklable_envs"] for s in states if s["unpicklable_envs"]})
                if problems and not warned_envs:
                    warned_envs = True
                    _log_line(
                        f"warning: env {cfg.env.id!r} cannot be pickled ({problems[0]}); "
                        "checkpoints are written without env state, so a resumed run starts "
                        "fresh episodes"
                    )
                write_checkpoint(
                    run_dir,
                    iteration * steps_per_iteration,
                    {
                        "kind": "ppo",
                        "config": cfg.model_dump(mode="json"),
                        "spec": encode_spec(model.observation_space, model.action_space),
                        "model": model.state_dict(),
                        "learner": learner.state_dict(),
                        "collector": seal_state([s["state"] for s in states]),
                        "torch_rng": torch.get_rng_state(),
                        "iteration": iteration,
                        "recent_episodes": {
                            "returns": recent_returns,
                            "successes": recent_successes,
                        },
                    },
                    cfg.run.keep_checkpoints,
                    f"iteration {iteration}",
                )

            interactive = cfg.run.progress and sys.stderr.isatty()
            bar = tqdm(
                total=iterations, initial=start_iteration, unit="it", disable=not interactive
            )
            loop_scope.callback(bar.close)
            for iteration in range(start_iteration, iterations):
                started = time.perf_counter()
                try:
                    fragment = collector.collect(model.state_dict(), version=iteration)
                    collect_s = time.perf_counter() - started
                    metrics = learner.update(fragment)
                except RUN_FAILURES as err:
                    raise RunFailed(
                        f"{err}; {run_dir} keeps its checkpoints up to the last good one"
                    ) from None
                env_steps = (iteration + 1) * steps_per_iteration
                recent_returns = (recent_returns + fragment.episode_returns)[-100:]
                recent_successes = (recent_successes + fragment.episode_successes)[-100:]
                elapsed = time.perf_counter() - started
                metrics |= {
                    "time/collect_s": collect_s,
                    "time/iteration_s": elapsed,
                    "time/env_steps_per_s": steps_per_iteration / elapsed,
                }
                if recent_returns:
                    metrics["rollout/return_mean"] = float(np.mean(recent_returns))
                if recent_successes:
                    metrics["rollout/success_rate"] = float(np.mean(recent_successes))
                logger.log(env_steps, metrics)
                summary = f"return {metrics.get('rollout/return_mean', float('nan')):.2f}"
                if recent_successes:
                    summary += f" success {metrics['rollout/success_rate']:.2f}"
                bar.set_postfix_str(summary)
                bar.update(1)
                done = iteration + 1 == iterations
                if (iteration + 1) % cfg.run.checkpoint_every == 0 or done or stop.requested:
                    checkpoint(iteration + 1)
                if (
                    not interactive
                    and cfg.run.progress
                    and (done or (iteration + 1) % max(1, iterations // 10) == 0)
                ):
                    _log_line(
                        f"iteration {iteration + 1}/{iterations} steps {env_steps} {summary}"
                    )
                if on_iteration is not None:
                    on_iteration(iteration + 1, {"env_steps": env_steps, **metrics})
                if stop.requested and not done:
                    raise Interrupted(str(stop.signal_name), run_dir, iteration + 1, iterations)

        stop.restore()  # Ctrl-C during the final evaluation just interrupts it
        evaluation = None
        if cfg.eval.episodes > 0:
            results = run_episodes(
                model.cpu(),
                cfg.env,
                cfg.eval.episodes,
                cfg.eval.num_envs,
                deterministic=cfg.eval.deterministic,
                seed=cfg.run.seed + 1_000_000,
            )
            evaluation = results.summary()
            logger.log(
                iterations * steps_per_iteration, {f"eval/{k}": v for k, v in evaluation.items()}
            )
            (run_dir / "eval.json").write_text(json.dumps(evaluation, indent=2))
            _log_line(format_evaluation(results))
    return TrainResult(run_dir, iterations * steps_per_iteration, iterations, evaluation)


def _checkpointed_worker(blob: bytes) -> dict[str, Any]:
    return {"state": blob, "unpicklable_envs": None}


def format_evaluation(results: EpisodeResults) -> str:
    """One human line summarising an evaluation."""
    summary = results.summary()
    line = (
        f"evaluation: {int(summary['episodes'])} episodes, return "
        f"{summary['return_mean']:.2f} +/- {summary['return_std']:.2f}"
    )
    if results.success_rate is not None:
        line += f", success rate {100 * results.success_rate:.1f}%"
    return line


def resume(
    run_dir: str | Path, overrides: list[str] | None = None, trust: bool = False
) -> TrainResult:
    """Continue a run from its newest readable checkpoint with the config saved beside it."""
    if not Path(run_dir).is_dir():
        raise CheckpointError(f"{run_dir}: run directory not found")
    cfg = load_config(Path(run_dir) / "config.yaml", overrides)
    return train(cfg, resume_dir=run_dir, trust=trust)
