"""Ray backend: one actor per rollout worker, on this machine or across a Ray cluster.

Each actor is the same :class:`~rlformer.rollout.worker.RolloutWorker` the local backend runs
in-process, so for equal seeds and weights both backends return identical fragments.

Per iteration the learner's weights go into the object store once (``ray.put``) and every actor
receives the reference. Fragments are tagged with the policy version; one of another version is
an error, never silently mixed in. A worker that dies or does not answer within
``rollout.sample_timeout_s`` is replaced by a fresh actor with the same index and seed (its envs
restart from their first episode) and its fragment is collected again, so a batch is always
complete. Past ``rollout.max_worker_restarts`` replacements the run stops with
:class:`RolloutError`.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import torch

from rlformer.config import TrainConfig
from rlformer.rollout.fragment import Fragment
from rlformer.rollout.worker import RolloutWorker


class RolloutError(RuntimeError):
    """Collection cannot continue (too many worker failures, or a fragment of the wrong version)."""


class RayCollector:
    """``num_workers`` Ray actors, each stepping ``envs_per_worker`` envs."""

    def __init__(self, cfg: TrainConfig) -> None:
        import ray

        self._ray = ray
        self.cfg = cfg
        self._owns_ray = False
        if not ray.is_initialized():
            address = cfg.rollout.ray_address
            if address is None:
                needed = math.ceil(cfg.rollout.num_workers * cfg.rollout.worker_cpus)
                ray.init(
                    num_cpus=max(needed, os.cpu_count() or 1),
                    include_dashboard=False,
                    log_to_driver=False,
                    configure_logging=False,
                )
            else:
                ray.init(address=address, log_to_driver=False, configure_logging=False)
            self._owns_ray = True
        self._actor_class = ray.remote(num_cpus=cfg.rollout.worker_cpus, max_restarts=0)(
            RolloutWorker
        )
        self.restarts = 0
        self.workers = [self._spawn(index) for index in range(cfg.rollout.num_workers)]

    def _spawn(self, index: int) -> Any:
        rollout = self.cfg.rollout
        return self._actor_class.remote(
            self.cfg.env,
            self.cfg.model,
            rollout.envs_per_worker,
            rollout.fragment_length,
            self.cfg.run.seed,
            index,
        )

    def _replace(self, index: int, reason: str) -> None:
        self.restarts += 1
        if self.restarts > self.cfg.rollout.max_worker_restarts:
            raise RolloutError(
                f"rollout worker {index} failed ({reason}) and the restart budget "
                f"rollout.max_worker_restarts={self.cfg.rollout.max_worker_restarts} is used up; "
                "check the workers' logs (ray logs) or raise the budget"
            )
        self._ray.kill(self.workers[index], no_restart=True)
        self.workers[index] = self._spawn(index)

    def _submit(self, index: int, weights_ref: Any, version: int) -> Any:
        worker = self.workers[index]
        worker.set_weights.remote(weights_ref, version)
        return worker.sample.remote()

    def collect(self, weights: dict[str, torch.Tensor], version: int) -> Fragment:
        """One complete fragment from every worker, all produced by ``version``."""
        ray = self._ray
        weights_ref = ray.put({k: v.detach().cpu() for k, v in weights.items()})
        pending = {self._submit(i, weights_ref, version): i for i in range(len(self.workers))}
        deadline = {ref: time.monotonic() + self.cfg.rollout.sample_timeout_s for ref in pending}
        fragments: dict[int, Fragment] = {}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for ref in ready:
                index = pending.pop(ref)
                deadline.pop(ref)
                try:
                    fragments[index] = ray.get(ref, timeout=self.cfg.rollout.sample_timeout_s)
                except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as err:
                    self._replace(index, type(err).__name__)
                    new_ref = self._submit(index, weights_ref, version)
                    pending[new_ref] = index
                    deadline[new_ref] = time.monotonic() + self.cfg.rollout.sample_timeout_s
            now = time.monotonic()
            for ref in [r for r, limit in deadline.items() if limit < now]:
                index = pending.pop(ref)
                deadline.pop(ref)
                self._replace(index, f"no fragment within {self.cfg.rollout.sample_timeout_s}s")
                new_ref = self._submit(index, weights_ref, version)
                pending[new_ref] = index
                deadline[new_ref] = time.monotonic() + self.cfg.rollout.sample_timeout_s
        ordered = [fragments[i] for i in range(len(self.workers))]
        stale = [f.worker_index for f in ordered if f.policy_version != version]
        if stale:
            raise RolloutError(f"workers {stale} returned fragments of another policy version")
        return Fragment.concat(ordered)

    def _call_all(self, method: str, *args_per_worker: list[Any]) -> list[Any]:
        refs = [
            getattr(worker, method).remote(*(arg[i] for arg in args_per_worker))
            for i, worker in enumerate(self.workers)
        ]
        return self._ray.get(refs, timeout=self.cfg.rollout.sample_timeout_s)

    def get_state(self) -> list[bytes]:
        return self._call_all("get_state")

    def set_state(self, states: list[bytes]) -> None:
        self._call_all("set_state", states)

    def process_ids(self) -> list[int]:
        return self._call_all("process_id")

    def node_ids(self) -> list[str]:
        return self._call_all("node_id")

    def close(self) -> None:
        for worker in self.workers:
            self._ray.kill(worker, no_restart=True)
        self.workers = []
        if self._owns_ray:
            self._ray.shutdown()
