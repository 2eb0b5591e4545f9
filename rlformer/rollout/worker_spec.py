"""How rollout workers are built and how their checkpointed states travel, shared by both
collector backends (kept apart from them so the in-process and the Ray collector each import it
and neither imports the other at module level)."""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Any

import cloudpickle

from rlformer.config import TrainConfig
from rlformer.rollout.worker import RolloutWorker


@dataclass(frozen=True)
class WorkerSpec:
    """How to build rollout worker ``i``: ``cls(*args, i, **kwargs)``, here or as a Ray actor.

    A worker class provides ``set_weights(weights, version)``, ``sample()`` (a batch with
    ``policy_version``, ``worker_index``, ``sample_seconds`` and a ``concat`` classmethod),
    ``get_state()``, ``set_state(state)``, ``process_id()`` and ``node_id()``. PPO's
    :class:`RolloutWorker` returns fragments; ODT's worker returns whole episodes.
    """

    cls: type
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)

    def build(self, worker_index: int) -> Any:
        return self.cls(*self.args, worker_index, **self.kwargs)


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
        {"compile_act": rollout.compile_act},
    )


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
