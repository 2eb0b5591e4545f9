"""The collector interface and its in-process backend.

A collector owns ``num_workers`` :class:`~rlformer.rollout.worker.RolloutWorker` s. Each call to
:meth:`Collector.collect` broadcasts one weight version and returns all workers' fragments merged
along the env axis, every one of them produced by exactly that version.

Calling loop::

    collector = make_collector(cfg)
    for version in range(iterations):
        batch = collector.collect(model.state_dict(), version)   # Fragment, E = workers x envs
        metrics = learner.update(batch)
    collector.close()
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Protocol

import torch

from rlformer.config import TrainConfig
from rlformer.rollout.fragment import Fragment
from rlformer.rollout.worker_spec import WorkerSpec, ppo_worker_spec, split_async_states


class Collector(Protocol):
    """What a learner needs from experience collection, whatever the backend."""

    def collect(self, weights: dict[str, torch.Tensor], version: int) -> Fragment: ...

    def get_state(self) -> list[dict[str, Any]]:
        """Per worker: ``{"state": pickled bytes, "unpicklable_envs": reason or None}``."""
        ...

    def set_state(self, states: list[dict[str, Any]]) -> None: ...

    def close(self) -> None: ...


class LocalCollector:
    """All workers in this process, stepped one after another (also the test backend).

    They act on one torch thread, as a Ray actor does: one-step batches of a few envs run
    slower on more threads. The learner's ``run.torch_threads`` is put back after each call.
    """

    def __init__(self, cfg: TrainConfig, spec: WorkerSpec | None = None) -> None:
        spec = spec or ppo_worker_spec(cfg)
        with _one_thread():  # a worker sets one thread for its own process
            self.workers = [spec.build(w) for w in range(cfg.rollout.num_workers)]

    def collect(self, weights: dict[str, torch.Tensor], version: int) -> Any:
        cpu_weights = {k: v.detach().cpu() for k, v in weights.items()}
        fragments = []
        with _one_thread():
            for worker in self.workers:
                worker.set_weights(cpu_weights, version)
                fragments.append(worker.sample())
        merged = type(fragments[0]).concat(fragments)
        # In-process workers run one after another: their sampling times add up.
        merged.sample_seconds = sum(f.sample_seconds for f in fragments)
        return merged

    def get_state(self) -> list[dict[str, Any]]:
        return [w.get_state() for w in self.workers]

    def set_state(self, states: list[dict[str, Any]]) -> None:
        # From an asynchronous Ray run: the batch it had in flight is skipped, not replayed.
        states, _ = split_async_states(states)
        for worker, blob in zip(self.workers, states, strict=True):
            worker.set_state(blob)

    def close(self) -> None:
        for worker in self.workers:
            worker.close()


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """torch on one intra-op thread inside, the caller's thread count after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def make_collector(cfg: TrainConfig, spec: WorkerSpec | None = None) -> Collector:
    """The backend named by ``cfg.rollout.backend`` (Ray is imported only when asked for),
    running PPO's fragment workers unless ``spec`` names other ones."""
    if cfg.rollout.backend == "ray":
        from rlformer.rollout.ray_collector import RayCollector

        return RayCollector(cfg, spec)
    return LocalCollector(cfg, spec)
