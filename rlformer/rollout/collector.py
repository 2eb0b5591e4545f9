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

import pickle
from dataclasses import dataclass
from typing import Any, Protocol

import cloudpickle
import torch

from rlformer.config import TrainConfig
from rlformer.rollout.fragment import Fragment
from rlformer.rollout.worker import RolloutWorker


@dataclass(frozen=True)
class WorkerSpec:
    """How to build rollout worker ``i``: ``cls(*args, i)``, in this process or a Ray actor.

    A worker class provides ``set_weights(weights, version)``, ``sample()`` (a batch with
    ``policy_version``, ``worker_index``, ``sample_seconds`` and a ``concat`` classmethod),
    ``get_state()``, ``set_state(state)``, ``process_id()`` and ``node_id()``. PPO's
    :class:`RolloutWorker` returns fragments; ODT's worker returns whole episodes.
    """

    cls: type
    args: tuple[Any, ...]

    def build(self, worker_index: int) -> Any:
        return self.cls(*self.args, worker_index)


def ppo_worker_spec(cfg: TrainConfig) -> WorkerSpec:
    """PPO's fragment workers for ``cfg``."""
    rollout = cfg.rollout
    return WorkerSpec(
        RolloutWorker,
        (
            cfg.env,
            cfg.model,
            rollout.envs_per_worker,
            rollout.fragment_length,
            cfg.run.seed,
            cfg.ppo.memory_gradient_steps,
        ),
    )


class Collector(Protocol):
    """What a learner needs from experience collection, whatever the backend."""

    def collect(self, weights: dict[str, torch.Tensor], version: int) -> Fragment: ...

    def get_state(self) -> list[dict[str, Any]]:
        """Per worker: ``{"state": pickled bytes, "unpicklable_envs": reason or None}``."""
        ...

    def set_state(self, states: list[dict[str, Any]]) -> None: ...

    def close(self) -> None: ...


class LocalCollector:
    """All workers in this process, stepped one after another (also the test backend)."""

    def __init__(self, cfg: TrainConfig, spec: WorkerSpec | None = None) -> None:
        spec = spec or ppo_worker_spec(cfg)
        self.workers = [spec.build(w) for w in range(cfg.rollout.num_workers)]

    def collect(self, weights: dict[str, torch.Tensor], version: int) -> Any:
        cpu_weights = {k: v.detach().cpu() for k, v in weights.items()}
        fragments = []
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


# Marks a worker state that carries its fragment of the batch in flight (asynchronous sampling).
_ASYNC_STATE_PREFIX = b"rlformer-async-worker-state\n"


def wrap_async_state(worker_state: bytes, fragment: Any) -> bytes:
    """A worker's pickled state plus its fragment of the batch that was in flight when an
    asynchronous run checkpointed: the resumed run returns that batch first, as the
    uninterrupted run would have."""
    return _ASYNC_STATE_PREFIX + cloudpickle.dumps((worker_state, fragment))


def split_async_states(
    states: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[Any] | None]:
    """Worker states as the workers take them, and the fragments of the batch in flight when
    the states were taken (None if they came from a synchronous run). States of other worker
    kinds (ODT's are plain dicts) pass through unchanged."""
    unwrapped, fragments = [], []
    for state in states:
        blob = state.get("state")
        if isinstance(blob, bytes) and blob.startswith(_ASYNC_STATE_PREFIX):
            worker_state, fragment = pickle.loads(blob[len(_ASYNC_STATE_PREFIX) :])
            fragments.append(fragment)
            state = {**state, "state": worker_state}
        unwrapped.append(state)
    return unwrapped, fragments or None


def make_collector(cfg: TrainConfig, spec: WorkerSpec | None = None) -> Collector:
    """The backend named by ``cfg.rollout.backend`` (Ray is imported only when asked for),
    running PPO's fragment workers unless ``spec`` names other ones."""
    if cfg.rollout.backend == "ray":
        from rlformer.rollout.ray_collector import RayCollector

        return RayCollector(cfg, spec)
    return LocalCollector(cfg, spec)
