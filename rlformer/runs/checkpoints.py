"""Checkpoint files: atomic writes, loading that never runs code, fallback past broken files.

Layout inside a run directory::

    checkpoints/
        ckpt_000000640.pt   torch.save'd dict, written to a temp file, fsync'ed, then renamed
        latest              name of the newest complete checkpoint (also renamed into place)

Why atomic: a run killed mid-write must never leave a checkpoint that looks complete but is not.
``os.replace`` is atomic on POSIX, so readers see either the old file or the new one.

Why no pickle: checkpoints travel between people, and unpickling a file can run any code in it.
Every checkpoint is read with ``torch.load(weights_only=True)``, which accepts only tensors,
numbers, strings, bytes and containers of them; spaces are stored as data
(:mod:`rlformer.export.space_codec`). The one thing that needs pickle, the rollout workers'
exact env states, is kept as opaque bytes sealed with an HMAC under a key private to this user
(:func:`seal_state`): a resumed run unpickles them only if the seal verifies, i.e. this user
wrote them, or if the user passes ``--trust-checkpoint``.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import sys
import tempfile
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from rlformer.runs.errors import CheckpointError, UnsafeCheckpointError

CHECKPOINT_FORMAT = 2
"""Bumped when the checkpoint layout changes incompatibly. Format 1 pickled spaces and numpy
arrays; it is read only with ``trust=True``."""

LEGACY_FORMATS = (1,)

_SAFE_LEAVES = (torch.Tensor, str, bytes, int, float, bool, type(None))


def _ensure_safe(value: Any, where: str = "payload") -> None:
    """Raise TypeError for anything ``torch.load(weights_only=True)`` would refuse to read back.

    Checked at save time so a programming mistake fails when the run writes its first
    checkpoint, not when somebody later tries to load it.
    """
    if isinstance(value, _SAFE_LEAVES):
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str | int):
                raise TypeError(f"{where}: key {key!r} is not a str or int")
            _ensure_safe(item, f"{where}.{key}")
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _ensure_safe(item, f"{where}[{i}]")
        return
    raise TypeError(
        f"{where}: {type(value).__name__} cannot go into a checkpoint (tensors, numbers, "
        "strings, bytes and containers only; loading anything else would need pickle)"
    )


def _on_cpu(value: Any) -> Any:
    """``value`` with every tensor on the CPU (CPU tensors are kept as they are).

    A checkpoint written by a CUDA learner then loads with a plain ``torch.load`` on a machine
    without a GPU, not only through rlformer's loader (which maps to the CPU anyway).
    """
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, Mapping):
        return {key: _on_cpu(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_on_cpu(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_on_cpu(item) for item in value)
    return value


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


def write_checkpoint_file(path: Path, payload: Mapping[str, Any]) -> None:
    """Atomically write one checkpoint file (tensors and plain data only, checked first)."""
    _ensure_safe(payload)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        torch.save({"format": CHECKPOINT_FORMAT, **_on_cpu(payload)}, tmp)
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_checkpoint(run_dir: Path, step: int, payload: Mapping[str, Any], keep: int = 3) -> Path:
    """Atomically write checkpoint ``ckpt_<step>.pt``, point ``latest`` at it, prune old ones."""
    ckpt_dir = run_dir / "checkpoints"
    path = ckpt_dir / f"ckpt_{step:09d}.pt"
    write_checkpoint_file(path, payload)
    atomic_write_bytes(ckpt_dir / "latest", path.name.encode())
    for old in sorted(ckpt_dir.glob("ckpt_*.pt"))[:-keep]:
        old.unlink(missing_ok=True)
    return path


# ------------------------------------------------------------------ reading one file
# How torch's weights-only unpickler names a global it refused (two phrasings across versions).
_UNSAFE_GLOBAL = re.compile(r"(?:unsupported GLOBAL|Unsupported global: GLOBAL) ([\w.]+)")


def _refusal(path: Path, name: str) -> UnsafeCheckpointError:
    return UnsafeCheckpointError(
        f"{path}: refused: the file holds Python objects ({name}) besides tensors, and loading "
        "them could run code. rlformer checkpoints of format 2 never do; if this one was written "
        "by an older rlformer (format 1) and you trust its source, pass --trust-checkpoint"
    )


def _reason(err: Exception) -> str:
    """The informative line of a loading error (torch's own text runs to many lines)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if "WeightsUnpickler error:" in line:
            rest = line.split("WeightsUnpickler error:", 1)[1].strip()
            return (rest or (lines[i + 1] if i + 1 < len(lines) else "unreadable"))[:200]
    return (lines[0] if lines else type(err).__name__)[:200]


def read_checkpoint_file(path: str | Path, trust: bool = False) -> dict[str, Any]:
    """Load one checkpoint file safely and check that this version can read it.

    Args:
        path: The ``.pt`` file.
        trust: Also accept files that need unpickling (format 1). Only for files from a
            trusted source: unpickling can run code.

    Raises:
        UnsafeCheckpointError: The file needs unpickling and ``trust`` is False.
        CheckpointError: Missing, truncated, corrupt, foreign or incompatible file.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint file not found")
    if path.stat().st_size == 0:
        raise CheckpointError(f"{path}: empty file (0 bytes), not a checkpoint")
    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols of foreign files
            warnings.simplefilter("ignore")
            payload = torch.load(path, map_location="cpu", weights_only=not trust)
    except Exception as err:  # torch raises many types for corrupt / foreign files
        unsafe = _UNSAFE_GLOBAL.search(str(err))
        if unsafe is not None and not trust:
            raise _refusal(path, unsafe.group(1)) from None
        raise CheckpointError(
            f"{path}: not a readable rlformer checkpoint (truncated or corrupt: {_reason(err)})"
        ) from None
    if not isinstance(payload, dict) or "format" not in payload:
        raise CheckpointError(f"{path}: not an rlformer checkpoint (no 'format' field)")
    version = payload["format"]
    if type(version) is not int:  # a tensor here would make the comparison below raise
        raise CheckpointError(f"{path}: not an rlformer checkpoint ('format' is not a number)")
    if version != CHECKPOINT_FORMAT and not (trust and version in LEGACY_FORMATS):
        hint = (
            "it was written by an older rlformer; pass --trust-checkpoint if you trust its source"
            if version in LEGACY_FORMATS
            else "use the rlformer version that wrote it"
        )
        raise CheckpointError(
            f"{path}: checkpoint format {version!r} but this rlformer reads format "
            f"{CHECKPOINT_FORMAT}; {hint}"
        )
    return payload


def require_keys(payload: Mapping[str, Any], path: str | Path, *keys: str) -> None:
    """A :class:`CheckpointError` naming the first of ``keys`` the payload lacks."""
    for key in keys:
        if key not in payload:
            raise CheckpointError(f"{path}: not a complete rlformer checkpoint (no {key!r} entry)")


# ------------------------------------------------------------------ run directories
def _checkpoint_step(path: Path) -> int:
    match = re.fullmatch(r"ckpt_(\d+)\.pt", path.name)
    return int(match.group(1)) if match else -1


def checkpoint_candidates(run_dir: str | Path) -> list[Path]:
    """A run's checkpoint files to try, best first: the ``latest`` pointer's, then newest first.

    Raises :class:`CheckpointError` for a missing run directory or one without checkpoints.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise CheckpointError(f"{run_dir}: run directory not found")
    ckpt_dir = run_dir / "checkpoints"
    if not ckpt_dir.is_dir():
        raise CheckpointError(
            f"{run_dir}: not a run directory (no checkpoints/ folder in it); give the directory "
            "`rlformer train` printed, or a checkpoint file"
        )
    files = sorted(ckpt_dir.glob("ckpt_*.pt"), key=_checkpoint_step, reverse=True)
    pointer = ckpt_dir / "latest"
    named: list[Path] = []
    if pointer.is_file():
        try:
            name = pointer.read_bytes().decode("ascii").strip()
        except UnicodeDecodeError:
            name = ""
        if re.fullmatch(r"ckpt_\d+\.pt", name) and (ckpt_dir / name).is_file():
            named = [ckpt_dir / name]
    ordered = named + [f for f in files if f not in named]
    if not ordered:
        raise CheckpointError(
            f"{run_dir}: no checkpoint yet (checkpoints/ is empty); the run stopped before "
            "its first checkpoint: start it again with `rlformer train CONFIG`"
        )
    return ordered


def latest_checkpoint(run_dir: str | Path) -> Path:
    """The file a run's ``latest`` pointer names (or its newest checkpoint file)."""
    return checkpoint_candidates(run_dir)[0]


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def newest_readable_checkpoint(
    run_dir: str | Path, trust: bool = False, warn: Callable[[str], None] = _warn
) -> tuple[Path, dict[str, Any]]:
    """A run directory's newest checkpoint that reads, and its payload.

    A truncated, empty or garbage newest file (a disk filled up, a copy cut short) is skipped
    with a warning naming it, and the next older checkpoint is used.
    """
    problems: list[str] = []
    for candidate in checkpoint_candidates(run_dir):
        try:
            payload = read_checkpoint_file(candidate, trust)
        except CheckpointError as err:
            problems.append(str(err))
            continue
        for problem in problems:
            warn(f"skipped {problem}; using the older {candidate.name}")
        return candidate, payload
    raise CheckpointError(problems[0] if len(problems) == 1 else "; ".join(problems))


def load_checkpoint(
    path: str | Path, trust: bool = False, warn: Callable[[str], None] = _warn
) -> dict[str, Any]:
    """Load a checkpoint file, or a run directory's newest readable checkpoint."""
    path = Path(path)
    if path.is_dir():
        return newest_readable_checkpoint(path, trust, warn)[1]
    return read_checkpoint_file(path, trust)


# ------------------------------------------------------------------ sealed pickles
def _key_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "rlformer" / "checkpoint.key"


def _user_key() -> bytes:
    """This user's secret for sealing env states (created once, readable by the user only)."""
    path = _key_path()
    try:
        return bytes.fromhex(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_hex(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process created it first: use theirs
        return bytes.fromhex(path.read_text().strip())
    with os.fdopen(fd, "w") as handle:
        handle.write(key)
    return bytes.fromhex(key)


def _mac(blobs: list[bytes]) -> str:
    digest = hmac.new(_user_key(), digestmod=hashlib.sha256)
    for blob in blobs:
        digest.update(len(blob).to_bytes(8, "little"))
        digest.update(blob)
    return digest.hexdigest()


def seal_state(blobs: list[bytes]) -> dict[str, Any]:
    """Pickled worker states plus an HMAC that only this user's key reproduces."""
    return {"blobs": list(blobs), "mac": _mac(list(blobs))}


def unseal_state(sealed: Any, path: str | Path, trust: bool = False) -> list[bytes]:
    """The sealed blobs, if this user sealed them (or ``trust``); else a clear refusal."""
    if not isinstance(sealed, dict) or not isinstance(sealed.get("blobs"), list):
        raise CheckpointError(f"{path}: the rollout-worker state is missing or malformed")
    blobs = sealed["blobs"]
    if not all(isinstance(b, bytes) for b in blobs):
        raise CheckpointError(f"{path}: the rollout-worker state is malformed")
    if trust or hmac.compare_digest(str(sealed.get("mac", "")), _mac(blobs)):
        return blobs
    raise UnsafeCheckpointError(
        f"{path}: its env states were not written by this user on this machine, and restoring "
        "them means unpickling, which can run code; resume with --trust-checkpoint if you "
        "trust where the run came from"
    )


# ------------------------------------------------------------------ reading the contents
def encode_spec(observation_space: Any, action_space: Any) -> dict[str, Any]:
    """The checkpoint's ``spec`` entry: both spaces as plain data."""
    from rlformer.export.space_codec import space_to_data

    return {
        "observation_space": space_to_data(observation_space),
        "action_space": space_to_data(action_space),
    }


def checkpoint_spaces(payload: Mapping[str, Any], path: str | Path) -> tuple[Any, Any]:
    """Observation and action spaces of a checkpoint (format 1 stored the objects themselves)."""
    import gymnasium as gym

    from rlformer.export.space_codec import SpaceCodecError, space_from_data

    require_keys(payload, path, "spec")
    spec = payload["spec"]
    if not isinstance(spec, Mapping):
        raise CheckpointError(f"{path}: malformed 'spec' entry")
    spaces = []
    for key in ("observation_space", "action_space"):
        value = spec.get(key)
        if isinstance(value, gym.Space):  # format 1, loaded with trust
            spaces.append(value)
            continue
        try:
            spaces.append(space_from_data(value))
        except SpaceCodecError as err:
            raise CheckpointError(f"{path}: malformed {key}: {err}") from None
    return spaces[0], spaces[1]


def checkpoint_config(payload: Mapping[str, Any], path: str | Path) -> Any:
    """The validated ``TrainConfig`` a checkpoint carries."""
    from pydantic import ValidationError

    from rlformer.config import format_validation_error, train_config_model

    require_keys(payload, path, "config")
    try:
        return train_config_model().model_validate(payload["config"])
    except ValidationError as err:
        problems = format_validation_error(err, train_config_model()).replace("\n", "; ")
        raise CheckpointError(
            f"{path}: its config does not validate with this rlformer ({problems})"
        ) from None


def refuse_saved_calls(env_cfg: Any, where: str | Path, trust: bool) -> None:
    """Refuse, unless ``trust``, a saved env config whose ``env.imports`` call a function.

    Loading never runs code: a ``module:function`` entry (``minatar.gym:register_envs``) read
    from a checkpoint, a run directory or an export would be called as soon as an env is built
    from it, so one that the user did not type needs ``--trust-checkpoint``. Plain module
    entries (``popgym``) load without it, as wrappers' ``module:Class`` entries do: importing
    a package installed on this machine is what building a checkpoint's env has always done.
    """
    from rlformer.config.sections.env import calls_function

    if trust or env_cfg is None:
        return
    entry = next((e for e in env_cfg.imports if calls_function(e)), None)
    if entry is not None:
        raise UnsafeCheckpointError(
            f"{where}: refused: its env.imports entry {entry!r} calls a function when an env is "
            "built, and loading a saved config never runs code; pass --trust-checkpoint if you "
            "trust where it came from"
        )


def load_weights(module: torch.nn.Module, payload: Mapping[str, Any], path: str | Path) -> None:
    """``module.load_state_dict(payload["model"])`` with a one-line error on any mismatch."""
    require_keys(payload, path, "model")
    try:
        module.load_state_dict(payload["model"])
    except (RuntimeError, TypeError, AttributeError, KeyError) as err:
        # torch's message opens with a header line; the next one names a key that differs.
        lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
        first = (lines[1:] or lines or [type(err).__name__])[0]
        raise CheckpointError(
            f"{path}: its weights do not fit the model its config describes ({first[:200]})"
        ) from None
