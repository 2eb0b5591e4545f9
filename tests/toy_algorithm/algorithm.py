"""The toy algorithm the run loop drives: perturb the weights, keep the candidate if it scores
at least as well. Everything random draws from one torch generator that the checkpoint holds,
so a resumed run ends exactly where an uninterrupted one does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlformer.config import TrainConfig
from rlformer.evaluation.runner import run_policy_episodes
from rlformer.policies.base import PolicyInfo
from rlformer.rollout.env_factory import env_from_config
from rlformer.runs.algorithm import Evaluation, Progress
from rlformer.runs.checkpoints import encode_spec
from tests.toy_algorithm.policy import LinearPolicy


class HillClimb:
    kind = "toy"

    def __init__(self, cfg: TrainConfig, device: torch.device, resuming: bool = False) -> None:
        self.cfg, self.iteration = cfg, 0
        env = env_from_config(cfg.env)
        self.observation_space, self.action_space = env.observation_space, env.action_space
        env.close()
        obs_dim = int(np.prod(self.observation_space.shape))
        self.weights = {
            "weight": torch.zeros(int(self.action_space.n), obs_dim),
            "bias": torch.zeros(int(self.action_space.n)),
        }
        self.best = -float("inf")
        self.generator = torch.Generator().manual_seed(cfg.run.seed)

    @classmethod
    def dry_run(cls, cfg: TrainConfig) -> str:
        algo = cls(cfg, torch.device("cpu"))
        return f"toy: a linear policy on {cfg.env.id} ({algo.action_space.n} actions)"

    def checkpoint_bytes(self) -> int:
        return 2**16

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass

    def policy(self, weights: dict[str, torch.Tensor]) -> LinearPolicy:
        info = PolicyInfo("toy", "toy", training_env=self.cfg.env)
        return LinearPolicy(self.observation_space, self.action_space, weights, info)

    def _score(self, weights: dict[str, torch.Tensor], seed: int) -> float:
        results = run_policy_episodes(
            self.policy(weights), self.cfg.env, self.cfg.toy.episodes, num_envs=1, seed=seed
        )
        return float(np.mean(results.returns))

    def iterate(self) -> dict[str, float]:
        noise = self.cfg.toy.noise
        candidate = {
            k: v + noise * torch.randn(v.shape, generator=self.generator)
            for k, v in self.weights.items()
        }
        score = self._score(candidate, self.cfg.run.seed + 1000 * self.iteration)
        if score >= self.best:
            self.weights, self.best = candidate, score
        self.iteration += 1
        return {"toy/candidate_return": score, "toy/best_return": self.best}

    def finished(self) -> bool:
        return self.iteration >= self.cfg.toy.iterations

    def log_step(self) -> int:
        return self.iteration

    def progress(self) -> Progress:
        return Progress(self.iteration, self.cfg.toy.iterations, "iterations")

    def summary(self, metrics: dict[str, float]) -> str:
        return f"best return {metrics['toy/best_return']:.1f}"

    def state(self) -> dict[str, Any]:
        return {
            "spec": encode_spec(self.observation_space, self.action_space),
            "model": {k: v.clone() for k, v in self.weights.items()},
            "toy_best": self.best,
            "toy_generator": self.generator.get_state(),
        }

    def restore(self, payload: dict[str, Any], path: Path, trust: bool) -> None:
        self.weights = {k: v.clone() for k, v in payload["model"].items()}
        self.best = float(payload["toy_best"])
        self.generator.set_state(payload["toy_generator"])
        self.iteration = int(payload["iteration"])

    def evaluate(self, episodes: int, seed: int) -> Evaluation:
        results = run_policy_episodes(self.policy(self.weights), self.cfg.env, episodes, seed=seed)
        metrics = results.summary()
        line = f"eval: return {metrics['return_mean']:.1f} over {episodes} episodes"
        return Evaluation(metrics, [line], metrics["return_mean"])


ALGORITHM = HillClimb
