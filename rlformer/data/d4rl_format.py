"""The D4RL HDF5 layout: read it with validation, and write rlformer recordings in it.

Flat arrays over all transitions: ``observations [N, ...]``, ``actions [N, ...]``,
``rewards [N]``, ``terminals [N]``, ``timeouts [N]``, optional ``next_observations [N, ...]`` and
``infos/<key> [N, ...]``. An episode ends where ``terminals`` or ``timeouts`` is set; transitions
after the last end form a trailing partial episode, kept and marked truncated (as D4RL's own
``sequence_dataset`` would drop them silently, which loses data without saying so).
rlformer recordings add file attributes: env id, policy, seed, episode returns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from rlformer.data.episodes import Dataset, Episode
from rlformer.data.errors import DatasetError

REQUIRED = ("observations", "actions", "rewards", "terminals")
HOW_TO_MAKE = (
    "record one with `rlformer collect --env ENV_ID --out FILE` or place a D4RL-format HDF5 "
    "file (keys observations, actions, rewards, terminals, timeouts) there"
)


def _numeric(path: Path, key: str, array: np.ndarray) -> np.ndarray:
    if array.dtype.kind not in "fiub":
        raise DatasetError(f"{path}: '{key}' has dtype {array.dtype}; expected numbers or booleans")
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        bad = int(np.argwhere(~np.isfinite(array.reshape(len(array), -1)))[0, 0])
        raise DatasetError(f"{path}: '{key}' contains NaN or inf (first at transition {bad})")
    return array


def read_d4rl(path: str | Path) -> Dataset:
    """Read and validate a D4RL-layout file (also rlformer's own recordings)."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: dataset file not found; {HOW_TO_MAKE}")
    try:
        handle = h5py.File(path, "r")
    except OSError as err:
        raise DatasetError(
            f"{path}: not a readable HDF5 file (truncated or another format): {err}"
        ) from None
    with handle:
        missing = [key for key in REQUIRED if key not in handle]
        if missing:
            raise DatasetError(f"{path}: missing key(s) {', '.join(missing)}; {HOW_TO_MAKE}")
        arrays: dict[str, np.ndarray] = {}
        try:
            for key in (*REQUIRED, "timeouts", "next_observations"):
                if key in handle:
                    arrays[key] = _numeric(path, key, np.asarray(handle[key][()]))
            infos = {
                key: np.asarray(handle["infos"][key][()])
                for key in (handle["infos"].keys() if "infos" in handle else [])
                if isinstance(handle["infos"][key], h5py.Dataset)
            }
        except (OSError, KeyError) as err:
            raise DatasetError(f"{path}: could not read arrays (truncated file?): {err}") from None
        metadata = {key: _attr(value) for key, value in handle.attrs.items()}
    count = len(arrays["observations"])
    for key, array in [*arrays.items(), *((f"infos/{k}", v) for k, v in infos.items())]:
        if len(array) != count:
            raise DatasetError(
                f"{path}: '{key}' has {len(array)} entries but observations has {count}"
            )
    if count == 0:
        raise DatasetError(f"{path}: the dataset holds no transitions")
    rewards = arrays["rewards"].astype(np.float32).reshape(count, -1)
    if rewards.shape[1] != 1:
        raise DatasetError(
            f"{path}: 'rewards' must be one number per transition, got {rewards.shape}"
        )
    terminals = arrays["terminals"].astype(bool).reshape(count)
    timeouts = arrays.get("timeouts", np.zeros(count)).astype(bool).reshape(count)
    episodes = _split(arrays, rewards[:, 0], terminals, timeouts, infos)
    return Dataset(episodes, source=f"d4rl:{path}", metadata=metadata)


def _attr(value: Any) -> Any:
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value.tolist() if isinstance(value, np.ndarray) else value


def _split(
    arrays: dict[str, np.ndarray],
    rewards: np.ndarray,
    terminals: np.ndarray,
    timeouts: np.ndarray,
    infos: dict[str, np.ndarray],
) -> list[Episode]:
    ends = np.flatnonzero(terminals | timeouts) + 1
    count = len(rewards)
    bounds = list(zip(np.r_[0, ends[:-1]], ends, strict=True))
    if not len(ends) or ends[-1] < count:
        bounds.append((ends[-1] if len(ends) else 0, count))  # trailing partial episode
    episodes = []
    for start, stop in bounds:
        last = stop - 1
        terminated = bool(terminals[last])
        episodes.append(
            Episode(
                observations=arrays["observations"][start:stop],
                actions=arrays["actions"][start:stop],
                rewards=rewards[start:stop],
                terminated=terminated,
                truncated=not terminated,
                next_observations=(
                    arrays["next_observations"][start:stop]
                    if "next_observations" in arrays
                    else None
                ),
                infos={key: value[start:stop] for key, value in infos.items()},
            )
        )
    return episodes


def write_d4rl(path: str | Path, episodes: list[Episode], metadata: dict[str, Any]) -> None:
    """Write episodes in the D4RL layout (temp file + rename, so a crash leaves no half file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")

    def cat(name: str) -> np.ndarray:
        return np.concatenate([getattr(e, name) for e in episodes])

    terminals = np.concatenate([np.eye(1, len(e), len(e) - 1)[0] * e.terminated for e in episodes])
    timeouts = np.concatenate([np.eye(1, len(e), len(e) - 1)[0] * e.truncated for e in episodes])
    with h5py.File(tmp, "w") as handle:
        handle["observations"] = cat("observations")
        handle["actions"] = cat("actions")
        handle["rewards"] = cat("rewards").astype(np.float32)
        handle["terminals"] = terminals.astype(bool)
        handle["timeouts"] = timeouts.astype(bool)
        if all(e.next_observations is not None for e in episodes):
            handle["next_observations"] = cat("next_observations")
        for key, value in metadata.items():
            handle.attrs[key] = json.dumps(value) if isinstance(value, (list, dict)) else value
    tmp.replace(path)
