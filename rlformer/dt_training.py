"""Offline Decision Transformer training: dataset -> windows -> learner, checkpoints, evaluation.

The checkpoint carries everything evaluation needs without the dataset: weights, the resolved
config, state-normalisation statistics, the return scale and the action bounds.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from tqdm import tqdm

from rlformer.config import TrainConfig, dump_config
from rlformer.core.device import resolve_device
from rlformer.data import load_dataset
from rlformer.data.episodes import Dataset, Episode
from rlformer.data.sampling import WindowSampler
from rlformer.evaluation.dt_runner import DTPolicy, action_bounds, run_return_conditioned
from rlformer.learners.dt import DTLearner
from rlformer.models.decision_transformer import DecisionTransformer
from rlformer.rollout.env_factory import env_from_config
from rlformer.runs import MetricsLogger, load_checkpoint, new_run_dir, save_checkpoint


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


def load_dt_policy(payload: dict[str, Any]) -> tuple[DTPolicy, TrainConfig]:
    """A ready-to-run DT policy from a checkpoint payload (``kind == "dt"``)."""
    cfg = TrainConfig.model_validate(payload["config"])
    spec = payload["spec"]
    model = build_dt(cfg, spec["observation_space"], spec["action_space"])
    model.load_state_dict(payload["model"])
    stats = payload["normalization"]
    policy = DTPolicy(
        model,
        stats["state_mean"],
        stats["state_std"],
        cfg.dt.return_scale,
        cfg.dt.context,
        carry_memory=cfg.dt.memory_segments > 0,
        action_low=stats["action_low"],
        action_high=stats["action_high"],
    )
    return policy, cfg


def train_dt(cfg: TrainConfig, resume_dir: str | Path | None = None) -> Any:
    """Train (or resume) a DT run; returns a ``TrainResult``."""
    from rlformer.training import TrainResult

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
    learner = DTLearner(model, cfg.dt, device)
    rng = np.random.default_rng(cfg.run.seed)
    normalization = {
        "state_mean": sampler.state_mean,
        "state_std": sampler.state_std,
        "action_low": low,
        "action_high": high,
    }
    if resume_dir is not None:
        run_dir = Path(resume_dir)
        payload = load_checkpoint(run_dir)
        model.load_state_dict(payload["model"])
        learner.load_state_dict(payload["learner"])
        rng.bit_generator.state = payload["sampler_rng"]
        torch.set_rng_state(payload["torch_rng"])
        logger = MetricsLogger(run_dir, resume_step=learner.step)
    else:
        run_dir = new_run_dir(cfg.run.root, cfg.run.name)
        (run_dir / "config.yaml").write_text(dump_config(cfg))
        logger = MetricsLogger(run_dir)
        print(f"run directory: {run_dir}", file=sys.stderr, flush=True)

    def checkpoint() -> None:
        save_checkpoint(
            run_dir,
            learner.step,
            {
                "kind": "dt",
                "config": cfg.model_dump(mode="json"),
                "spec": {"observation_space": observation_space, "action_space": action_space},
                "model": model.state_dict(),
                "learner": learner.state_dict(),
                "normalization": normalization,
                "dataset_returns": dataset_returns,
                "sampler_rng": rng.bit_generator.state,
                "torch_rng": torch.get_rng_state(),
            },
            keep=cfg.run.keep_checkpoints,
        )

    interactive = cfg.run.progress and sys.stderr.isatty()
    bar = tqdm(total=cfg.dt.train_steps, initial=learner.step, unit="step", disable=not interactive)
    checkpoint_every = cfg.run.checkpoint_every * cfg.dt.log_every
    while learner.step < cfg.dt.train_steps:
        if cfg.dt.memory_segments > 0:
            windows = sampler.sample_sequences(cfg.dt.batch_size, cfg.dt.memory_segments, rng)
            metrics = learner.update(windows)
        else:
            metrics = learner.update(sampler.sample(cfg.dt.batch_size, rng))
        bar.update(1)
        if learner.step % cfg.dt.log_every == 0:
            logger.log(learner.step, metrics)
            bar.set_postfix_str(f"loss {metrics['loss/action']:.4f}")
        if learner.step % checkpoint_every == 0 or learner.step == cfg.dt.train_steps:
            checkpoint()
    bar.close()

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
    logger.close()
    return TrainResult(run_dir, learner.step, learner.step, evaluation or None)
