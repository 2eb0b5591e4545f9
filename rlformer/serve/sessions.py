"""The sessions one replica holds: each client's policy state, forgotten when idle or crowded.

Sessions are kept in least-recently-used order, which is also idle-time order, so both the TTL
sweep and the LRU eviction only ever look at the front. A dropped session leaves a tombstone
with its reason, so that its next step is refused with that reason (409) rather than silently
starting a fresh memory in the middle of the client's episode.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlformer.serve.messages import RequestError


@dataclass
class Session:
    state: Any  # the policy state of this one row
    last_used: float
    steps: int = 0


class SessionStore:
    """Per-session states with a TTL and a size bound.

    Args:
        ttl_s: Seconds a session may stay idle before it is dropped.
        max_sessions: Most sessions held; one more evicts the least recently used.
        clock: Monotonic seconds (a fake one in tests).
    """

    def __init__(
        self, ttl_s: float, max_sessions: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if ttl_s <= 0 or max_sessions < 1:
            raise ValueError("session TTL must be > 0 and max sessions >= 1")
        self.ttl_s, self.max_sessions, self.clock = ttl_s, max_sessions, clock
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        # reasons for dropped sessions, bounded so that abandoned ids cannot grow it forever
        self._gone: OrderedDict[str, str] = OrderedDict()
        self._max_gone = 4 * max_sessions + 1024

    def __len__(self) -> int:
        return len(self._sessions)

    def _bury(self, session_id: str, reason: str) -> None:
        self._gone[session_id] = reason
        self._gone.move_to_end(session_id)
        while len(self._gone) > self._max_gone:
            self._gone.popitem(last=False)

    def expire(self) -> int:
        """Drop the sessions idle past the TTL; how many went."""
        now, dropped = self.clock(), 0
        while self._sessions:
            session_id, session = next(iter(self._sessions.items()))
            if now - session.last_used <= self.ttl_s:
                break
            self._sessions.popitem(last=False)
            self._bury(session_id, f"it was idle for more than the {self.ttl_s:g} s session TTL")
            dropped += 1
        return dropped

    def get(self, session_id: str) -> Any:
        """The state of a session continuing its episode; 409 if it is not held."""
        self.expire()
        session = self._sessions.get(session_id)
        if session is not None:
            return session.state
        reason = self._gone.get(session_id)
        if reason is None:
            raise RequestError(
                409,
                f"unknown session {session_id!r}: start it with episode_start: true "
                "(never started here, or held by a replica that restarted and lost its memory)",
                "unknown_session",
            )
        raise RequestError(
            409,
            f"session {session_id!r} was dropped because {reason}; its memory is gone, start a "
            "new episode with episode_start: true",
            "session_dropped",
        )

    def put(self, session_id: str, state: Any) -> None:
        """Store a session's state after a step (creates the session; may evict the LRU one)."""
        session = self._sessions.get(session_id)
        if session is None:
            session = self._sessions[session_id] = Session(state, self.clock())
            self._gone.pop(session_id, None)
        session.state, session.last_used = state, self.clock()
        session.steps += 1
        self._sessions.move_to_end(session_id)
        while len(self._sessions) > self.max_sessions:
            old, _ = self._sessions.popitem(last=False)
            self._bury(
                old,
                f"the server holds at most {self.max_sessions} sessions per replica and it was "
                "the least recently used (evicted)",
            )

    def delete(self, session_id: str) -> bool:
        """Forget a session at its client's request; False if it was not held.

        It leaves a tombstone like any dropped session, so that a step sent after the delete
        (a client racing itself) hears that it was deleted rather than "unknown session"."""
        held = self._sessions.pop(session_id, None) is not None
        if held:
            self._bury(session_id, "its client deleted it (DELETE /v1/sessions/ID)")
        return held
