"""Run directories: resolved config, metrics (JSONL + TensorBoard), atomic checkpoints, resume.

Layout of ``runs/<name>-<timestamp>/``::

    config.yaml          the fully resolved config (a run can be resumed or evaluated from it alone)
    metrics.jsonl        one JSON object per logged iteration
    tb/                  TensorBoard event files
    checkpoints/
        ckpt_000010.pt   torch.save'd dicts, written to a temp file then renamed
        latest           name of the newest complete checkpoint (also renamed into place)

Why atomic: a run killed mid-write must never leave a checkpoint that looks complete but is not.
``os.replace`` is atomic on POSIX, so readers see either the old file or the new one.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

CHECKPOINT_FORMAT = 1
"""Bumped when the checkpoint layout changes incompatibly; loaders refuse other versions."""


class CheckpointError(RuntimeError):
    """A checkpoint or run directory that cannot be used, with what to do about it."""


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


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a fsync'ed temp file in the same folder and a rename."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_checkpoint(run_dir: Path, step: int, payload: Mapping[str, Any], keep: int = 3) -> Path:
    """Atomically write checkpoint ``ckpt_<step>.pt``, point ``latest`` at it, prune old ones."""
    ckpt_dir = run_dir / "checkpoints"
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    path = ckpt_dir / f"ckpt_{step:09d}.pt"
    fd, tmp = tempfile.mkstemp(dir=ckpt_dir, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        torch.save({"format": CHECKPOINT_FORMAT, **payload}, tmp)
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    atomic_write_bytes(ckpt_dir / "latest", path.name.encode())
    for old in sorted(ckpt_dir.glob("ckpt_*.pt"))[:-keep]:
        old.unlink(missing_ok=True)
    return path


def latest_checkpoint(run_dir: str | Path) -> Path:
    """Path of the newest complete checkpoint of a run, or a :class:`CheckpointError`."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise CheckpointError(f"{run_dir}: run directory not found")
    pointer = run_dir / "checkpoints" / "latest"
    if not pointer.is_file():
        raise CheckpointError(
            f"{run_dir}: no checkpoint yet (checkpoints/latest missing); the run stopped before "
            "its first checkpoint: start it again with `rlformer train CONFIG`"
        )
    path = pointer.parent / pointer.read_text().strip()
    if not path.is_file():
        raise CheckpointError(f"{pointer} names {path.name}, which does not exist")
    return path


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint file (or a run dir's latest) and check that this version can read it."""
    path = Path(path)
    if path.is_dir():
        path = latest_checkpoint(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint file not found")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as err:  # torch raises many types for corrupt / foreign files
        raise CheckpointError(f"{path}: not a readable rlformer checkpoint ({err})") from None
    if not isinstance(payload, dict) or "format" not in payload:
        raise CheckpointError(f"{path}: not an rlformer checkpoint (no 'format' field)")
    if payload["format"] != CHECKPOINT_FORMAT:
        raise CheckpointError(
            f"{path}: checkpoint format {payload['format']} but this rlformer reads format "
            f"{CHECKPOINT_FORMAT}; evaluate it with the rlformer version that wrote it"
        )
    return payload


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
