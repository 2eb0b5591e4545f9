"""Offline Decision Transformer training: dataset -> windows -> learner, checkpoints, evaluation.

The checkpoint carries everything evaluation needs without the dataset: weights, the resolved
config, state-normalisation statistics, the return scale and the action bounds.
"""

from __future__ import annotations

import json
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from tqdm import tqdm

from rlformer.checkpoints import (
    CheckpointError,
    checkpoint_config,
    checkpoint_spaces,
    encode_spec,
    load_weights,
    newest_readable_checkpoint,
    require_keys,
)
from rlformer.config import TrainConfig, dump_config
from rlformer.core.device import resolve_device
from rlformer.data import load_dataset
from rlformer.data.episodes import Dataset, Episode
from rlformer.data.sampling import WindowSampler
from rlformer.evaluation.dt_runner import DTPolicy, action_bounds, run_return_conditioned
from rlformer.interrupts import Interrupted, StopRequest
from rlformer.learners.dt import DTLearner
from rlformer.learners.finite import NonFiniteError
from rlformer.models.decision_transformer import DecisionTransformer
from rlformer.rollout.env_factory import env_from_config
from rlformer.runs import MIN_FREE_BYTES, MetricsLogger, RunLock, check_run_root, new_run_dir


def normalized_actions(
    dataset: Dataset, low: np.ndarray | None, high: np.ndarray | None
) -> Dataset:
    """Actions rescaled from the env's Box bounds to [-1, 1], the range of the DT's tanh head."""
    if low is None or high is None:
        return dataset
    episodes = [
        Episode(
            e.observations,
            2.0 * (e.actions - low) / (high - low) - 1.0,
            e.rewards,
            e.terminated,
            e.truncated,
            e.next_observations,
            e.infos,
        )
        for e in dataset.episodes
    ]
    return Dataset(episodes, dataset.source, dataset.metadata)


def episode_return_range(dataset: Dataset) -> dict[str, float]:
    """Min, max, mean and quartiles of the dataset's episode returns.

    Stored in the checkpoint so a return sweep can show which targets the data ever reached.
    """
    returns = np.array([float(np.sum(e.rewards)) for e in dataset.episodes])
    q25, median, q75 = np.quantile(returns, [0.25, 0.5, 0.75])
    return {
        "episodes": float(returns.size),
        "min": float(returns.min()),
        "max": float(returns.max()),
        "mean": float(returns.mean()),
        "q25": float(q25),
        "median": float(median),
        "q75": float(q75),
    }


def build_dt(
    cfg: TrainConfig, observation_space: gym.Space, action_space: gym.Space
) -> DecisionTransformer:
    discrete = isinstance(action_space, gym.spaces.Discrete)
    act_dim = int(action_space.n) if discrete else int(np.prod(action_space.shape))
    state_dim = int(np.prod(observation_space.shape))
    return DecisionTransformer(state_dim, act_dim, discrete, cfg.dt.core, cfg.dt.max_timestep)


def _as_array(value: Any) -> np.ndarray | None:
    """Tensors (format 2) and numpy arrays (format 1) alike; None stays None."""
    if value is None:
        return None
    return value.numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def load_dt_policy(
    payload: dict[str, Any], path: str | Path = "checkpoint"
) -> tuple[DTPolicy, TrainConfig]:
    """A ready-to-run DT policy from a checkpoint payload (``kind == "dt"``)."""
    cfg = checkpoint_config(payload, path)
    observation_space, action_space = checkpoint_spaces(payload, path)
    require_keys(payload, path, "normalization")
    model = build_dt(cfg, observation_space, action_space)
    load_weights(model, payload, path)
    stats = payload["normalization"]
    try:
        policy = DTPolicy(
            model,
            _as_array(stats["state_mean"]),
            _as_array(stats["state_std"]),
            cfg.dt.return_scale,
            cfg.dt.context,
            carry_memory=cfg.dt.memory_segments > 0,
            action_low=_as_array(stats["action_low"]),
            action_high=_as_array(stats["action_high"]),
        )
    except (KeyError, TypeError, AttributeError, ValueError) as err:
        raise CheckpointError(f"{path}: malformed normalization entry ({err})") from None
    return policy, cfg


def _tensor_or_none(array: np.ndarray | None) -> torch.Tensor | None:
    return None if array is None else torch.as_tensor(np.asarray(array))


def train_dt(cfg: TrainConfig, resume_dir: str | Path | None = None, trust: bool = False) -> Any:
    """Train (or resume) a DT run; returns a ``TrainResult``.

    Same guarantees as PPO's loop: exclusive run directory, checks of the run root before the
    first step, a checkpoint on SIGINT/SIGTERM, and a clear stop on non-finite values.
    """
    from rlformer.training import (
        RunFailed,
        TrainResult,
        checkpoint_bytes_estimate,
        write_checkpoint,
    )

    torch.set_num_threads(cfg.run.torch_threads)
    device = resolve_device(cfg.run.device)
    env = env_from_config(cfg.env)
    observation_space, action_space = env.observation_space, env.action_space
    env.close()
    low, high = action_bounds(action_space)
    dataset = normalized_actions(load_dataset(cfg.dt.dataset), low, high)
    dataset_returns = episode_return_range(dataset)
    discrete = isinstance(action_space, gym.spaces.Discrete)
    sampler = WindowSampler(dataset, cfg.dt.context, cfg.dt.return_scale, discrete_actions=discrete)
    torch.manual_seed(cfg.run.seed)
    model = build_dt(cfg, observation_space, action_space)
    learner = DTLearner(model, cfg.dt, device, nonfinite=cfg.run.nonfinite)
    rng = np.random.default_rng(cfg.run.seed)
    normalization = {
        "state_mean": _tensor_or_none(sampler.state_mean),
        "state_std": _tensor_or_none(sampler.state_std),
        "action_low": _tensor_or_none(low),
        "action_high": _tensor_or_none(high),
    }
    root = Path(resume_dir).parent if resume_dir is not None else Path(cfg.run.root)
    per_checkpoint = checkpoint_bytes_estimate(model)
    check_run_root(root, max(MIN_FREE_BYTES, (cfg.run.keep_checkpoints + 1) * per_checkpoint))
    with ExitStack() as run_scope:
        stop = run_scope.enter_context(StopRequest())  # closed last: covers all clean-up
        if resume_dir is not None:
            run_dir = Path(resume_dir)
            run_scope.enter_context(RunLock(run_dir))
            ckpt_path, payload = newest_readable_checkpoint(run_dir, trust)
            load_weights(model, payload, ckpt_path)
            learner.load_state_dict(payload["learner"])
            rng.bit_generator.state = payload["sampler_rng"]
            torch.set_rng_state(payload["torch_rng"])
            logger = MetricsLogger(run_dir, resume_step=learner.step)
        else:
            run_dir = new_run_dir(cfg.run.root, cfg.run.name)
            run_scope.enter_context(RunLock(run_dir))
            (run_dir / "config.yaml").write_text(dump_config(cfg))
            logger = MetricsLogger(run_dir)
            print(f"run directory: {run_dir}", file=sys.stderr, flush=True)
        run_scope.callback(logger.close)

        def checkpoint() -> None:
            write_checkpoint(
                run_dir,
                learner.step,
                {
                    "kind": "dt",
                    "config": cfg.model_dump(mode="json"),
                    "spec": encode_spec(observation_space, action_space),
                    "model": model.state_dict(),
                    "learner": learner.state_dict(),
                    "normalization": normalization,
                    "dataset_returns": dataset_returns,
                    "sampler_rng": rng.bit_generator.state,
                    "torch_rng": torch.get_rng_state(),
                },
                cfg.run.keep_checkpoints,
                f"step {learner.step}",
            )

        interactive = cfg.run.progress and sys.stderr.isatty()
        bar = tqdm(
            total=cfg.dt.train_steps, initial=learner.step, unit="step", disable=not interactive
        )
        checkpoint_every = cfg.run.checkpoint_every * cfg.dt.log_every
        while learner.step < cfg.dt.train_steps:
            try:
                if cfg.dt.memory_segments > 0:
                    windows = sampler.sample_sequences(
                        cfg.dt.batch_size, cfg.dt.memory_segments, rng
                    )
                    metrics = learner.update(windows)
                else:
                    metrics = learner.update(sampler.sample(cfg.dt.batch_size, rng))
            except NonFiniteError as err:
                bar.close()
                raise RunFailed(
                    f"{err}; {run_dir} keeps its checkpoints up to the last good one"
                ) from None
            bar.update(1)
            if learner.step % cfg.dt.log_every == 0:
                logger.log(learner.step, metrics)
                bar.set_postfix_str(f"loss {metrics['loss/action']:.4f}")
            done = learner.step == cfg.dt.train_steps
            if learner.step % checkpoint_every == 0 or done or stop.requested:
                checkpoint()
            if stop.requested and not done:
                bar.close()
                raise Interrupted(str(stop.signal_name), run_dir, learner.step, cfg.dt.train_steps)
        bar.close()
        stop.restore()  # Ctrl-C during the final evaluation just interrupts it

        policy = DTPolicy(
            model.cpu(),
            sampler.state_mean,
            sampler.state_std,
            cfg.dt.return_scale,
            cfg.dt.context,
            cfg.dt.memory_segments > 0,
            low,
            high,
        )
        evaluation: dict[str, float] = {}
        if cfg.eval.episodes > 0:
            for target in cfg.dt.target_returns:
                result = run_return_conditioned(
                    policy, cfg.env, target, cfg.eval.episodes, seed=cfg.run.seed + 1_000_000
                )
                summary = result.summary()
                evaluation |= {f"target_{target:g}/{k}": v for k, v in summary.items()}
                line = (
                    f"target {target:g}: return {summary['return_mean']:.2f} "
                    f"+/- {summary['return_std']:.2f}"
                )
                if result.success_rate is not None:
                    line += f", success rate {100 * result.success_rate:.1f}%"
                print(line, file=sys.stderr, flush=True)
            logger.log(learner.step, {f"eval/{k}": v for k, v in evaluation.items()})
            (run_dir / "eval.json").write_text(json.dumps(evaluation, indent=2))
    return TrainResult(run_dir, learner.step, learner.step, evaluation or None)
