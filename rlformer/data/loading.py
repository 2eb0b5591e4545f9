"""One entry point for every dataset source."""

from __future__ import annotations

from pathlib import Path

from rlformer.data.d4rl_format import read_d4rl
from rlformer.data.episodes import Dataset
from rlformer.data.minari_reader import read_minari


def load_dataset(spec: str | Path) -> Dataset:
    """``d4rl:PATH``, ``minari:ID``, or a plain path to an rlformer recording (D4RL layout)."""
    text = str(spec)
    if text.startswith("minari:"):
        return read_minari(text.removeprefix("minari:"))
    return read_d4rl(text.removeprefix("d4rl:"))
