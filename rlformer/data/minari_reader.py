"""Minari datasets already present in the local Minari data directory (never downloaded).

Minari stores ``n + 1`` observations per episode of ``n`` steps (the last is the final
observation), so an episode's ``observations`` are the first ``n`` and ``next_observations`` the
last ``n``. Only flat array observations (Box, Discrete) are supported, as elsewhere in rlformer.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from rlformer.data.episodes import Dataset, Episode
from rlformer.data.errors import DatasetError


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
    try:
        import minari
    except ImportError as err:  # pragma: no cover - minari is a dependency
        raise DatasetError(
            f"minari:{dataset_id}: the minari package is not installed ({err})"
        ) from None
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
    for episode in raw_episodes:
        if not isinstance(episode.observations, np.ndarray):
            raise DatasetError(
                f"minari:{dataset_id}: observations are {type(episode.observations).__name__}; "
                "only flat Box/Discrete observations are supported"
            )
        obs = episode.observations  # [n + 1, *obs_shape]
        if len(obs) != len(episode.rewards) + 1:
            raise DatasetError(
                f"minari:{dataset_id}: episode {episode.id} has {len(obs)} observations for "
                f"{len(episode.rewards)} steps; expected one more observation than steps"
            )
        terminated = bool(episode.terminations[-1])
        episodes.append(
            Episode(
                observations=obs[:-1],
                actions=np.asarray(episode.actions),
                rewards=np.asarray(episode.rewards, dtype=np.float32),
                terminated=terminated,
                truncated=not terminated,
                next_observations=obs[1:],
            )
        )
    metadata = {"env_id": env_id, "env_kwargs": env_kwargs, "minari_id": dataset_id}
    return Dataset(episodes, source=f"minari:{dataset_id}", metadata=metadata)
