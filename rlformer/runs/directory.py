"""Run directories: resolved config, metrics (JSONL + TensorBoard), checkpoints, exclusive use.

Layout of ``runs/<name>-<timestamp>/``::

    config.yaml          the fully resolved config (a run can be resumed or evaluated from it alone)
    metrics.jsonl        one JSON object per logged iteration
    tb/                  TensorBoard event files
    checkpoints/
        ckpt_000010.pt   torch.save'd dicts, written to a temp file then renamed
        latest           name of the newest complete checkpoint (also renamed into place)
    .lock                held (flock) by the process training or resuming the run

Checkpoint files are written and read by :mod:`rlformer.runs.checkpoints`.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from rlformer.runs.checkpoints import (
    CHECKPOINT_FORMAT,
    CheckpointError,
    atomic_write_bytes,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)

# Checkpoint files have their own module; these names stay importable from here.
__all__ = [
    "CHECKPOINT_FORMAT",
    "CheckpointError",
    "MetricsLogger",
    "RunDirError",
    "RunLock",
    "atomic_write_bytes",
    "check_run_root",
    "latest_checkpoint",
    "load_checkpoint",
    "new_run_dir",
    "read_metrics",
    "save_checkpoint",
]

MIN_FREE_BYTES = 256 * 2**20
"""Free space a run root must have before training starts (checkpoints, metrics, TensorBoard)."""


class RunDirError(CheckpointError):
    """A run directory or run root that cannot be used: in use, unwritable or full."""


def new_run_dir(root: str | Path, name: str) -> Path:
    """Create ``root/name-YYYYmmdd-HHMMSS`` (suffixing -2, -3 ... if it already exists)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path(root) / f"{name}-{stamp}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    (path / "checkpoints").mkdir(parents=True)
    return path


def check_run_root(
    root: str | Path, needed_bytes: int = MIN_FREE_BYTES, create: bool = True
) -> None:
    """Fail before training, not at the first checkpoint, if ``root`` cannot hold a run.

    Creates ``root``, writes and removes a probe file (permission bits alone do not tell: root
    ignores them, read-only mounts do not show them), and checks the free space. With
    ``create=False`` (``--dry-run``, which must leave no trace) a missing ``root`` is not made:
    the probe goes into its nearest existing ancestor, where ``mkdir`` would create it.
    """
    root = Path(root)
    probe_dir = root if create else next(p for p in (root, *root.parents) if p.exists())
    try:
        if create:
            root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=probe_dir, prefix=".rlformer-probe-") as probe:
            probe.write(b"x")
            probe.flush()
    except OSError as err:
        raise RunDirError(
            f"run.root {root} is not writable ({err.strerror or err}); "
            "choose another folder with --set run.root=PATH"
        ) from None
    free = shutil.disk_usage(probe_dir).free
    if free < needed_bytes:
        raise RunDirError(
            f"run.root {root} has only {free / 2**20:.0f} MiB free, a run needs at least "
            f"{needed_bytes / 2**20:.0f} MiB for checkpoints and logs; free some space or "
            "choose another folder with --set run.root=PATH"
        )


class RunLock:
    """Exclusive use of a run directory by one process, released when that process dies.

    An ``flock`` on ``run_dir/.lock`` is dropped by the kernel when its holder exits however it
    exits (SIGKILL included), so a crashed run never leaves the directory stuck; the PID written
    into the file only makes the refusal message useful.

    Example::

        with RunLock(run_dir):
            ...  # train, checkpoint, log
    """

    def __init__(self, run_dir: str | Path, lock_name: str = ".lock") -> None:
        self.path = Path(run_dir) / lock_name
        self._fd: int | None = None

    @staticmethod
    def held(run_dir: str | Path, lock_name: str = ".lock") -> bool:
        """Whether a live process holds this lock now (probed with a shared lock taken and
        dropped at once, so a process acquiring it at that instant could be refused: probe only
        what is about to be used)."""
        path = Path(run_dir) / lock_name
        if not path.is_file():
            return False
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # drops the probe's lock
        return False

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise RunDirError(
                f"{self.path.parent} is in use by process {holder} (another `rlformer train` "
                "writing or resuming it); wait for it to finish or stop it first"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class MetricsLogger:
    """Writes scalar metrics to ``metrics.jsonl`` and TensorBoard.

    On resume, lines logged after the checkpoint being resumed (by a run killed between two
    checkpoints) are dropped, and TensorBoard purges events past that step, so the resumed run's
    metrics read exactly like an uninterrupted run's.
    """

    def __init__(self, run_dir: Path, resume_step: int | None = None) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.path = run_dir / "metrics.jsonl"
        if resume_step is not None and self.path.exists():
            kept = [
                line
                for line in self.path.read_text().splitlines()
                if line.strip() and json.loads(line)["step"] <= resume_step
            ]
            atomic_write_bytes(self.path, "".join(f"{line}\n" for line in kept).encode())
        self._file = open(self.path, "a")  # noqa: SIM115 - kept open for the run's lifetime
        self._writer = SummaryWriter(str(run_dir / "tb"), purge_step=resume_step)

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Record one row of scalars at env-step ``step``."""
        row = {"step": int(step), **{k: float(v) for k, v in metrics.items()}}
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()
        for key, value in metrics.items():
            self._writer.add_scalar(key, float(value), global_step=int(step))

    def close(self) -> None:
        self._writer.close()
        self._file.close()


def read_metrics(run_dir: str | Path) -> list[dict[str, float]]:
    """All rows of a run's ``metrics.jsonl``."""
    path = Path(run_dir) / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
