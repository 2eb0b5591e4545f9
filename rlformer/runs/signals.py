"""Ctrl-C and SIGTERM as a request to stop cleanly at the next iteration boundary.

Week-long runs get stopped on purpose (a job scheduler's SIGTERM, a Ctrl-C). The first signal
only sets a flag: the training loop finishes the iteration it is in, writes a checkpoint, closes
its writers and Ray, and exits non-zero saying how to resume. A second signal stops at once
(checkpoints are atomic, so the last complete one stays usable).

Example::

    with StopRequest() as stop:
        for iteration in range(n):
            ...
            if stop.requested:
                checkpoint(iteration + 1)
                raise Interrupted(stop.signal_name, run_dir, iteration + 1, n)
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

HANDLED = (signal.SIGINT, signal.SIGTERM)


class Interrupted(Exception):
    """A run stopped on request after writing a checkpoint; carries what the user needs."""

    def __init__(self, signal_name: str, run_dir: Path, done: int, total: int) -> None:
        self.signal_name = signal_name
        self.run_dir = run_dir
        self.exit_code = 128 + int(getattr(signal, signal_name))
        super().__init__(
            f"stopped by {signal_name} after iteration {done}/{total}, checkpoint written; "
            f"continue with `rlformer train --resume {run_dir}`"
        )


class StopRequest:
    """Installs SIGINT/SIGTERM handlers for the duration of a ``with`` block.

    Enter it before the resources a stopped run must close (Ray, writers, the run lock), so a
    second signal during that clean-up still stops at once; :meth:`restore` hands signals back
    early, e.g. before a final evaluation that Ctrl-C should simply interrupt.

    Outside the main thread (where Python cannot install handlers) it does nothing, and
    ``requested`` stays False.
    """

    def __init__(self) -> None:
        self.signal_name: str | None = None
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        return self.signal_name is not None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.signal_name is not None:
            print(
                f"second {name}: stopping now; the last checkpoint is intact "
                "(resume with `rlformer train --resume RUN_DIR`)",
                file=sys.stderr,
                flush=True,
            )
            os._exit(128 + signum)
        self.signal_name = name
        print(
            f"{name} received: finishing this iteration, then writing a checkpoint "
            f"(send it again to stop at once)",
            file=sys.stderr,
            flush=True,
        )

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in HANDLED:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def restore(self) -> None:
        """Put the previous handlers back (idempotent)."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def __exit__(self, *exc: object) -> None:
        self.restore()
