"""One forward pass for many sessions: their states concatenated, acted on, split back.

This is where batching meets per-session memory. Each row carries its own state (memory and
validity for GTrXL, h/c for LSTM / GRU, previous action / reward), so rows of unrelated
sessions can share one ``policy.act`` call and come out exactly as if each had been run alone,
up to float summation order. Two steps of the same session in one batch must not see the same
old state, so they are split into successive rounds; rows that differ in ``deterministic`` go
in separate calls, since ``act`` takes one flag for the whole batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlformer.policies.base import Policy
from rlformer.serve.sessions import SessionStore
from rlformer.serve.wire import (
    RequestError,
    concat,
    decode,
    decode_mask,
    decode_reward,
    encode_row,
    mask_size,
)

Result = dict[str, Any]
"""``{"action": ...}`` or an error (:meth:`RequestError.payload`)."""


@dataclass
class StepRequest:
    """One session's step, already decoded and checked (see :mod:`rlformer.serve.wire`)."""

    session_id: str
    obs: Any  # one row, leading dimension 1
    episode_start: bool
    reward: float | None = None
    mask: np.ndarray | None = None
    deterministic: bool = True


class UnservablePolicy(ValueError):
    """A policy whose state cannot be split into rows and batched again."""


@dataclass
class RowOps:
    """How a policy's states are joined into a batch and one row taken back out."""

    cat: Callable[[list[Any]], Any]
    row: Callable[[Any, int], Any]


def row_ops(policy: Policy) -> RowOps:
    """The row operations of ``policy``'s state: ``cat`` / ``index`` of PPO's
    :class:`~rlformer.models.actor_critic.AgentState`, or the batch axes an export's
    ``policy.json`` declares for its state arrays. Any other state is refused."""
    state = policy.initial_state(1)
    if hasattr(type(state), "cat") and hasattr(state, "index"):
        return RowOps(lambda states: type(states[0]).cat(states), _index_row)
    axes = _export_batch_axes(policy)
    if isinstance(state, dict) and axes is not None and set(axes) == set(state):
        return RowOps(
            lambda states: {
                k: np.concatenate([s[k] for s in states], axis=a) for k, a in axes.items()
            },
            lambda state, row: {k: np.take(v, [row], axis=axes[k]) for k, v in state.items()},
        )
    raise UnservablePolicy(
        f"{policy.info.name}: a {policy.info.kind!r} policy's state "
        f"({type(state).__name__}) cannot be batched per session; `rlformer serve` serves "
        "PPO checkpoints (GTrXL, LSTM, GRU, MLP torsos) and `rlformer export` directories"
    )


def _index_row(state: Any, row: int) -> Any:
    return state.index(slice(row, row + 1))


def _export_batch_axes(policy: Policy) -> dict[str, int] | None:
    """``{state input: its batch axis}`` from an export's metadata (None: not an export)."""
    meta = getattr(getattr(policy, "runner", None), "meta", None)
    if not isinstance(meta, dict):
        return None
    return {
        spec["name"]: list(spec["shape"]).index("batch")
        for spec in meta.get("inputs", [])
        if spec.get("role") == "state" and "batch" in spec["shape"]
    }


def _rounds(requests: list[StepRequest]) -> list[list[int]]:
    """Indices in rounds where each session appears at most once, in arrival order."""
    rounds: list[list[int]] = []
    for i, request in enumerate(requests):
        for round_ in rounds:
            if all(requests[j].session_id != request.session_id for j in round_):
                round_.append(i)
                break
        else:
            rounds.append([i])
    return rounds


def step_batch(
    policy: Policy,
    ops: RowOps,
    store: SessionStore,
    requests: list[StepRequest],
    on_batch: Callable[[int], None] = lambda size: None,
) -> list[Result]:
    """Every request's result, in order; ``on_batch(size)`` hears each ``act`` call's size."""
    results: list[Result] = [{} for _ in requests]
    for round_ in _rounds(requests):
        for deterministic in (True, False):
            group = [i for i in round_ if requests[i].deterministic == deterministic]
            if group:
                _step_group(policy, ops, store, requests, group, results, on_batch)
    return results


def _step_group(
    policy: Policy,
    ops: RowOps,
    store: SessionStore,
    requests: list[StepRequest],
    group: list[int],
    results: list[Result],
    on_batch: Callable[[int], None],
) -> None:
    rows, states = [], []
    for i in group:
        request = requests[i]
        try:
            state = (
                policy.initial_state(1) if request.episode_start else store.get(request.session_id)
            )
        except RequestError as err:
            results[i] = err.payload()
            continue
        rows.append(i)
        states.append(state)
    if not rows:
        return
    batch = [requests[i] for i in rows]
    try:
        actions, state = policy.act(
            concat([r.obs for r in batch]),
            ops.cat(states),
            np.array([r.episode_start for r in batch]),
            _rewards(batch),
            _masks(policy, batch),
            deterministic=batch[0].deterministic,
        )
    except Exception as err:  # a policy failure fails this call's rows, never the server
        for i in rows:
            message = f"the policy failed: {err}".splitlines()[0][:500]
            results[i] = RequestError(500, message, "internal").payload()
        return
    on_batch(len(rows))
    for row, i in enumerate(rows):
        store.put(requests[i].session_id, ops.row(state, row))
        results[i] = {"action": encode_row(actions, row)}


def _rewards(batch: list[StepRequest]) -> np.ndarray | None:
    if all(r.reward is None for r in batch):
        return None
    return np.array([0.0 if r.reward is None else r.reward for r in batch], dtype=np.float32)


def _masks(policy: Policy, batch: list[StepRequest]) -> np.ndarray | None:
    if all(r.mask is None for r in batch):
        return None
    size = mask_size(policy.action_space)
    assert size is not None  # wire.decode_mask refuses masks for other spaces
    return np.stack([np.ones(size, bool) if r.mask is None else r.mask for r in batch])


_STEP_KEYS = {"observation", "reward", "episode_start", "action_mask", "deterministic"}


def parse_step(policy: Policy, session_id: str, body: Any) -> StepRequest:
    """A ``POST .../act`` body checked against the policy's spaces (400 with the reason)."""
    if not isinstance(body, dict):
        raise RequestError(400, "the body must be a JSON object")
    unknown = sorted(set(body) - _STEP_KEYS)
    if unknown:
        raise RequestError(400, f"unknown fields {unknown} (known: {sorted(_STEP_KEYS)})")
    if "observation" not in body:
        raise RequestError(400, "missing field 'observation'")
    flags = {"episode_start": False, "deterministic": True}
    for key in flags:
        value = body.get(key, flags[key])
        if not isinstance(value, bool):
            raise RequestError(400, f"{key}: expected true or false")
        flags[key] = value
    return StepRequest(
        session_id,
        decode(policy.observation_space, body["observation"]),
        flags["episode_start"],
        decode_reward(body.get("reward")),
        decode_mask(policy.action_space, body.get("action_mask")),
        flags["deterministic"],
    )
