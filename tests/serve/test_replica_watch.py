"""The stateless router's replica watch on plain asyncio: a step waiting on a replica leaves
it the moment it is known dead or after its patience, later steps skip it, and the probe
brings it back."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rlformer.serve import replica_watch
from rlformer.serve.replica_watch import ReplicaLost, ReplicaWatch


class Replicas:
    """Replicas whose probes answer once ``serving`` is set for them."""

    def __init__(self, count: int) -> None:
        self.serving = [asyncio.Event() for _ in range(count)]
        self.probes = [0] * count

    async def probe(self, index: int) -> None:
        self.probes[index] += 1
        await self.serving[index].wait()


def run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, 10))


def test_turns_skip_a_replica_that_is_down_until_its_probe_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(replica_watch, "PROBE_PAUSE_S", 0.01)

    async def scenario() -> None:
        replicas = Replicas(3)
        watch = ReplicaWatch(3, replicas.probe)
        assert [watch.next_index() for _ in range(6)] == [0, 1, 2, 0, 1, 2]
        watch.mark_down(1)
        watch.mark_down(1)  # twice: still one probe
        assert [watch.next_index() for _ in range(4)] == [0, 2, 0, 2]
        assert watch.down == {1} and watch.others_up(1) and watch.others_up(0)
        await asyncio.sleep(0.05)
        assert 1 in watch.down and replicas.probes[1] == 1
        replicas.serving[1].set()
        await asyncio.sleep(0.05)
        assert watch.down == set()
        assert [watch.next_index() for _ in range(3)] == [0, 1, 2]

    run(scenario())


def test_all_down_still_gives_a_replica_in_turn() -> None:
    async def scenario() -> None:
        watch = ReplicaWatch(2, Replicas(2).probe)
        watch.mark_down(0)
        watch.mark_down(1)
        assert not watch.others_up(0)
        assert [watch.next_index() for _ in range(4)] == [0, 1, 0, 1]

    run(scenario())


def test_a_waiting_step_leaves_its_replica_when_another_step_finds_it_dead() -> None:
    async def scenario() -> None:
        watch = ReplicaWatch(2, Replicas(2).probe)
        never = asyncio.get_running_loop().create_future()
        cancelled: list[str] = []
        waiting = asyncio.ensure_future(
            watch.wait(0, never, lambda: cancelled.append("withdrawn"), patience_s=5)
        )
        await asyncio.sleep(0.02)
        assert not waiting.done()
        watch.mark_down(0)
        with pytest.raises(ReplicaLost):
            await waiting
        assert cancelled == ["withdrawn"] and never.cancelled()
        # the other replica's steps are untouched, and answers pass through
        assert await watch.wait(1, asyncio.sleep(0.01, result="action"), lambda: None) == "action"

    run(scenario())


def test_a_silent_replica_is_given_up_after_the_patience_and_marked_down() -> None:
    async def scenario() -> None:
        watch = ReplicaWatch(2, Replicas(2).probe)
        never = asyncio.get_running_loop().create_future()
        started = asyncio.get_running_loop().time()
        with pytest.raises(ReplicaLost):
            await watch.wait(0, never, lambda: None, patience_s=0.1)
        assert 0.09 <= asyncio.get_running_loop().time() - started < 2
        assert watch.down == {0}

    run(scenario())


def test_a_step_error_is_the_step_s_and_marks_nothing_down() -> None:
    async def failing() -> None:
        raise ValueError("bad observation")

    async def scenario() -> None:
        watch = ReplicaWatch(2, Replicas(2).probe)
        with pytest.raises(ValueError, match="bad observation"):
            await watch.wait(0, failing(), lambda: None, patience_s=1)
        assert watch.down == set()

    run(scenario())


def test_a_step_with_nowhere_else_to_go_keeps_waiting_when_its_replica_goes_down() -> None:
    async def scenario() -> None:
        watch = ReplicaWatch(1, Replicas(1).probe)
        answer = asyncio.get_running_loop().create_future()
        waiting = asyncio.ensure_future(watch.wait(0, answer, lambda: None))  # no patience
        await asyncio.sleep(0.02)
        watch.mark_down(0)  # another step found it dead: Serve is starting its replacement
        await asyncio.sleep(0.02)
        assert not waiting.done()
        answer.set_result("from the replacement")
        assert await waiting == "from the replacement"

    run(scenario())


def test_a_step_cancelled_from_outside_withdraws_its_request() -> None:
    async def scenario() -> None:
        watch = ReplicaWatch(2, Replicas(2).probe)
        never = asyncio.get_running_loop().create_future()
        withdrawn: list[bool] = []
        waiting = asyncio.ensure_future(
            watch.wait(0, never, lambda: withdrawn.append(True), patience_s=5)
        )
        await asyncio.sleep(0.02)
        waiting.cancel()  # the client went away
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await asyncio.sleep(0)
        assert withdrawn == [True] and never.cancelled() and watch.down == set()

    run(scenario())
