"""One forward pass for many sessions: their states concatenated, acted on, split back.

This is where batching meets per-session memory. Each row carries its own state (memory and
validity for GTrXL, h/c for LSTM / GRU, previous action / reward), so rows of unrelated
sessions can share one ``policy.act`` call and come out exactly as if each had been run alone,
up to float summation order. Two steps of the same session in one batch must not see the same
old state, so they are split into successive rounds; rows that differ in ``deterministic`` go
in separate calls, since ``act`` takes one flag for the whole batch.

A step's state comes from the replica's :class:`SessionStore`, or, on a stateless server, from
the blob the client sent back (:mod:`rlformer.serve.state_blob`); the next state goes back
the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any

import numpy as np
import torch

from rlformer.policies.base import Policy
from rlformer.serve.messages import (
    RequestError,
    concat,
    decode,
    decode_mask,
    decode_reward,
    encode_row,
    mask_size,
)
from rlformer.serve.sessions import SessionStore

Result = dict[str, Any]
"""``{"action": ...}`` or an error (:meth:`RequestError.payload`)."""


@dataclass
class StepRequest:
    """One session's step, already decoded and checked (see :mod:`rlformer.serve.messages`)."""

    session_id: str | None  # None: stateless, the state travels with the request
    obs: Any  # one row, leading dimension 1
    episode_start: bool
    reward: float | None = None
    mask: np.ndarray | None = None
    deterministic: bool = True
    target_return: float | None = None  # return-conditioned policies, at episode start
    state: Any = None  # stateless: the opened state of the previous step


class UnservablePolicy(ValueError):
    """A policy whose state cannot be split into rows and batched again."""


@dataclass
class RowOps:
    """How a policy's states are joined into a batch and one row taken back out, and a new
    episode's one-row state made (``initial(target_return)``)."""

    cat: Callable[[list[Any]], Any]
    row: Callable[[Any, int], Any]
    initial: Callable[[float | None], Any]


def row_ops(policy: Policy) -> RowOps:
    """The row operations of ``policy``'s state: its state class's ``cat`` and its ``index``
    (PPO's :class:`~rlformer.networks.actor_critic.AgentState`, a Decision Transformer's
    context), or the batch axes an export's ``policy.json`` declares for its state arrays. Any
    other state is refused. A policy may say how a served row starts
    (``initial_row_state(target_return)``); else it is ``initial_state(1, target_return)``."""
    row_start = getattr(policy, "initial_row_state", None)

    def initial(target_return: float | None) -> Any:
        if row_start is not None:
            return row_start(target_return)
        return policy.initial_state(1, target_return=target_return)

    state = initial(0.0)  # any target: only the state's structure matters here
    if hasattr(type(state), "cat") and hasattr(state, "index"):
        return RowOps(lambda states: type(states[0]).cat(states), _index_row, initial)
    axes = _export_batch_axes(policy)
    if isinstance(state, dict) and axes is not None and set(axes) == set(state):
        return RowOps(
            lambda states: {
                k: np.concatenate([s[k] for s in states], axis=a) for k, a in axes.items()
            },
            lambda state, row: {k: np.take(v, [row], axis=axes[k]) for k, v in state.items()},
            initial,
        )
    raise UnservablePolicy(
        f"{policy.info.name}: a {policy.info.kind!r} policy's state "
        f"({type(state).__name__}) cannot be batched per session; `rlformer serve` serves "
        "PPO checkpoints (GTrXL, LSTM, GRU, MLP torsos), Decision Transformer checkpoints and "
        "`rlformer export` directories"
    )


def _index_row(state: Any, row: int) -> Any:
    return _own_copy(state.index(slice(row, row + 1)))


def _own_copy(value: Any) -> Any:
    """``value`` with every tensor / array copied out of its batch.

    A row indexed from a batched state is a view that keeps the whole batch's storage alive:
    a session left idle would pin the memory of every session it was once batched with.
    """
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # Memory, RecurrentState
        return type(value)(*(_own_copy(v) for v in value))
    if is_dataclass(value) and not isinstance(value, type):
        return replace(value, **{f.name: _own_copy(getattr(value, f.name)) for f in fields(value)})
    return value


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


def session_rounds(requests: Sequence[Any]) -> list[list[int]]:
    """Indices in rounds where each session (a request's ``session_id``) appears at most once,
    in arrival order (stateless steps, id None, carry their own state, so they never wait for
    one another)."""
    rounds: list[list[int]] = []
    for i, request in enumerate(requests):
        sid = request.session_id
        for round_ in rounds:
            if sid is None or all(requests[j].session_id != sid for j in round_):
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
    seal: Callable[[Any], str] | None = None,
) -> list[Result]:
    """Every request's result, in order; ``on_batch(size)`` hears each ``act`` call's size.
    Stateless requests get their next state back sealed by ``seal`` (``{"state": blob}``)."""
    results: list[Result] = [{} for _ in requests]
    for round_ in session_rounds(requests):
        for deterministic in (True, False):
            group = [i for i in round_ if requests[i].deterministic == deterministic]
            if group:
                _step_group(policy, ops, store, requests, group, results, on_batch, seal)
    return results


def _state_of(ops: RowOps, store: SessionStore, request: StepRequest) -> Any:
    if request.episode_start:
        return ops.initial(request.target_return)
    if request.session_id is None:
        return request.state
    return store.get(request.session_id)


def _step_group(
    policy: Policy,
    ops: RowOps,
    store: SessionStore,
    requests: list[StepRequest],
    group: list[int],
    results: list[Result],
    on_batch: Callable[[int], None],
    seal: Callable[[Any], str] | None,
) -> None:
    rows, states = [], []
    for i in group:
        request = requests[i]
        try:
            state = _state_of(ops, store, request)
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
        session_id, next_state = requests[i].session_id, ops.row(state, row)
        results[i] = {"action": encode_row(actions, row)}
        if session_id is not None:
            store.put(session_id, next_state)
            continue
        try:
            assert seal is not None, "a stateless step needs a state codec"
            results[i]["state"] = seal(next_state)
        except (AssertionError, TypeError, ValueError) as err:
            results[i] = RequestError(500, f"cannot seal the state: {err}", "internal").payload()


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


_STEP_KEYS = {
    "observation",
    "reward",
    "episode_start",
    "action_mask",
    "deterministic",
    "target_return",
}


def parse_step(
    policy: Policy,
    session_id: str | None,
    body: Any,
    open_state: Callable[[Any], Any] | None = None,
) -> StepRequest:
    """A ``POST .../act`` body checked against the policy's spaces (400 with the reason).

    ``session_id`` None is a stateless step: its body also has ``state``, the blob of the
    previous answer (not needed at ``episode_start: true``), opened by ``open_state``.
    """
    if not isinstance(body, dict):
        raise RequestError(400, "the body must be a JSON object")
    known = _STEP_KEYS if session_id is not None else _STEP_KEYS | {"state"}
    unknown = sorted(set(body) - known)
    if unknown:
        hint = "; 'state' is for servers started with --stateless" if "state" in unknown else ""
        raise RequestError(400, f"unknown fields {unknown} (known: {sorted(known)}){hint}")
    if "observation" not in body:
        raise RequestError(400, "missing field 'observation'")
    flags = {"episode_start": False, "deterministic": True}
    for key in flags:
        value = body.get(key, flags[key])
        if not isinstance(value, bool):
            raise RequestError(400, f"{key}: expected true or false")
        flags[key] = value
    start, reward = flags["episode_start"], decode_reward(body.get("reward"))
    _check_conditioning(policy, start, reward, flags["deterministic"])
    request = StepRequest(
        session_id,
        decode(policy.observation_space, body["observation"]),
        start,
        reward,
        decode_mask(policy.action_space, body.get("action_mask")),
        flags["deterministic"],
        _target_return(policy, start, body.get("target_return")),
    )
    if session_id is None and not start:
        if body.get("state") is None:
            raise RequestError(
                400,
                "missing field 'state': a stateless server needs the state of the previous "
                "answer, or episode_start: true",
            )
        assert open_state is not None
        request.state = open_state(body["state"])
    return request


def _check_conditioning(policy: Policy, start: bool, reward: float | None, det: bool) -> None:
    """What a policy needs beyond an observation, refused here rather than inside a batch."""
    if policy.info.return_conditioned and not start and reward is None:
        raise RequestError(
            400,
            "reward: a return-conditioned policy needs the reward of its previous action on "
            "every step after the first",
        )
    if not det and policy.info.sampling_problem:
        raise RequestError(400, f"deterministic: false: {policy.info.sampling_problem}")


def _target_return(policy: Policy, start: bool, value: Any) -> float | None:
    """The return a new episode aims for: read at ``episode_start: true`` only, and only by
    return-conditioned policies (default: the first target of their config)."""
    if value is not None:
        if not policy.info.return_conditioned:
            raise RequestError(400, "target_return: this policy is not return-conditioned")
        if not start:
            raise RequestError(
                400,
                "target_return: set at episode_start: true only (the return to go then follows "
                "the rewards)",
            )
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise RequestError(400, "target_return: expected a finite number")
        return float(value)
    if start and policy.info.return_conditioned and not policy.info.default_targets:
        raise RequestError(
            400,
            "target_return: this policy's config names no default target return; give one "
            "at episode_start: true",
        )
    return None
