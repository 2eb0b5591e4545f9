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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from rlformer.config import TrainConfig, dump_config, load_config
from rlformer.core.device import resolve_device
from rlformer.evaluation.runner import EpisodeResults, run_episodes
from rlformer.learners.ppo import PPOLearner
from rlformer.models.actor_critic import ActorCritic
from rlformer.models.spaces import SpaceError
from rlformer.rollout.collector import make_collector
from rlformer.rollout.env_factory import EnvError, check_spaces, describe_env, env_from_config
from rlformer.runs import (
    MetricsLogger,
    load_checkpoint,
    new_run_dir,
    save_checkpoint,
)


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
    path: str | Path, device: str = "cpu"
) -> tuple[ActorCritic, TrainConfig, dict[str, Any]]:
    """Model, config and checkpoint payload from a checkpoint file or run directory.

    Needs nothing but the checkpoint: the resolved config travels inside it.
    """
    payload = load_checkpoint(path)
    cfg = TrainConfig.model_validate(payload["config"])
    model = ActorCritic(
        payload["spec"]["observation_space"], payload["spec"]["action_space"], cfg.model
    )
    model.load_state_dict(payload["model"])
    return model.to(device), cfg, payload


def _log_line(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def train(cfg: TrainConfig, resume_dir: str | Path | None = None) -> TrainResult:
    """Train (or resume) the run described by ``cfg``; returns where it was written."""
    if cfg.algo == "dt":
        from rlformer.dt_training import train_dt

        return train_dt(cfg, resume_dir)
    torch.set_num_threads(cfg.run.torch_threads)
    device = resolve_device(cfg.run.device)
    steps_per_iteration = (
        cfg.rollout.num_workers * cfg.rollout.envs_per_worker * cfg.rollout.fragment_length
    )
    iterations = math.ceil(cfg.ppo.total_steps / steps_per_iteration)

    torch.manual_seed(cfg.run.seed)
    np.random.seed(cfg.run.seed)
    model = build_model(cfg)
    learner = PPOLearner(model, cfg.ppo, device, iterations, seed=cfg.run.seed)
    collector = make_collector(cfg)
    start_iteration = 0
    recent_returns: list[float] = []
    recent_successes: list[float] = []
    if resume_dir is not None:
        run_dir = Path(resume_dir)
        payload = load_checkpoint(run_dir)
        model.load_state_dict(payload["model"])
        learner.load_state_dict(payload["learner"])
        collector.set_state(payload["collector"])
        torch.set_rng_state(payload["torch_rng"])
        start_iteration = payload["iteration"]
        recent_returns = list(payload["recent_episodes"]["returns"])
        recent_successes = list(payload["recent_episodes"]["successes"])
        logger = MetricsLogger(run_dir, resume_step=start_iteration * steps_per_iteration)
        _log_line(f"resuming {run_dir} at iteration {start_iteration}/{iterations}")
    else:
        run_dir = new_run_dir(cfg.run.root, cfg.run.name)
        (run_dir / "config.yaml").write_text(dump_config(cfg))
        logger = MetricsLogger(run_dir)
        _log_line(f"run directory: {run_dir}")

    def checkpoint(iteration: int) -> None:
        save_checkpoint(
            run_dir,
            iteration * steps_per_iteration,
            {
                "kind": "ppo",
                "config": cfg.model_dump(mode="json"),
                "spec": model.spec(),
                "model": model.state_dict(),
                "learner": learner.state_dict(),
                "collector": collector.get_state(),
                "torch_rng": torch.get_rng_state(),
                "iteration": iteration,
                "recent_episodes": {"returns": recent_returns, "successes": recent_successes},
            },
            keep=cfg.run.keep_checkpoints,
        )

    interactive = cfg.run.progress and sys.stderr.isatty()
    bar = tqdm(total=iterations, initial=start_iteration, unit="it", disable=not interactive)
    try:
        for iteration in range(start_iteration, iterations):
            started = time.perf_counter()
            fragment = collector.collect(model.state_dict(), version=iteration)
            collect_s = time.perf_counter() - started
            metrics = learner.update(fragment)
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
            if (iteration + 1) % cfg.run.checkpoint_every == 0 or done:
                checkpoint(iteration + 1)
            if (
                not interactive
                and cfg.run.progress
                and (done or (iteration + 1) % max(1, iterations // 10) == 0)
            ):
                _log_line(f"iteration {iteration + 1}/{iterations} steps {env_steps} {summary}")
    finally:
        bar.close()
        collector.close()

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
    logger.close()
    return TrainResult(run_dir, iterations * steps_per_iteration, iterations, evaluation)


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


def resume(run_dir: str | Path, overrides: list[str] | None = None) -> TrainResult:
    """Continue a run from its latest checkpoint using the config saved in the run directory."""
    cfg = load_config(Path(run_dir) / "config.yaml", overrides)
    return train(cfg, resume_dir=run_dir)
