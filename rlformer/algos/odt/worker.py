"""ODT's rollout worker: whole return-conditioned episodes with a CPU copy of the stochastic DT.

It plugs into the same collectors as PPO's fragment workers (in-process or as a Ray actor), so
``rollout.backend`` and ``rollout.num_workers`` mean the same for both. Each worker plays
``rollout.envs_per_worker`` episodes per iteration, in parallel, sampling actions with its own
torch generator. Episode ``j`` of env slot ``i`` is reset with a seed derived from (worker seed,
round, slot), so the only state between iterations is the round counter and the generator:
both backends, and a resumed run, play exactly the same episodes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rlformer.algos.dt.evaluation import play_return_conditioned
from rlformer.algos.dt.loading import build_dt
from rlformer.algos.dt.policy import DTPolicy
from rlformer.config import TrainConfig
from rlformer.data.episodes import Episode
from rlformer.networks.spaces import Tree
from rlformer.rollout.env_factory import env_from_config
from rlformer.rollout.env_guard import EnvDataError, EnvGuard
from rlformer.rollout.worker import WorkerProcess, worker_seed


@dataclass
class EpisodeBatch:
    """Whole episodes from one or more workers, all played by one policy version."""

    episodes: list[Episode]
    successes: list[float | None]
    policy_version: int
    worker_index: int
    sample_seconds: float = 0.0

    @property
    def env_steps(self) -> int:
        return sum(len(e) for e in self.episodes)

    @staticmethod
    def concat(batches: list[EpisodeBatch]) -> EpisodeBatch:
        versions = {b.policy_version for b in batches}
        if len(versions) != 1:
            raise ValueError(f"episodes of several policy versions: {sorted(versions)}")
        return EpisodeBatch(
            [e for b in batches for e in b.episodes],
            [s for b in batches for s in b.successes],
            batches[0].policy_version,
            -1,
            max(b.sample_seconds for b in batches),
        )


def episode_seed(seed: int, round_index: int, slot: int) -> int:
    """Reset seed of env ``slot``'s episode in collection round ``round_index``."""
    return int(np.random.SeedSequence([seed, round_index, slot]).generate_state(1)[0])


class EpisodeWorker(WorkerProcess):
    """Plays ``num_envs`` exploration episodes per :meth:`sample` call."""

    def __init__(
        self,
        cfg: TrainConfig,
        normalization: dict[str, np.ndarray | None],
        target_return: float,
        seed: int,
        worker_index: int = 0,
    ) -> None:
        torch.set_num_threads(1)
        self.worker_index = worker_index
        label = f"rollout worker {worker_index}"
        self.envs = [
            EnvGuard(env_from_config(cfg.env), slot, label)
            for slot in range(cfg.rollout.envs_per_worker)
        ]
        # The DT the learner trains, built the same way. Its weights come from the learner;
        # building it must not draw from the learner's RNG (in-process workers share it), so a
        # run that starts its workers late (after pretraining only) continues exactly like one
        # that started them at once.
        observation_space = self.envs[0].observation_space
        action_space = self.envs[0].action_space
        with torch.random.fork_rng(devices=[]):
            model = build_dt(cfg, observation_space, action_space)
        self.policy = DTPolicy(
            model,
            normalization["state_mean"],
            normalization["state_std"],
            cfg.dt.return_scale,
            cfg.dt.context,
            cfg.dt.memory_segments > 0,
            normalization["action_low"],
            normalization["action_high"],
            history=cfg.dt.act_context,
            observation_space=observation_space,
            action_space=action_space,
        )
        self.env_id = cfg.env.id
        self.target_return = target_return
        self.seed = worker_seed(seed, worker_index)
        self.generator = torch.Generator().manual_seed(self.seed)
        self.round = 0
        self.policy_version = -1

    def set_weights(self, weights: dict[str, torch.Tensor], version: int) -> None:
        self.policy.model.load_state_dict(weights)
        self.policy_version = version

    def sample(self) -> EpisodeBatch:
        started = time.perf_counter()
        seeds = [episode_seed(self.seed, self.round, slot) for slot in range(len(self.envs))]
        played = play_return_conditioned(
            self.policy, self.envs, self.target_return, seeds, self.generator
        )
        self.round += 1
        episodes = []
        for slot, p in enumerate(played):
            finite = all(np.isfinite(leaf).all() for leaf in _leaves(p.observations))
            if not (finite and np.isfinite(p.rewards).all()):
                raise EnvDataError(
                    f"env {self.env_id!r} returned a NaN or infinite observation or reward on "
                    f"rollout worker {self.worker_index}, env slot {slot}"
                )
            episodes.append(
                Episode(
                    p.observations,
                    p.actions,
                    p.rewards.astype(np.float32),
                    p.terminated,
                    p.truncated,
                )
            )
        return EpisodeBatch(
            episodes,
            [p.success for p in played],
            self.policy_version,
            self.worker_index,
            time.perf_counter() - started,
        )

    def get_state(self) -> dict[str, Any]:
        return {"round": self.round, "generator": self.generator.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        self.round = int(state["round"])
        self.generator.set_state(state["generator"])

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _leaves(observations: Tree) -> list[np.ndarray]:
    return list(observations.values()) if isinstance(observations, dict) else [observations]
