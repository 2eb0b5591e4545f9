"""Minari datasets already present in the local Minari data directory (never downloaded)."""

from __future__ import annotations

import numpy as np

from rlformer.data.episodes import Dataset, Episode
from rlformer.data.errors import DatasetError


def read_minari(dataset_id: str) -> Dataset:
    """Episodes of a local Minari dataset (``MINARI_DATASETS_PATH`` or ``~/.minari/datasets``)."""
    try:
        import minari
        from minari.storage.datasets_root_dir import get_dataset_path
    except ImportError as err:  # pragma: no cover - minari is a dependency
        raise DatasetError(
            f"minari:{dataset_id}: the minari package is not installed ({err})"
        ) from None
    try:
        data = minari.load_dataset(dataset_id, download=False)
    except Exception as err:  # minari raises FileNotFoundError / ValueError variants
        where = get_dataset_path(dataset_id)
        raise DatasetError(
            f"minari:{dataset_id}: not found locally (looked in {where}); nothing is downloaded "
            "at run time: create it with minari.DataCollector or copy it there "
            f"({type(err).__name__})"
        ) from None
    episodes = []
    for episode in data.iterate_episodes():
        obs = np.asarray(episode.observations)
        if not isinstance(episode.observations, np.ndarray) or len(obs) != len(episode.rewards) + 1:
            raise DatasetError(
                f"minari:{dataset_id}: only flat Box/Discrete observations are supported"
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
    metadata = {
        "env_id": data.spec.env_spec.id if data.spec.env_spec else None,
        "minari_id": dataset_id,
    }
    return Dataset(episodes, source=f"minari:{dataset_id}", metadata=metadata)
