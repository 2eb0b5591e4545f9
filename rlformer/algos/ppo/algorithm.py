"""PPO with a GTrXL (or LSTM / GRU / MLP) actor-critic, trained online from rollout workers.

One iteration: the collector broadcasts the current weights, every worker returns a fragment of
``rollout.fragment_length`` steps per env, and the learner runs its epochs on the merged batch.
A resumed run continues bit-for-bit on CPU: the checkpoint holds the model, the optimiser, the
learner's minibatch RNG, torch's global RNG and every rollout worker's env states, observations,
memory and action RNG, taken at an iteration boundary.
"""

from __future__ import annotations

import copy
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlformer.algos.ppo.data_parallel import ParallelPPOLearner, make_ppo_learner
from rlformer.algos.ppo.evaluation import run_episodes
from rlformer.algos.ppo.policy import actor_critic_from_payload
from rlformer.config import TrainConfig
from rlformer.config.presets import family_preset
from rlformer.evaluation.runner import EpisodeResults
from rlformer.networks.actor_critic import ActorCritic
from rlformer.networks.spaces import SpaceError
from rlformer.rollout.action_masks import ActionMaskError
from rlformer.rollout.collector import Collector, make_collector
from rlformer.rollout.env_factory import EnvError, check_spaces, describe_env, env_from_config
from rlformer.runs.algorithm import Evaluation, Progress
from rlformer.runs.checkpoints import (
    encode_spec,
    load_checkpoint,
    load_weights,
    seal_state,
    unseal_state,
)
from rlformer.runs.directory import MIN_FREE_BYTES, check_run_root
from rlformer.runs.loop import checkpoint_bytes_estimate, log_line


def build_model(cfg: TrainConfig) -> ActorCritic:
    """An actor-critic for the configured env (spaces read from one throwaway env).

    Spaces rlformer cannot encode stop here, before any run directory exists, as an
    :class:`EnvError` naming the env, its wrappers and the fix.
    """
    env = env_from_config(cfg.env)
    try:
        check_spaces(env.observation_space, env.action_space, cfg.env)
        if cfg.env.action_mask is not None:
            # an info key or a mask size is only seen once the env has reset: see it here
            env.reset(seed=cfg.run.seed)
        return ActorCritic(env.observation_space, env.action_space, cfg.model)
    except (SpaceError, ActionMaskError) as err:
        raise EnvError(f"{describe_env(cfg.env)}: {err}") from None
    finally:
        env.close()


def load_agent(
    path: str | Path, device: str = "cpu", trust: bool = False
) -> tuple[ActorCritic, TrainConfig, dict[str, Any]]:
    """Model, config and checkpoint payload from a checkpoint file or run directory.

    Needs nothing but the checkpoint: the resolved config travels inside it. Never unpickles
    unless ``trust`` (see :mod:`rlformer.runs.checkpoints`).
    """
    payload = load_checkpoint(path, trust)
    model, cfg = actor_critic_from_payload(payload, path)
    return model.to(device), cfg, payload


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


# Below this size, and without an image encoder, rlformer's PPO learner ran 12-22% slower on a
# GPU than on one CPU thread (87k-parameter GTrXL models; a 150k one ran at the same speed on
# both; docs/benchmarks/gpu.md).
SMALL_MODEL_PARAMETERS = 100_000


def cpu_learner_hint(cfg: TrainConfig, device: torch.device, model: ActorCritic) -> str | None:
    """A note for a learner that ``run.device: auto`` put on a GPU where the CPU measured faster.

    With small models an update is likely a string of tiny kernel launches and host-device
    copies (not profiled); an explicit ``run.device: cuda`` is the user's choice and gets none.
    """
    if device.type != "cuda" or cfg.run.device != "auto":
        return None
    if any(isinstance(module, torch.nn.Conv2d) for module in model.modules()):
        return None
    parameters = sum(p.numel() for p in model.parameters())
    if parameters >= SMALL_MODEL_PARAMETERS:
        return None
    return (
        f"note: run.device auto put the learner on cuda; PPO models this small ({parameters:,} "
        "parameters, no image encoder) trained 12-22% slower there than on one CPU thread in "
        "our measurements (docs/benchmarks/gpu.md): set run.device=cpu to use the CPU"
    )


VALUE_SCALING_WHY = {
    "return_std": "rewards divided by the running discounted return's std",
    "none": "rewards and value targets as they are",
    "percentile": "advantages divided by the returns' 5th-95th percentile range",
    "symlog": "the value head predicts symlog(return)",
    "symlog_percentile": "symlog values and percentile-scaled advantages",
    "popart": "a normalised value head, rescaled as the returns move",
}


def choice_lines(cfg: TrainConfig) -> list[str]:
    """The settings a run takes without the user naming them, one line each with why."""
    lines = []
    if cfg.preset is None:  # a named preset has its own line, printed as every run starts
        family = family_preset(cfg.env.id)
        lines.append(
            f"preset: none ({'set to null' if family else 'env.id is of no family with one'})"
        )
    return [*lines, value_scaling_line(cfg)]


def value_scaling_line(cfg: TrainConfig) -> str:
    """Which value and advantage scaling the run takes, and why (every PPO-trained algorithm)."""
    scaling = cfg.model.value_scaling
    if scaling is None:
        scaling = "return_std" if cfg.model.normalize_reward else "none"
    source = "the default" if scaling == "return_std" else "as the config or its preset sets"
    return f"model.value_scaling: {scaling}: {VALUE_SCALING_WHY[scaling]} ({source})"


class PPO:
    """The :class:`~rlformer.runs.algorithm.Algorithm` for ``algo: ppo``."""

    kind = "ppo"

    def __init__(self, cfg: TrainConfig, device: torch.device, resuming: bool = False) -> None:
        self.cfg = cfg
        rollout = cfg.rollout
        self.steps_per_iteration = (
            rollout.num_workers * rollout.envs_per_worker * rollout.fragment_length
        )
        self.iterations = math.ceil(cfg.ppo.total_steps / self.steps_per_iteration)
        torch.manual_seed(cfg.run.seed)
        np.random.seed(cfg.run.seed)
        self.model = build_model(cfg)
        hint = cpu_learner_hint(cfg, device, self.model)
        if hint is not None:
            log_line(hint)
        # learner.num_learners > 1: replicas on Ray, started by start()
        self.learner = make_ppo_learner(self.model, cfg, device, self.iterations)
        self.iteration = 0
        self.collector: Collector | None = None
        self._restored_workers: list[dict[str, Any]] | None = None  # for start()
        self.recent_returns: list[float] = []
        self.recent_successes: list[float] = []
        self._warned_envs = False

    @classmethod
    def dry_run(cls, cfg: TrainConfig) -> str:
        model = build_model(cfg)
        check_run_root(
            cfg.run.root, max(MIN_FREE_BYTES, checkpoint_bytes_estimate(model)), create=False
        )
        parameters = sum(p.numel() for p in model.parameters())
        summary = (
            f"ok: ppo on {cfg.env.id}, {cfg.model.torso} model with {parameters:,} parameters, "
            f"{cfg.ppo.total_steps:,} env steps, runs under {cfg.run.root}"
        )
        return "\n".join([summary, *choice_lines(cfg), *model.encoder.choices])

    @property
    def env_steps(self) -> int:
        return self.iteration * self.steps_per_iteration

    def checkpoint_bytes(self) -> int:
        return checkpoint_bytes_estimate(self.model)

    def start(self) -> None:
        learners = self.learner if isinstance(self.learner, ParallelPPOLearner) else None
        if learners is not None:  # first: it starts Ray with CPUs for the workers too
            learners.start()
        try:
            self.collector = make_collector(self.cfg)
        except BaseException:
            if learners is not None:
                learners.close()
            raise
        if self._restored_workers is not None:
            self.collector.set_state(self._restored_workers)

    def restore(self, payload: dict[str, Any], path: Path, trust: bool) -> None:
        worker_states = unseal_state(payload.get("collector"), path, trust)
        load_weights(self.model, payload, path)
        self.learner.load_state_dict(payload["learner"])
        self._restored_workers = [
            {"state": blob, "unpicklable_envs": None} for blob in worker_states
        ]
        self.iteration = int(payload["iteration"])
        self.recent_returns = list(payload["recent_episodes"]["returns"])
        self.recent_successes = list(payload["recent_episodes"]["successes"])

    def finished(self) -> bool:
        return self.iteration >= self.iterations

    def log_step(self) -> int:
        return self.env_steps

    def progress(self) -> Progress:
        return Progress(self.iteration, self.iterations, "iteration")

    def iterate(self) -> dict[str, float]:
        assert self.collector is not None
        started = time.perf_counter()
        fragment = self.collector.collect(self.model.state_dict(), version=self.iteration)
        collect_s = time.perf_counter() - started
        metrics = self.learner.update(fragment)
        self.iteration += 1
        self.recent_returns = (self.recent_returns + fragment.episode_returns)[-100:]
        self.recent_successes = (self.recent_successes + fragment.episode_successes)[-100:]
        elapsed = time.perf_counter() - started
        metrics |= {
            "time/collect_s": collect_s,
            "time/iteration_s": elapsed,
            "time/env_steps_per_s": self.steps_per_iteration / elapsed,
        }
        if self.recent_returns:
            metrics["rollout/return_mean"] = float(np.mean(self.recent_returns))
        if self.recent_successes:
            metrics["rollout/success_rate"] = float(np.mean(self.recent_successes))
        return metrics

    def summary(self, metrics: dict[str, float]) -> str:
        if "rollout/return_mean" in metrics:
            text = f"steps {self.env_steps} return {metrics['rollout/return_mean']:.2f}"
        else:  # Acrobot's first 500-step episodes outlast the first iterations
            text = f"steps {self.env_steps} return - (no episode finished yet)"
        if "rollout/success_rate" in metrics:
            text += f" success {metrics['rollout/success_rate']:.2f}"
        return text

    def state(self) -> dict[str, Any]:
        assert self.collector is not None
        states = self.collector.get_state()
        problems = sorted({s["unpicklable_envs"] for s in states if s["unpicklable_envs"]})
        if problems and not self._warned_envs:
            self._warned_envs = True
            log_line(
                f"warning: env {self.cfg.env.id!r} cannot be pickled ({problems[0]}); "
                "checkpoints are written without env state, so a resumed run starts "
                "fresh episodes"
            )
        return {
            "spec": encode_spec(self.model.observation_space, self.model.action_space),
            "model": self.model.state_dict(),
            "learner": self.learner.state_dict(),
            "collector": seal_state([s["state"] for s in states]),
            "recent_episodes": {
                "returns": self.recent_returns,
                "successes": self.recent_successes,
            },
        }

    def evaluate(self, episodes: int, seed: int) -> Evaluation:
        cfg = self.cfg
        results = run_episodes(
            copy.deepcopy(self.model).cpu(),  # the learner keeps its model, device and mode
            cfg.env,
            episodes,
            cfg.eval.num_envs,
            deterministic=cfg.eval.deterministic,
            seed=seed,
        )
        summary = results.summary()
        return Evaluation(summary, [format_evaluation(results)], summary["return_mean"])

    def close(self) -> None:
        if self.collector is not None:
            self.collector.close()
            self.collector = None
        if isinstance(self.learner, ParallelPPOLearner):  # after the workers: it may stop Ray
            self.learner.close()


ALGORITHM = PPO
