"""Offline Decision Transformer: dataset -> K-step windows -> learner; return-conditioned eval.

The checkpoint carries everything evaluation needs without the dataset: weights, the resolved
config, state-normalisation statistics, the return scale and the action bounds. One iteration is
``dt.log_every`` gradient steps.

Any observation space PPO's encoders take (images, discrete leaves, Dict / Tuple) and any of
Box, Discrete, MultiDiscrete and MultiBinary actions: :mod:`rlformer.networks.dt_spaces`.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlformer.algos.dt.data_parallel import ParallelDTLearner, make_dt_learner
from rlformer.algos.dt.dataset_fit import check_dataset_fits, dt_space_problem
from rlformer.algos.dt.evaluation import run_return_conditioned
from rlformer.algos.dt.loading import build_dt, dt_encoder
from rlformer.algos.dt.policy import DTPolicy, action_bounds, sampling_problem
from rlformer.config import ConfigError, TrainConfig
from rlformer.data import load_dataset
from rlformer.data.episodes import Dataset, Episode
from rlformer.data.sampling import WindowSampler
from rlformer.networks.dt_spaces import StateLayout, action_kind, model_actions
from rlformer.networks.spaces import SpaceError
from rlformer.policies.base import PolicyInfo
from rlformer.rollout.env_factory import EnvError, describe_env, env_from_config
from rlformer.runs.algorithm import Evaluation, Progress
from rlformer.runs.checkpoints import (
    encode_spec,
    load_weights,
)
from rlformer.runs.directory import check_run_root
from rlformer.runs.loop import checkpoint_bytes_estimate


def normalized_actions(
    dataset: Dataset,
    low: np.ndarray | None,
    high: np.ndarray | None,
    space: gym.Space | None = None,
) -> Dataset:
    """Actions as the DT predicts them: Box actions rescaled from the env's bounds to [-1, 1],
    the range of the DT's tanh head; with ``space`` also indices from 0 (Discrete and
    MultiDiscrete spaces numbered from another ``start``) and MultiBinary bits as floats."""
    if space is None or action_kind(space) == "box":
        if low is None or high is None:
            return dataset

        def convert(actions: np.ndarray) -> np.ndarray:
            return 2.0 * (actions - low) / (high - low) - 1.0

    elif isinstance(space, gym.spaces.Discrete) and space.start == 0:
        return dataset  # indices already: the sampler reads them as they are
    else:

        def convert(actions: np.ndarray) -> np.ndarray:
            return model_actions(actions, space)

    episodes = [
        Episode(
            e.observations,
            convert(e.actions),
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


def refuse_unusable_spaces(
    cfg: TrainConfig, observation_space: gym.Space, action_space: gym.Space
) -> None:
    """:class:`EnvError` naming the env, the leaf and the fix if a DT cannot take its spaces
    (an image too small for ``dt.cnn`` included)."""
    problem = dt_space_problem(observation_space, action_space)
    if problem is None:
        try:
            dt_encoder(cfg, StateLayout(observation_space))
        except SpaceError as err:
            problem = str(err)
    if problem is not None:
        raise EnvError(
            f"{describe_env(cfg.env)}: algo {cfg.algo} cannot take its spaces: {problem}"
        )


def _tensor_or_none(array: np.ndarray | None) -> torch.Tensor | None:
    return None if array is None else torch.as_tensor(np.asarray(array))


class DT:
    """The :class:`~rlformer.runs.algorithm.Algorithm` for ``algo: dt`` (offline)."""

    kind = "dt"

    def __init__(self, cfg: TrainConfig, device: torch.device, resuming: bool = False) -> None:
        self.cfg = cfg
        self.device = device
        env = env_from_config(cfg.env)
        self.observation_space, self.action_space = env.observation_space, env.action_space
        env.close()
        refuse_unusable_spaces(cfg, self.observation_space, self.action_space)
        self.low, self.high = action_bounds(self.action_space)
        # Discrete and MultiDiscrete actions are indices (int64 windows), others floats.
        self.discrete = action_kind(self.action_space) in ("discrete", "multidiscrete")
        self.layout = StateLayout(self.observation_space)
        raw = load_dataset(cfg.dt.dataset)
        check_dataset_fits(raw, self.observation_space, self.action_space, cfg.env.id)
        dataset = normalized_actions(raw, self.low, self.high, self.action_space)
        self.dataset = dataset
        self.dataset_returns = episode_return_range(dataset)
        self.sampler = self.window_sampler(dataset)
        torch.manual_seed(cfg.run.seed)
        self.model = build_dt(cfg, self.observation_space, self.action_space, self.layout)
        problem = sampling_problem(self.model)
        if not cfg.eval.deterministic and problem is not None:
            raise ConfigError(
                f"eval.deterministic: false samples actions, but {problem}; "
                "set eval.deterministic: true"
            )
        self.learner = self.make_learner()
        self.rng = np.random.default_rng(cfg.run.seed)
        self.normalization = {
            "state_mean": _tensor_or_none(self.sampler.state_mean),
            "state_std": _tensor_or_none(self.sampler.state_std),
            "action_low": _tensor_or_none(self.low),
            "action_high": _tensor_or_none(self.high),
        }
        self.iteration = 0

    def window_sampler(
        self, dataset: Dataset, state_stats: tuple[np.ndarray, np.ndarray] | None = None
    ) -> WindowSampler:
        """Windows of ``dataset`` as this run's model reads them, standardised with
        ``state_stats`` (mean, std) or the dataset's own statistics."""
        return WindowSampler(
            dataset,
            self.cfg.dt.context,
            self.cfg.dt.return_scale,
            discrete_actions=self.discrete,
            state_stats=state_stats,
            layout=self.layout,
        )

    def make_learner(self) -> Any:
        # learner.num_learners > 1: replicas on Ray, started by start()
        return make_dt_learner(self.model, self.cfg, self.device)

    @classmethod
    def dry_run(cls, cfg: TrainConfig) -> str:
        """Reads the dataset too: a missing, malformed or mismatched file is the likeliest
        mistake in a DT config, and loading costs seconds even for D4RL-size data."""
        env = env_from_config(cfg.env)
        try:
            summary = cls._check_against_env(cfg, env.observation_space, env.action_space)
        finally:
            env.close()
        check_run_root(cfg.run.root, create=False)
        return f"ok: {cfg.algo} on {cfg.env.id}, {summary}"

    @classmethod
    def _check_against_env(
        cls, cfg: TrainConfig, observation_space: gym.Space, action_space: gym.Space
    ) -> str:
        """--dry-run's checks of what the run reads against the env's spaces; a summary."""
        refuse_unusable_spaces(cfg, observation_space, action_space)
        dataset = load_dataset(cfg.dt.dataset)
        check_dataset_fits(dataset, observation_space, action_space, cfg.env.id)
        return (
            f"dataset {cfg.dt.dataset}: {len(dataset.episodes):,} episodes, "
            f"{dataset.num_transitions:,} transitions"
        )

    def checkpoint_bytes(self) -> int:
        return checkpoint_bytes_estimate(self.model)

    def start(self) -> None:
        if isinstance(self.learner, ParallelDTLearner):
            self.learner.start()

    def close(self) -> None:
        if isinstance(self.learner, ParallelDTLearner):
            self.learner.close()

    def restore(self, payload: dict[str, Any], path: Path, trust: bool) -> None:
        load_weights(self.model, payload, path)
        self.learner.load_state_dict(payload["learner"])
        self.rng.bit_generator.state = payload["sampler_rng"]
        per_iteration = self.cfg.dt.log_every
        self.iteration = int(payload.get("iteration", -(-self.learner.step // per_iteration)))

    def finished(self) -> bool:
        return self.learner.step >= self.cfg.dt.train_steps

    def log_step(self) -> int:
        return self.learner.step

    def progress(self) -> Progress:
        return Progress(self.learner.step, self.cfg.dt.train_steps, "step")

    def sample_windows(self, sampler: WindowSampler) -> Any:
        """One batch of windows (a list of consecutive ones for a memory DT)."""
        dt = self.cfg.dt
        if dt.memory_segments > 0:
            return sampler.sample_sequences(dt.batch_size, dt.memory_segments, self.rng)
        return sampler.sample(dt.batch_size, self.rng)

    def iterate(self) -> dict[str, float]:
        steps = min(self.cfg.dt.log_every, self.cfg.dt.train_steps - self.learner.step)
        metrics: dict[str, float] = {}
        for _ in range(steps):
            metrics = self.learner.update(self.sample_windows(self.sampler))
        if isinstance(self.learner, ParallelDTLearner):  # evaluation and checkpoints read it
            self.learner.sync()
        self.iteration += 1
        return metrics

    def summary(self, metrics: dict[str, float]) -> str:
        return f"loss {metrics.get('loss/action', float('nan')):.4f}"

    def state(self) -> dict[str, Any]:
        return {
            "spec": encode_spec(self.observation_space, self.action_space),
            "model": self.model.state_dict(),
            "learner": self.learner.state_dict(),
            "normalization": self.normalization,
            "dataset_returns": self.dataset_returns,
            "sampler_rng": self.rng.bit_generator.state,
        }

    def policy(self) -> DTPolicy:
        """A CPU copy of the current model as a return-conditioned policy (the learner keeps its
        model where it is, so evaluating during training does not disturb it)."""
        model = copy.deepcopy(self.model).cpu()
        info = PolicyInfo(
            self.cfg.run.name or "dt",
            self.kind,
            training_env=self.cfg.env,
            return_conditioned=True,
            default_targets=list(self.cfg.dt.target_returns),
            dataset_returns=self.dataset_returns,
            sampling_problem=sampling_problem(model),
        )
        return DTPolicy(
            model,
            self.sampler.state_mean,
            self.sampler.state_std,
            self.cfg.dt.return_scale,
            self.cfg.dt.context,
            self.cfg.dt.memory_segments > 0,
            self.low,
            self.high,
            history=self.cfg.dt.act_context,
            info=info,
            observation_space=self.observation_space,
            action_space=self.action_space,
        )

    def evaluate(self, episodes: int, seed: int) -> Evaluation:
        """Every target of ``dt.target_returns``; the score is the first target's mean return."""
        cfg = self.cfg
        policy = self.policy()
        metrics: dict[str, float] = {}
        lines = []
        for target in cfg.dt.target_returns:
            result = run_return_conditioned(
                policy, cfg.env, target, episodes, seed=seed, deterministic=cfg.eval.deterministic
            )
            summary = result.summary()
            metrics |= {f"target_{target:g}/{k}": v for k, v in summary.items()}
            line = (
                f"target {target:g}: return {summary['return_mean']:.2f} "
                f"+/- {summary['return_std']:.2f}"
            )
            if result.success_rate is not None:
                line += f", success rate {100 * result.success_rate:.1f}%"
            lines.append(line)
        first = cfg.dt.target_returns[0]
        return Evaluation(metrics, lines, metrics[f"target_{first:g}/return_mean"])


ALGORITHM = DT
