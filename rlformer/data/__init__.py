"""Offline trajectory data: D4RL-layout HDF5 files, local Minari datasets, rlformer recordings.

>>> from rlformer.data import load_dataset
>>> dataset = load_dataset("d4rl:hopper-medium.hdf5")          # doctest: +SKIP
>>> dataset.num_episodes, dataset.num_transitions                # doctest: +SKIP
"""

from rlformer.data.episodes import Dataset, Episode
from rlformer.data.errors import DatasetError
from rlformer.data.loading import load_dataset

__all__ = ["Dataset", "DatasetError", "Episode", "load_dataset"]
