"""Episodes and datasets in memory: the common shape every reader produces.

Readers (D4RL files, Minari, rlformer recordings) all return a :class:`Dataset` of
:class:`Episode` objects, so samplers and tools never care where data came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Episode:
    """One trajectory of ``n`` steps; ``truncated`` is True when it ended without termination
    (a time limit, or a recording that stopped mid-episode).

    Observations of Dict / Tuple spaces are trees: ``{leaf path: [n, *leaf_shape]}``
    (:mod:`rlformer.networks.spaces`)."""

    observations: Any  # [n, *obs_shape], or {leaf path: [n, *leaf_shape]}
    actions: np.ndarray  # [n, *act_shape]
    rewards: np.ndarray  # [n] float32
    terminated: bool
    truncated: bool
    next_observations: Any = None  # like observations, or None
    infos: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        """Number of steps."""
        return int(self.rewards.shape[0])

    @property
    def episode_return(self) -> float:
        """Undiscounted sum of rewards."""
        return float(self.rewards.sum())


@dataclass
class Dataset:
    """Episodes plus what is known about where they came from."""

    episodes: list[Episode]
    source: str
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def num_episodes(self) -> int:
        """Number of episodes (a trailing cut-off one included)."""
        return len(self.episodes)

    @property
    def num_transitions(self) -> int:
        """Steps over all episodes."""
        return sum(len(e) for e in self.episodes)

    @property
    def returns(self) -> np.ndarray:
        """``[num_episodes]`` undiscounted episode returns."""
        return np.array([e.episode_return for e in self.episodes], dtype=np.float64)

    @property
    def env_id(self) -> str | None:
        """The Gymnasium env id the data came from, when the source recorded it."""
        value = self.metadata.get("env_id")
        return None if value is None else str(value)

    @property
    def env_kwargs(self) -> dict[str, Any]:
        """The ``gymnasium.make`` keyword arguments the data was recorded with, when known
        (LunarLander-v3 is discrete unless made with ``continuous=True``)."""
        value = self.metadata.get("env_kwargs")
        return dict(value) if isinstance(value, dict) else {}

    @property
    def recorded_env(self) -> str | None:
        """The env id with its kwargs, as messages name it: ``LunarLander-v3 with
        continuous=True``; None when the source did not record it."""
        if self.env_id is None:
            return None
        kwargs = ", ".join(f"{key}={value!r}" for key, value in self.env_kwargs.items())
        return f"{self.env_id} with {kwargs}" if kwargs else self.env_id
