"""The D4RL HDF5 layout: read it with validation, and write rlformer recordings in it.

Flat arrays over all N transitions: ``observations [N, ...]``, ``actions [N, ...]``,
``rewards [N]``, ``terminals [N]``, ``timeouts [N]``, optional ``next_observations [N, ...]`` and
``infos/<key> [N, ...]``. An episode ends after a step where ``terminals`` or ``timeouts`` is set
(``terminals`` wins when both are). ``timeouts`` may be absent (older files); then only
terminals end episodes.

Transitions after the last end form a **trailing partial episode**: it is kept and marked
``truncated`` (not terminated), since it was cut off by the end of the recording. D4RL's own
``sequence_dataset`` silently drops it; dropping would lose data without saying so, and a
truncated episode is exactly right for return-to-go sampling (no terminal is claimed).

rlformer recordings are files in this layout plus attributes (env id, policy, seed, episode
returns, rlformer version); lists and dicts are stored as JSON strings.

Observations of Dict / Tuple spaces are groups: ``observations/<leaf path> [N, ...]``, one
dataset per leaf at its path (``observations/image``, ``observations/inner/0``: Dict keys and
Tuple indices, :mod:`rlformer.networks.spaces`), each in the leaf's own dtype;
``next_observations`` likewise. Arrays of images (two or more dimensions per step) are stored
gzip-compressed in chunks of whole steps, so a pixel dataset costs a fraction of its raw size
and reading a range of steps decompresses only the chunks that hold it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from rlformer.data.episodes import Dataset, Episode
from rlformer.data.errors import DatasetError
from rlformer.networks.spaces import Tree, tree_first, tree_map, tree_stack

REQUIRED = ("observations", "actions", "rewards", "terminals")
OPTIONAL = ("timeouts", "next_observations")
CHUNK_BYTES = 1 << 19
"""Target size of a compressed array's chunks (HDF5's chunk cache holds 1 MiB per array)."""
COMPRESSION_LEVEL = 4  # gzip: level 4 is within a few percent of 9's size, several times faster
HOW_TO_MAKE = (
    "record one with `rlformer collect --env ENV_ID --out FILE` or place a D4RL-format HDF5 "
    "file (keys observations, actions, rewards, terminals, timeouts) there"
)


def _checked(path: Path, key: str, array: np.ndarray) -> np.ndarray:
    """``array`` if it is numeric, per-transition and finite; else a DatasetError."""
    if array.ndim == 0:
        raise DatasetError(f"{path}: '{key}' is a single value; expected one entry per transition")
    if array.dtype.kind not in "fiub":
        raise DatasetError(f"{path}: '{key}' has dtype {array.dtype}; expected numbers or booleans")
    if array.size == 0 and len(array) > 0:
        raise DatasetError(f"{path}: '{key}' has shape {array.shape}: no values per transition")
    if array.dtype.kind == "f":
        finite = np.isfinite(array).all(axis=tuple(range(1, array.ndim)))  # [N]
        if not finite.all():
            bad = int(np.argmin(finite))
            raise DatasetError(f"{path}: '{key}' contains NaN or inf (first at transition {bad})")
    return array


def _read_array(path: Path, key: str, item: object) -> np.ndarray:
    """The whole dataset ``key`` as an array; a group or an empty (shapeless) one is an error."""
    if not isinstance(item, h5py.Dataset):
        raise DatasetError(f"{path}: '{key}' is a {type(item).__name__}, expected an array")
    if item.shape is None:  # h5py.Empty: a dataset without a dataspace
        raise DatasetError(f"{path}: '{key}' is empty (no shape); expected one per transition")
    return np.asarray(item[()])


def _read_observations(path: Path, key: str, item: object) -> Tree:
    """An array, or a group of leaf arrays (Dict / Tuple observations) as ``{leaf path: array}``."""
    if not isinstance(item, h5py.Group):
        return _checked(path, key, _read_array(path, key, item))
    leaves: dict[str, np.ndarray] = {}

    def visit(name: str, member: object) -> None:
        if isinstance(member, h5py.Dataset):
            named = f"{key}/{name}"
            leaves[name] = _checked(path, named, _read_array(path, named, member))

    item.visititems(visit)
    if not leaves:
        raise DatasetError(f"{path}: '{key}' is a group without arrays")
    return leaves


def _open(path: Path) -> h5py.File:
    if not path.is_file():
        raise DatasetError(f"{path}: dataset file not found; {HOW_TO_MAKE}")
    try:
        return h5py.File(path, "r")
    except (OSError, RuntimeError, ValueError) as err:
        raise DatasetError(
            f"{path}: not a readable HDF5 file (truncated or another format): {err}"
        ) from None


def read_d4rl(path: str | Path) -> Dataset:
    """Read and validate a D4RL-layout file (rlformer's own recordings included).

    Raises:
        DatasetError: one line naming the file and the problem — missing file or keys,
            mismatched lengths, NaN/inf, non-numeric dtypes, truncated or non-HDF5 files.
    """
    path = Path(path)
    arrays: dict[str, np.ndarray] = {}
    infos: dict[str, np.ndarray] = {}
    with _open(path) as handle:
        try:
            missing = [key for key in REQUIRED if key not in handle]
            if missing:
                raise DatasetError(f"{path}: missing key(s) {', '.join(missing)}; {HOW_TO_MAKE}")
            for key in (*REQUIRED, *OPTIONAL):
                if key not in handle:
                    continue
                if key.endswith("observations"):
                    arrays[key] = _read_observations(path, key, handle[key])
                else:
                    arrays[key] = _checked(path, key, _read_array(path, key, handle[key]))
            group = handle.get("infos")
            if isinstance(group, h5py.Group):
                for key, item in group.items():
                    if isinstance(item, h5py.Dataset):
                        infos[key] = np.asarray(item[()])
            metadata = {key: _attr(value) for key, value in handle.attrs.items()}
        except DatasetError:
            raise
        # A damaged file fails inside h5py with any of these (a garbled header, a bad type).
        except (OSError, KeyError, RuntimeError, ValueError, TypeError, MemoryError) as err:
            detail = " ".join(str(err).split()) or type(err).__name__
            raise DatasetError(
                f"{path}: could not read arrays (truncated or corrupt file?): {detail}"
            ) from None
    count = len(tree_first(arrays["observations"]))
    for key, array in [*_named(arrays), *((f"infos/{k}", v) for k, v in infos.items())]:
        if array.ndim == 0 or len(array) != count:
            entries = "a single value" if array.ndim == 0 else f"{len(array)} entries"
            raise DatasetError(f"{path}: '{key}' has {entries} but observations has {count}")
    if count == 0:
        raise DatasetError(f"{path}: the dataset holds no transitions")
    rewards = arrays["rewards"].astype(np.float32).reshape(count, -1)  # [N, 1] also accepted
    if rewards.shape[1] != 1:
        raise DatasetError(
            f"{path}: 'rewards' must be one number per transition, got shape {rewards.shape}"
        )
    terminals = arrays["terminals"].astype(bool).reshape(count, -1)
    timeouts = arrays.get("timeouts", np.zeros(count, dtype=bool)).astype(bool).reshape(count, -1)
    for key, flags in (("terminals", terminals), ("timeouts", timeouts)):
        if flags.shape[1] != 1:
            raise DatasetError(f"{path}: '{key}' must be one flag per transition")
    episodes = episodes_from_arrays(
        arrays["observations"],
        arrays["actions"],
        rewards[:, 0],
        terminals[:, 0],
        timeouts[:, 0],
        arrays.get("next_observations"),
        infos,
    )
    return Dataset(episodes, source=f"d4rl:{path}", metadata=metadata)


def _named(arrays: dict[str, Tree]) -> list[tuple[str, np.ndarray]]:
    """Every array by its name in the file (``observations/image`` for a group's leaves)."""
    named = []
    for key, value in arrays.items():
        if isinstance(value, dict):
            named += [(f"{key}/{leaf}", array) for leaf, array in value.items()]
        else:
            named.append((key, value))
    return named


def _attr(value: Any) -> Any:
    """An HDF5 attribute as a Python value (JSON strings decoded, arrays as lists)."""
    if isinstance(value, h5py.Empty):
        return None
    if isinstance(value, bytes):
        value = value.decode(errors="replace")  # metadata only: never fail a read over it
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value.item() if isinstance(value, np.generic) else value


def episodes_from_arrays(
    observations: Tree,
    actions: np.ndarray,
    rewards: np.ndarray,
    terminals: np.ndarray,
    timeouts: np.ndarray | None = None,
    next_observations: Tree | None = None,
    infos: dict[str, np.ndarray] | None = None,
) -> list[Episode]:
    """Cut flat ``[N, ...]`` arrays into episodes after every terminal / timeout step.

    The rules of this module apply: ``terminals`` wins over ``timeouts`` on the same step, and
    steps after the last end form a trailing episode marked truncated. Episodes are views into
    the given arrays (no copy). Observations are arrays or trees of them (Dict / Tuple spaces).
    Inputs are assumed valid (:func:`read_d4rl` checks files).
    """
    count = len(rewards)
    terminals = np.asarray(terminals, dtype=bool)
    ends = terminals if timeouts is None else terminals | np.asarray(timeouts, dtype=bool)
    stops = np.flatnonzero(ends) + 1  # exclusive ends of complete episodes
    if len(stops) == 0 or stops[-1] < count:
        stops = np.r_[stops, count]  # the trailing partial episode
    starts = np.r_[0, stops[:-1]]
    episodes = []
    for start, stop in zip(starts, stops, strict=True):
        terminated = bool(terminals[stop - 1])
        steps = slice(start, stop)
        episodes.append(
            Episode(
                observations=tree_map(lambda a, steps=steps: a[steps], observations),
                actions=actions[start:stop],
                rewards=np.asarray(rewards[start:stop], dtype=np.float32),
                terminated=terminated,
                truncated=not terminated,
                next_observations=(
                    None
                    if next_observations is None
                    else tree_map(lambda a, steps=steps: a[steps], next_observations)
                ),
                infos={key: value[start:stop] for key, value in (infos or {}).items()},
            )
        )
    return episodes


def _end_flags(episodes: list[Episode], which: str) -> np.ndarray:
    """``[N]`` bools, True on the last step of every episode whose ``which`` flag is set."""
    flags = np.zeros(sum(len(e) for e in episodes), dtype=bool)
    ends = np.cumsum([len(e) for e in episodes]) - 1
    flags[ends] = [bool(getattr(e, which)) for e in episodes]
    return flags


def write_d4rl(path: str | Path, episodes: list[Episode], metadata: dict[str, Any]) -> None:
    """Write episodes in the D4RL layout (temp file + rename, so a crash leaves no half file).

    ``next_observations`` and ``infos/<key>`` are written when every episode has them.
    Observation trees become groups, and image arrays are compressed (see the module
    docstring). Metadata values that are None are left out (HDF5 attributes cannot hold None).
    """
    if not episodes:
        raise DatasetError(f"{path}: no episodes to write")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")

    def cat(name: str) -> Tree:
        return tree_stack([getattr(e, name) for e in episodes], np.concatenate)  # [N, ...]

    try:
        with h5py.File(tmp, "w") as handle:
            _write_observations(handle, "observations", cat("observations"))
            handle["actions"] = cat("actions")
            handle["rewards"] = cat("rewards").astype(np.float32)
            handle["terminals"] = _end_flags(episodes, "terminated")
            handle["timeouts"] = _end_flags(episodes, "truncated")
            if all(e.next_observations is not None for e in episodes):
                _write_observations(handle, "next_observations", cat("next_observations"))
            shared = set.intersection(*(set(e.infos) for e in episodes))
            for key in sorted(shared):
                handle[f"infos/{key}"] = np.concatenate([e.infos[key] for e in episodes])
            for key, value in metadata.items():
                if value is not None:
                    stored = json.dumps(value) if isinstance(value, (list, dict, tuple)) else value
                    handle.attrs[key] = stored
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def _write_observations(handle: h5py.File, key: str, observations: Tree) -> None:
    """An array at ``key``, or each leaf of a tree at ``key/<leaf path>``."""
    if not isinstance(observations, dict):
        _write_array(handle, key, observations)
        return
    for leaf, array in observations.items():
        _write_array(handle, f"{key}/{leaf}", array)


def _write_array(handle: h5py.File, key: str, array: np.ndarray) -> None:
    """Vectors as they are; images (two or more dimensions per step) gzip-compressed in chunks
    of whole steps of about :data:`CHUNK_BYTES`."""
    if array.ndim < 3 or len(array) == 0:
        handle[key] = array
        return
    step_bytes = max(1, array[0].nbytes)
    rows = int(np.clip(CHUNK_BYTES // step_bytes, 1, len(array)))
    handle.create_dataset(
        key,
        data=array,
        chunks=(rows, *array.shape[1:]),
        compression="gzip",
        compression_opts=COMPRESSION_LEVEL,
    )
