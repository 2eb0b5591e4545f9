"""What a replica serves: how one request body is read, and how a batch of them is stepped.

A single policy serves one session per client (:class:`PolicySteps`: each session one row of
the batch, :mod:`rlformer.serve.batched_steps`). A servable that steps its own way, such as a
multi-agent team (one session per episode holding every agent's memory), brings its own
:class:`SessionSteps` through a ``serving_steps()`` method; the replicas, the router, the
session store, batching and the error forms stay the same for both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from rlformer.policies.base import Policy
from rlformer.serve.batched_steps import (
    Result,
    RowOps,
    UnservablePolicy,
    parse_step,
    row_ops,
    step_batch,
)
from rlformer.serve.messages import RequestError, jsonable
from rlformer.serve.sessions import SessionStore
from rlformer.serve.state_blob import StateCodec, policy_fingerprint


class SessionSteps(Protocol):
    """A replica's view of what it serves."""

    def parse(self, session_id: str | None, body: Any) -> Any:
        """One request body checked and decoded (a :class:`RequestError` with the reason);
        ``session_id`` None is a stateless step."""
        ...

    def step(
        self, requests: list[Any], store: SessionStore, on_batch: Callable[[int], None]
    ) -> list[Result]:
        """Every parsed request's answer, in order; ``on_batch(size)`` hears each forward
        pass's number of rows."""
        ...

    def describe(self) -> dict[str, Any]:
        """``GET /v1/policy``: the spaces, what the policy is, how it is served."""
        ...


def state_codec(policy: Policy, ops: RowOps, key_hex: str) -> StateCodec:
    """The codec of ``policy``'s sealed states: its shapes (a new episode's state, every
    optional part present), its identity and the server key."""
    return StateCodec(ops.initial(0.0), policy_fingerprint(policy), key_hex)


@dataclass
class PolicySteps:
    """One policy, one session per client; ``codec`` set: stateless steps (sealed states)."""

    policy: Policy
    ops: RowOps
    codec: StateCodec | None = None

    def parse(self, session_id: str | None, body: Any) -> Any:
        if session_id is None and self.codec is None:
            raise RequestError(500, "a stateless step reached a replica without a codec")
        open_state = None if self.codec is None else self.codec.open
        return parse_step(self.policy, session_id, body, open_state)

    def step(
        self, requests: list[Any], store: SessionStore, on_batch: Callable[[int], None]
    ) -> list[Result]:
        seal = None if self.codec is None else self.codec.seal
        return step_batch(self.policy, self.ops, store, requests, on_batch, seal)

    def describe(self) -> dict[str, Any]:
        from rlformer.export.space_codec import space_to_data

        policy, codec = self.policy, self.codec
        info = {k: v for k, v in vars(policy.info).items() if k != "training_env"}
        env = policy.info.training_env
        info["training_env"] = None if env is None else env.model_dump(mode="json")
        return jsonable(
            {
                "observation_space": space_to_data(policy.observation_space),
                "action_space": space_to_data(policy.action_space),
                "info": info,
                "serving": {
                    "stateless": codec is not None,
                    "max_state_chars": None if codec is None else codec.max_chars,
                    "policy_id": None if codec is None else codec.policy_id,
                },
            }
        )


def brings_own_steps(servable: Any) -> bool:
    """Whether ``servable`` says how it is served (a team) rather than being one policy."""
    return callable(getattr(servable, "serving_steps", None))


def check_servable(servable: Any, stateless: bool) -> None:
    """Refuse, in one line, what cannot be served as asked (before anything starts)."""
    if brings_own_steps(servable):
        if stateless:
            raise UnservablePolicy(
                f"{servable.info.name}: --stateless serves single-agent policies; a team is "
                "served with one session per episode holding every agent's memory (drop "
                "--stateless)"
            )
        servable.serving_steps()
    else:
        row_ops(servable)


def session_steps(servable: Any, stateless: bool, state_key: str) -> SessionSteps:
    """The steps a replica runs for ``servable``."""
    check_servable(servable, stateless)
    if brings_own_steps(servable):
        steps: SessionSteps = servable.serving_steps()
        return steps
    ops = row_ops(servable)
    return PolicySteps(servable, ops, state_codec(servable, ops, state_key) if stateless else None)
