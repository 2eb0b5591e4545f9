"""Online Decision Transformer (Zheng, Zhang and Grover, ICML 2022) on rlformer's DT.

Two phases, one run:

1. *Pretraining* (skipped with ``odt.init_from``): ``odt.pretrain_steps`` gradient steps on the
   offline dataset, with ODT's loss (likelihood of the data's actions plus a learned entropy
   bonus) instead of the DT's squared error.
2. *Online*: each iteration the rollout workers (local or Ray, the collectors PPO uses) play
   whole episodes with the current stochastic DT, conditioned on the exploration return; the
   episodes join a FIFO buffer of whole trajectories seeded with the best offline ones, and the
   learner takes ``odt.updates_per_iteration`` steps on windows sampled from the buffer, with
   returns-to-go computed from what each trajectory achieved (hindsight relabelling).

The state normalisation stays the one of the offline data (or of ``init_from``'s checkpoint) for
the whole run, so the policy's inputs mean the same before and after going online. Checkpoints
have ``kind: dt``: ``rlformer eval`` sweeps target returns on them exactly as on a DT.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlformer.algos.dt.algorithm import DT
from rlformer.algos.dt.loading import stored_array
from rlformer.algos.odt.data_parallel import ParallelODTLearner, make_odt_learner
from rlformer.algos.odt.learner import ODTLearner
from rlformer.algos.odt.worker import EpisodeBatch, EpisodeWorker
from rlformer.config import TrainConfig
from rlformer.data.episodes import Dataset, Episode
from rlformer.data.sampling import WindowSampler
from rlformer.data.trajectory_buffer import CapacityChanged, TrajectoryBuffer
from rlformer.rollout.collector import Collector, make_collector
from rlformer.rollout.worker_spec import WorkerSpec
from rlformer.runs.algorithm import Progress
from rlformer.runs.checkpoints import (
    CheckpointError,
    checkpoint_config,
    checkpoint_spaces,
    load_checkpoint,
    require_keys,
)

# What must match between odt.init_from's checkpoint and this run for its weights to mean the
# same thing here.
MATCHING_DT_SETTINGS = (
    "core",
    "context",
    "max_timestep",
    "timestep_embedding",
    "return_scale",
    "memory_segments",
    "cnn",
    "cnn_features",
    "image_scale",
)


def initial_policy(
    cfg: TrainConfig, path: str, observation_space: gym.Space, action_space: gym.Space
) -> dict[str, Any]:
    """``odt.init_from``'s checkpoint, refused with the setting to change unless it is a DT or
    ODT trained with this run's network settings on these spaces."""
    payload = load_checkpoint(path)
    if payload.get("kind") != "dt":
        raise CheckpointError(
            f"{path}: odt.init_from needs a DT or ODT checkpoint, this one is "
            f"{payload.get('kind', 'ppo')!r}"
        )
    source = checkpoint_config(payload, path)
    if not source.dt.condition_on_return:
        raise CheckpointError(
            f"{path}: a behaviour-cloning DT (dt.condition_on_return: false) never read a "
            "return, which an online DT conditions on; fine-tune a return-conditioned DT"
        )
    for name in MATCHING_DT_SETTINGS:
        theirs, ours = getattr(source.dt, name), getattr(cfg.dt, name)
        if theirs != ours:
            raise CheckpointError(
                f"{path}: dt.{name} is {theirs!r} there and {ours!r} here; set the same "
                f"dt.{name} to fine-tune it"
            )
    if checkpoint_spaces(payload, path) != (observation_space, action_space):
        raise CheckpointError(
            f"{path}: trained on other observation or action spaces than {cfg.env.id}"
        )
    require_keys(payload, path, "model", "normalization")
    return payload


class ODT(DT):
    """The :class:`~rlformer.runs.algorithm.Algorithm` for ``algo: odt``."""

    kind = "dt"

    def __init__(self, cfg: TrainConfig, device: torch.device, resuming: bool = False) -> None:
        super().__init__(cfg, device, resuming)
        odt = cfg.odt
        if odt.init_from is not None and not resuming:
            # A resumed run takes weights and normalisation from its own checkpoint, so it
            # still resumes after init_from's file has moved.
            self._load_initial_policy(odt.init_from)
        self.pretrain_steps = 0 if odt.init_from is not None else odt.pretrain_steps
        self.buffer = TrajectoryBuffer(odt.replay_size, self.dataset.episodes)
        self.exploration_return = (
            odt.exploration_return
            if odt.exploration_return is not None
            else 2.0 * max(cfg.dt.target_returns)
        )
        self.env_steps = 0
        self.collector: Collector | None = None
        self._restored_workers: list[Any] | None = None  # for start()

    def make_learner(self) -> ODTLearner | ParallelODTLearner:
        # learner.num_learners > 1 (or learner.device / resources): replicas on Ray
        return make_odt_learner(self.model, self.cfg, self.device)

    @classmethod
    def _check_against_env(
        cls, cfg: TrainConfig, observation_space: gym.Space, action_space: gym.Space
    ) -> str:
        summary = super()._check_against_env(cfg, observation_space, action_space)
        if cfg.odt.init_from is None:
            return summary
        initial_policy(cfg, cfg.odt.init_from, observation_space, action_space)
        return f"{summary}; fine-tunes {cfg.odt.init_from}"

    def _load_initial_policy(self, path: str) -> None:
        """Weights and state normalisation of a DT (or ODT) checkpoint to fine-tune."""
        payload = initial_policy(self.cfg, path, self.observation_space, self.action_space)
        # A plain DT has no spread head; ODT starts it fresh and keeps every other weight.
        missing, unexpected = self.model.load_state_dict(payload["model"], strict=False)
        if unexpected or any(not key.startswith("predict_log_std.") for key in missing):
            raise CheckpointError(
                f"{path}: its weights do not fit this DT (missing {missing[:3]}, "
                f"unexpected {unexpected[:3]})"
            )
        self._use_state_stats(payload["normalization"])

    def _use_state_stats(self, stats: dict[str, Any]) -> None:
        """Normalise states with a checkpoint's statistics instead of this dataset's."""
        mean, std = stored_array(stats["state_mean"]), stored_array(stats["state_std"])
        self.sampler = self.window_sampler(self.dataset, (mean, std))
        self.normalization |= {"state_mean": stats["state_mean"], "state_std": stats["state_std"]}

    def sampler_over(self, episodes: list[Episode], name: str) -> WindowSampler:
        """Windows of ``episodes``, normalised with the offline data's state statistics."""
        stats = (self.sampler.state_mean, self.sampler.state_std)
        return self.window_sampler(Dataset(episodes, name), stats)

    # ------------------------------------------------------------ run-loop protocol
    def start(self) -> None:
        super().start()  # learners on Ray first: they start Ray with CPUs for the workers too
        try:
            self._start_workers()
        except BaseException:
            super().close()
            raise

    def _start_workers(self) -> None:
        if self.cfg.odt.online_steps == 0:
            return  # pretraining only: no rollout workers to start
        spec = WorkerSpec(
            EpisodeWorker,
            (
                self.cfg,
                {
                    "state_mean": self.sampler.state_mean,
                    "state_std": self.sampler.state_std,
                    "action_low": self.low,
                    "action_high": self.high,
                },
                self.exploration_return,
                self.cfg.run.seed,
            ),
        )
        self.collector = make_collector(self.cfg, spec)
        if self._restored_workers is not None:
            self.collector.set_state(self._restored_workers)

    def close(self) -> None:
        if self.collector is not None:
            self.collector.close()
            self.collector = None
        super().close()  # after the workers: the learners may stop Ray

    @property
    def online(self) -> bool:
        return self.learner.step >= self.pretrain_steps

    def finished(self) -> bool:
        return self.online and self.env_steps >= self.cfg.odt.online_steps

    def progress(self) -> Progress:
        if not self.online:
            return Progress(self.learner.step, self.pretrain_steps, "pretrain step")
        return Progress(self.env_steps, self.cfg.odt.online_steps, "env step")

    def iterate(self) -> dict[str, float]:
        if not self.online:
            steps = min(self.cfg.dt.log_every, self.pretrain_steps - self.learner.step)
            metrics: dict[str, float] = {}
            for _ in range(steps):
                metrics = self.learner.update(self.sample_windows(self.sampler))
            self._sync()
            self.iteration += 1
            return metrics
        return self._online_iteration()

    def _sync(self) -> None:
        """Replica 0's weights into the driver's model (rollouts, evaluation, checkpoints)."""
        if isinstance(self.learner, ParallelODTLearner):
            self.learner.sync()

    def _online_iteration(self) -> dict[str, float]:
        assert self.collector is not None
        started = time.perf_counter()
        batch: EpisodeBatch = self.collector.collect(
            self.model.state_dict(), version=self.iteration
        )
        collect_s = time.perf_counter() - started
        self.buffer.add(batch.episodes)
        self.env_steps += batch.env_steps
        buffer_sampler = self.sampler_over(self.buffer.episodes, "replay buffer")
        update_started = time.perf_counter()
        metrics: dict[str, float] = {}
        for _ in range(self.cfg.odt.updates_per_iteration):
            metrics = self.learner.update(self.sample_windows(buffer_sampler))
        self._sync()
        self.iteration += 1
        returns = [e.episode_return for e in batch.episodes]
        buffer_returns = [e.episode_return for e in self.buffer.episodes]
        metrics |= {
            "rollout/return_mean": float(np.mean(returns)),
            "rollout/return_max": float(np.max(returns)),
            "rollout/episodes": float(len(returns)),
            "rollout/env_steps": float(self.env_steps),
            "rollout/target_return": self.exploration_return,
            "buffer/trajectories": float(len(self.buffer)),
            "buffer/return_mean": float(np.mean(buffer_returns)),
            "time/collect_s": collect_s,
            "time/update_s": time.perf_counter() - update_started,
        }
        successes = [s for s in batch.successes if s is not None]
        if successes:
            metrics["rollout/success_rate"] = float(np.mean(successes))
        return metrics

    def summary(self, metrics: dict[str, float]) -> str:
        text = super().summary(metrics)
        if "policy/alpha" in metrics:
            text += f" alpha {metrics['policy/alpha']:.3f}"
        if "rollout/return_mean" in metrics:
            text += f" return {metrics['rollout/return_mean']:.1f}"
        return text

    def state(self) -> dict[str, Any]:
        return {
            **super().state(),
            "odt": {
                "env_steps": self.env_steps,
                "buffer": self.buffer.state_dict(),
                # None before any worker ran: a resumed run starts them from the seed.
                "workers": None if self.collector is None else self.collector.get_state(),
            },
        }

    def restore(self, payload: dict[str, Any], path: Path, trust: bool) -> None:
        super().restore(payload, path, trust)
        require_keys(payload, path, "odt", "normalization")
        self._use_state_stats(payload["normalization"])  # odt.init_from's, if it had one
        state = payload["odt"]
        self.env_steps = int(state["env_steps"])
        try:
            self.buffer.load_state_dict(state["buffer"], self.dataset.episodes)
        except CapacityChanged as err:
            raise CheckpointError(
                f"{path}: its replay buffer holds online trajectories at odt.replay_size="
                f"{err.saved}, not {self.buffer.capacity}; resume with --set "
                f"odt.replay_size={err.saved} (the size can change only before going online)"
            ) from None
        self._restored_workers = state["workers"]


ALGORITHM = ODT
