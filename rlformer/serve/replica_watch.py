"""Which of a stateless app's replicas are up, so that steps skip a dead one while Serve
restarts it.

Why the router needs this: once a replica dies, Ray Serve holds every new request for its
deployment until the replacement has started, which on a busy node takes longer than a
client's timeout, and a request sent before Serve knew of the death waits there without an
error. A stateless step can go to any replica, so a step that finds its replica dead, or
waits on it longer than its patience (``ServeOptions.step_patience_s``), marks it down: the
steps already waiting on it leave for another replica at once, new steps skip it, and a probe
marks it up as soon as it (or its replacement) answers, which a slow replica does at once.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

PROBE_PAUSE_S = 0.5
"""Pause between probes of a replica that is down (each probe waits for its replacement)."""


class ReplicaLost(Exception):
    """The replica a step was sent to is known dead: the step may go to another one."""


class ReplicaWatch:
    """Up/down per replica index, and waits that end early when their replica goes down."""

    def __init__(self, count: int, probe: Callable[[int], Awaitable[Any]]) -> None:
        """``probe(i)`` answers once replica ``i`` (or its replacement) serves again."""
        self.count = count
        self._probe = probe
        self._down: set[int] = set()
        self._lost = [asyncio.Event() for _ in range(count)]
        self._turns = itertools.cycle(range(count))
        self._probes: set[asyncio.Task[None]] = set()  # held, so they are not collected

    @property
    def down(self) -> frozenset[int]:
        return frozenset(self._down)

    def next_index(self) -> int:
        """The next replica in turn that is up; when all are down, the next one in turn
        (its step then waits for the replacement, within the request timeout)."""
        for _ in range(self.count):
            index = next(self._turns)
            if index not in self._down:
                return index
        return next(self._turns)

    def others_up(self, index: int) -> bool:
        return any(i not in self._down for i in range(self.count) if i != index)

    async def wait(
        self,
        index: int,
        answer: Awaitable[Any],
        cancel: Callable[[], Any],
        patience_s: float | None = None,
    ) -> Any:
        """``answer``'s result. With ``patience_s`` (for a step that has another replica to go
        to): :class:`ReplicaLost` as soon as replica ``index`` is marked down, or after
        ``patience_s`` without an answer (it is then marked down until a probe answers);
        ``cancel`` withdraws the request given up. Without: the answer however long it takes
        (the caller's timeout bounds it)."""
        if patience_s is None:
            return await answer
        lost = asyncio.ensure_future(self._lost[index].wait())
        step = asyncio.ensure_future(answer)
        try:
            await asyncio.wait({step, lost}, timeout=patience_s, return_when="FIRST_COMPLETED")
        except BaseException:  # cancelled from outside (the client left): withdraw the request
            _give_up(step, cancel)
            raise
        finally:
            lost.cancel()
        if step.done():
            return step.result()
        _give_up(step, cancel)
        self.mark_down(index)
        raise ReplicaLost(index)

    def mark_down(self, index: int) -> None:
        """Replica ``index`` died: release its waiters and probe until it serves again."""
        if index in self._down:
            return
        self._down.add(index)
        self._lost[index].set()
        self._lost[index] = asyncio.Event()
        task = asyncio.get_running_loop().create_task(self._until_up(index))
        self._probes.add(task)
        task.add_done_callback(self._probes.discard)

    async def _until_up(self, index: int) -> None:
        while True:
            try:
                await self._probe(index)
            except Exception:  # any failure means "not serving yet"; the router lives on
                await asyncio.sleep(PROBE_PAUSE_S)
                continue
            self._down.discard(index)
            return


def _give_up(step: asyncio.Future[Any], cancel: Callable[[], Any]) -> None:
    """Cancel a step's wait and withdraw its request; its end (a cancellation error) is read
    here, so that asyncio logs no exception that nobody retrieved."""
    if step.done():
        return
    step.cancel()
    cancel()
    step.add_done_callback(lambda done: done.cancelled() or done.exception())
