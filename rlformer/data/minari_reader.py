"""Minari datasets already present in the local Minari data directory (never downloaded).

Minari stores ``n + 1`` observations per episode of ``n`` steps (the last is the final
observation), so an episode's ``observations`` are the first ``n`` and ``next_observations`` the
last ``n``. Observations of Dict / Tuple spaces (Minari gives nested dicts and tuples of
arrays) become trees, ``{leaf path: array}`` (:mod:`rlformer.networks.spaces`); text leaves
such as MiniGrid's mission are left out (no encoder reads them), and named in the metadata.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from rlformer.data.episodes import Dataset, Episode
from rlformer.data.errors import DatasetError
from rlformer.networks.spaces import Tree, tree_first, tree_map


def minari_root() -> Path:
    """Where Minari keeps datasets: ``$MINARI_DATASETS_PATH``, else ``~/.minari/datasets``.

    Mirrors ``minari.storage.get_dataset_path`` without its side effect of creating the folder.
    """
    env = os.environ.get("MINARI_DATASETS_PATH")
    return Path(env) if env else Path.home() / ".minari" / "datasets"


def read_minari(dataset_id: str) -> Dataset:
    """Episodes of a local Minari dataset such as ``mujoco/hopper/expert-v0``."""
    where = minari_root() / dataset_id
    if not (where / "data").is_dir():
        raise DatasetError(
            f"minari:{dataset_id}: not found locally (looked in {where}); nothing is downloaded "
            "at run time: download it once with `minari download ID`, copy it there, create it "
            "with minari.DataCollector, or set MINARI_DATASETS_PATH to the folder that holds it"
        )
    from rlformer.extras import MissingExtra, require

    try:
        require("minari", f"minari:{dataset_id}")
    except MissingExtra as err:
        raise DatasetError(str(err)) from None
    import minari

    try:
        data = minari.load_dataset(dataset_id, download=False)
        raw_episodes = list(data.iterate_episodes())
        env_spec = data.spec.env_spec
        env_id = env_spec.id if env_spec is not None else None
        env_kwargs = dict(env_spec.kwargs) if env_spec is not None else {}
    except Exception as err:  # minari / h5py raise many types for broken files
        message = str(err).splitlines()[0] if str(err) else ""
        raise DatasetError(
            f"minari:{dataset_id}: could not read the dataset in {where} "
            f"({type(err).__name__}: {message})"
        ) from None
    if not raw_episodes:
        raise DatasetError(f"minari:{dataset_id}: the dataset in {where} holds no episodes")
    episodes = []
    dropped: set[str] = set()
    for episode in raw_episodes:
        obs = _tree(episode.observations, dataset_id, dropped)  # [n + 1, *obs_shape] per leaf
        if len(tree_first(obs)) != len(episode.rewards) + 1:
            raise DatasetError(
                f"minari:{dataset_id}: episode {episode.id} has {len(tree_first(obs))} "
                f"observations for {len(episode.rewards)} steps; expected one more observation "
                "than steps"
            )
        terminated = bool(episode.terminations[-1])
        episodes.append(
            Episode(
                observations=tree_map(lambda a: a[:-1], obs),
                actions=np.asarray(episode.actions),
                rewards=np.asarray(episode.rewards, dtype=np.float32),
                terminated=terminated,
                truncated=not terminated,
                next_observations=tree_map(lambda a: a[1:], obs),
            )
        )
    metadata = {"env_id": env_id, "env_kwargs": env_kwargs, "minari_id": dataset_id}
    if dropped:
        metadata["dropped_observation_keys"] = sorted(dropped)
    return Dataset(episodes, source=f"minari:{dataset_id}", metadata=metadata)


def _tree(observations: Any, dataset_id: str, dropped: set[str]) -> Tree:
    """Minari's observations (an array, or nested dicts / tuples of arrays) as an rlformer
    observation tree. Text leaves (MiniGrid's mission), which no rlformer encoder reads, are
    left out and their paths added to ``dropped``; other non-numeric data is a
    :class:`DatasetError`."""
    if isinstance(observations, np.ndarray) and observations.dtype.kind in "fiub":
        return observations
    leaves: dict[str, np.ndarray] = {}

    def walk(value: Any, prefix: str) -> None:
        if isinstance(value, dict):
            items = list(value.items())
        elif isinstance(value, tuple):
            items = [(str(i), v) for i, v in enumerate(value)]
        else:
            array = np.asarray(value)
            if array.dtype.kind in "fiub":
                leaves[prefix] = array
            elif array.dtype.kind in "USO" and prefix:
                dropped.add(prefix)
            else:
                raise DatasetError(
                    f"minari:{dataset_id}: observations hold {array.dtype} values; rlformer "
                    "reads numeric arrays (Box, Discrete, MultiDiscrete, MultiBinary leaves)"
                )
            return
        for key, child in items:
            walk(child, f"{prefix}/{key}" if prefix else str(key))

    walk(observations, "")
    if not leaves:
        raise DatasetError(f"minari:{dataset_id}: no observation leaf holds numbers")
    return leaves
