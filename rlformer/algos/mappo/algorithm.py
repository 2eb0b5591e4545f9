"""Multi-agent PPO (MAPPO, Yu et al. 2022; IPPO with ``mappo.critic: independent``) with
memory: one network per policy group, shared by the group's agents, one memory per agent.

One iteration: the collector broadcasts every group's weights, each worker returns a
:class:`~rlformer.algos.mappo.worker.TeamFragment` (a fragment per group, its agents as rows),
and each group's PPO learner runs its epochs on its own rows. The learner is PPO's, unchanged:
rows of absent agents are masked out of the loss (``Fragment.valid``), so the first-epoch ratio
is 1 exactly, as for a single agent. A resumed run continues bit-for-bit on CPU: the checkpoint
holds the networks, every learner's optimiser and RNG, torch's RNG and every worker's envs,
observations, memories and action RNG.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from rlformer.algos.mappo.config import mappo_section
from rlformer.algos.mappo.evaluation import play_team
from rlformer.algos.mappo.masks import check_first_masks
from rlformer.algos.mappo.team import build_team, make_parallel_env
from rlformer.algos.mappo.worker import MultiAgentWorker, TeamFragment, build_team_model
from rlformer.algos.ppo.algorithm import value_scaling_line
from rlformer.algos.ppo.config import PPOConfig
from rlformer.algos.ppo.learner import PPOLearner
from rlformer.config import TrainConfig
from rlformer.networks.actor_critic import ActorCritic
from rlformer.rollout.action_masks import ActionMaskError
from rlformer.rollout.collector import Collector, make_collector
from rlformer.rollout.env_factory import EnvError
from rlformer.rollout.worker_spec import WorkerSpec
from rlformer.runs.algorithm import Evaluation, Progress
from rlformer.runs.checkpoints import seal_state, unseal_state
from rlformer.runs.directory import MIN_FREE_BYTES, check_run_root
from rlformer.runs.loop import checkpoint_bytes_estimate, log_line

RECENT_EPISODES = 100


def team_worker_spec(cfg: TrainConfig) -> WorkerSpec:
    """The multi-agent workers of ``cfg`` (for either collector backend)."""
    r = cfg.rollout
    return WorkerSpec(
        MultiAgentWorker,
        (mappo_section(cfg), cfg.model, r.envs_per_worker, r.fragment_length, cfg.run.seed),
    )


def describe_team(cfg: TrainConfig) -> tuple[Any, torch.nn.ModuleDict]:
    """The task's team layout and a fresh network per group (one throwaway env)."""
    env = make_parallel_env(mappo_section(cfg))
    try:
        team = build_team(mappo_section(cfg), env)
        if team.action_mask is not None:  # a mask's key and size are only seen after a reset
            try:
                check_first_masks(team, env, cfg.run.seed)
            except ActionMaskError as err:
                raise EnvError(f"mappo.env {mappo_section(cfg).env!r}: {err}") from None
    finally:
        env.close()
    return team, build_team_model(team, cfg.model)


def ppo_section(cfg: TrainConfig) -> PPOConfig:
    """The run config's ``ppo`` section (the objective every group's learner uses), typed."""
    section: PPOConfig = getattr(cfg, "ppo")  # noqa: B009 (the generic model does not declare it)
    return section


class MAPPO:
    """The :class:`~rlformer.runs.algorithm.Algorithm` for ``algo: mappo``."""

    kind = "mappo"

    def __init__(self, cfg: TrainConfig, device: torch.device, resuming: bool = False) -> None:
        self.cfg = cfg
        r = cfg.rollout
        self.steps_per_iteration = r.num_workers * r.envs_per_worker * r.fragment_length
        self.iterations = math.ceil(mappo_section(cfg).total_steps / self.steps_per_iteration)
        torch.manual_seed(cfg.run.seed)
        np.random.seed(cfg.run.seed)
        self.team, self.model = describe_team(cfg)
        self.learners = {
            name: PPOLearner(
                cast(ActorCritic, network),
                ppo_section(cfg),
                device,
                self.iterations,
                seed=cfg.run.seed + index,
                nonfinite=cfg.run.nonfinite,
            )
            for index, (name, network) in enumerate(self.model.items())
        }
        self.iteration = 0
        self.collector: Collector | None = None
        self._restored_workers: list[dict[str, Any]] | None = None
        self.recent_returns: list[float] = []
        self.recent_successes: list[float] = []
        self._warned_envs = False

    @classmethod
    def dry_run(cls, cfg: TrainConfig) -> str:
        team, model = describe_team(cfg)
        check_run_root(
            cfg.run.root, max(MIN_FREE_BYTES, checkpoint_bytes_estimate(model)), create=False
        )
        critic = team.critic_input or "independent"
        section = mappo_section(cfg)
        lines = [
            f"ok: mappo on {section.env}, {len(team.agents)} agents in {len(team.groups)} "
            f"group(s), {cfg.model.torso} networks, critic {critic}, "
            f"{section.total_steps:,} env steps, runs under {cfg.run.root}"
        ]
        for group in team.groups:
            network = cast(ActorCritic, model[group.name])
            parameters = sum(p.numel() for p in network.parameters())
            lines.append(
                f"group {group.name}: agents {', '.join(group.agents)}; {parameters:,} parameters"
            )
            lines.extend(f"group {group.name} actor: {c}" for c in network.encoder.choices)
            if network.critic_encoder is not None:
                lines.extend(
                    f"group {group.name} critic: {c}" for c in network.critic_encoder.choices
                )
        return "\n".join([*lines, value_scaling_line(cfg)])

    @property
    def env_steps(self) -> int:
        return self.iteration * self.steps_per_iteration

    def checkpoint_bytes(self) -> int:
        return checkpoint_bytes_estimate(self.model)

    def start(self) -> None:
        self.collector = make_collector(self.cfg, team_worker_spec(self.cfg))
        if self._restored_workers is not None:
            self.collector.set_state(self._restored_workers)

    def restore(self, payload: dict[str, Any], path: Path, trust: bool) -> None:
        worker_states = unseal_state(payload.get("collector"), path, trust)
        self.model.load_state_dict(payload["model"])
        for name, learner in self.learners.items():
            learner.load_state_dict(payload["learners"][name])
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
        batch = cast(TeamFragment, self.collector.collect(self.model.state_dict(), self.iteration))
        collect_s = time.perf_counter() - started
        metrics: dict[str, float] = {}
        for name, learner in self.learners.items():
            for key, value in learner.update(batch.fragments[name]).items():
                metrics[f"{name}/{key}"] = value
        self.iteration += 1
        self.recent_returns = (self.recent_returns + batch.episode_returns)[-RECENT_EPISODES:]
        self.recent_successes = (self.recent_successes + batch.episode_successes)[-RECENT_EPISODES:]
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
        if "rollout/return_mean" not in metrics:
            return f"steps {self.env_steps} return - (no episode finished yet)"
        text = f"steps {self.env_steps} return {metrics['rollout/return_mean']:.2f}"
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
                f"warning: mappo.env {mappo_section(self.cfg).env!r} cannot be saved "
                f"({problems[0]}); checkpoints are written without env state, so a resumed run "
                "starts fresh episodes"
            )
        return {
            "spec": {
                "groups": {g.name: list(g.agents) for g in self.team.groups},
                "critic_input": self.team.critic_input,
            },
            "model": self.model.state_dict(),
            "learners": {name: learner.state_dict() for name, learner in self.learners.items()},
            "collector": seal_state([s["state"] for s in states]),
            "recent_episodes": {
                "returns": self.recent_returns,
                "successes": self.recent_successes,
            },
        }

    def evaluate(self, episodes: int, seed: int) -> Evaluation:
        weights = {k: v.detach().cpu() for k, v in self.model.state_dict().items()}
        results = play_team(
            weights, self.cfg, episodes, self.cfg.eval.num_envs, seed, self.cfg.eval.deterministic
        )
        summary = results.summary()
        return Evaluation(summary, results.lines(), summary["return_mean"])

    def close(self) -> None:
        if self.collector is not None:
            self.collector.close()
            self.collector = None


ALGORITHM = MAPPO
