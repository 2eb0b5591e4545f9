"""One entry point for every dataset source.

>>> load_dataset("d4rl:hopper-medium-v2.hdf5")   # doctest: +SKIP  a D4RL HDF5 file
>>> load_dataset("minari:mujoco/hopper/expert-v0")  # doctest: +SKIP  a local Minari dataset
>>> load_dataset("runs/cartpole.hdf5")            # doctest: +SKIP  an rlformer recording
"""

from __future__ import annotations

import re
from pathlib import Path

from rlformer.data.d4rl_format import read_d4rl
from rlformer.data.episodes import Dataset
from rlformer.data.errors import DatasetError
from rlformer.data.minari_reader import read_minari

SOURCES = ("d4rl", "minari")


def load_dataset(spec: str | Path) -> Dataset:
    """``d4rl:PATH``, ``minari:ID``, or a plain path to an rlformer recording (D4RL layout).

    Raises:
        DatasetError: the dataset is missing (the message says where it was looked for and how
            to record or place one) or malformed.
    """
    text = str(spec)
    scheme = re.match(r"^([A-Za-z][A-Za-z0-9_]+):(?!//)", text)
    if scheme and not Path(text).exists():
        name = scheme.group(1)
        if name == "minari":
            return read_minari(text.removeprefix("minari:"))
        if name != "d4rl":
            raise DatasetError(
                f"{text}: unknown dataset source {name!r}; use d4rl:PATH, minari:ID or a path"
            )
        text = text.removeprefix("d4rl:")
    return read_d4rl(text)
