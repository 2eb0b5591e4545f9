"""``/v1/health`` on plain asyncio, with stand-ins for the replicas' handles: every replica is
asked at once, and one that is silent (restarting) or held down is reported down within the
wait instead of holding up the answer."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from rlformer.serve.deployments import Router


class Call:
    """A handle call's response: awaitable, cancellable, answering ``figures`` or never."""

    def __init__(self, figures: dict[str, Any] | None) -> None:
        self.figures, self.cancelled = figures, False

    def __await__(self) -> Any:
        return self._answer().__await__()

    async def _answer(self) -> dict[str, Any]:
        if self.figures is None:
            await asyncio.Event().wait()  # silent: a replica Serve is restarting
        assert self.figures is not None
        return self.figures

    def cancel(self) -> None:
        self.cancelled = True


class Handle:
    """A replica's deployment handle whose ``stats.remote()`` gives a :class:`Call`."""

    def __init__(self, index: int, silent: bool = False) -> None:
        figures = {"index": index, "incarnation": f"i{index}", "sessions": 2 + index}
        self.figures = None if silent else figures | {"batch_sizes": {"1": 3, "4": index}}
        self.calls: list[Call] = []
        self.stats = self

    def remote(self) -> Call:
        self.calls.append(Call(self.figures))
        return self.calls[-1]


def health(handles: list[Handle], down: set[int] = frozenset()) -> tuple[int, dict, float]:
    """Status code, body and seconds of one ``/v1/health`` answer (a wait of 0.3 s); the
    calls the watch's probes made before it are dropped from the handles."""
    router = Router.func_or_class(
        {"replicas": len(handles), "health_wait_s": 0.3, "server_id": "s"}, *handles
    )

    async def ask() -> tuple[int, dict, float]:
        for index in down:
            router.watch.mark_down(index)
        await asyncio.sleep(0.05)  # the probes' first calls
        for handle in handles:
            handle.calls.clear()
        begun = time.monotonic()
        answer = await router._health()
        return answer.status_code, json.loads(answer.body), time.monotonic() - begun

    return asyncio.run(asyncio.wait_for(ask(), 10))


def test_all_replicas_up_is_ok_with_their_figures_summed() -> None:
    status, body, _ = health([Handle(0), Handle(1)])
    assert status == 200 and body["status"] == "ok"
    assert body["replicas"] == body["replicas_up"] == 2 and body["sessions"] == 5
    assert body["batch_sizes"] == {"1": 6, "4": 1} and body["server_id"] == "s"
    assert [r["up"] for r in body["per_replica"]] == [True, True]


def test_a_silent_replica_is_reported_down_within_the_wait_and_its_call_withdrawn() -> None:
    handles = [Handle(0, silent=True), Handle(1), Handle(2, silent=True)]
    status, body, seconds = health(handles)
    assert status == 200 and body["status"] == "degraded" and body["replicas_up"] == 1
    assert body["per_replica"][0] == {"index": 0, "up": False}
    assert body["per_replica"][2] == {"index": 2, "up": False}
    assert body["sessions"] == 3  # the replica that answered
    assert seconds < 0.3 * 2, "the replicas were asked one after another"
    assert handles[0].calls[0].cancelled and not handles[1].calls[0].cancelled


def test_a_replica_the_watch_holds_down_is_not_asked() -> None:
    handles = [Handle(0), Handle(1, silent=True)]  # its probe waits for the replacement
    status, body, seconds = health(handles, down={1})
    assert status == 200 and body["status"] == "degraded" and seconds < 0.3
    assert handles[1].calls == [] and body["per_replica"][1] == {"index": 1, "up": False}


def test_no_replica_up_is_unavailable() -> None:
    status, body, _ = health([Handle(0, silent=True)])
    assert status == 503 and body["status"] == "unavailable" and body["replicas_up"] == 0
