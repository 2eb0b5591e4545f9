"""``rlformer dataset info``: what a dataset holds, in one screen.

The summary is computed once (:func:`summarize_dataset`) and formatted separately
(:func:`format_summary`), so tests and other tools can use the numbers without parsing text.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlformer.data.episodes import Dataset
from rlformer.data.references import normalized_score


@dataclass(frozen=True)
class Stats:
    """Minimum, mean and maximum of some per-episode quantity."""

    min: float
    mean: float
    max: float

    @staticmethod
    def of(values: np.ndarray) -> Stats:
        """Statistics of a non-empty array."""
        return Stats(float(values.min()), float(values.mean()), float(values.max()))


@dataclass(frozen=True)
class ArrayInfo:
    """Shape of one step's array (without the time axis), dtype and value range."""

    shape: tuple[int, ...]
    dtype: str
    low: float
    high: float

    def __str__(self) -> str:
        return f"shape {self.shape} dtype {self.dtype} range [{self.low:.3g}, {self.high:.3g}]"


@dataclass(frozen=True)
class DatasetSummary:
    """Everything ``rlformer dataset info`` prints."""

    source: str
    env_id: str | None  # with its gymnasium.make kwargs, if recorded (Dataset.recorded_env)
    episodes: int
    terminated_episodes: int
    transitions: int
    lengths: Stats
    returns: Stats
    observation: ArrayInfo | dict[str, ArrayInfo]  # per leaf for Dict / Tuple observations
    action: ArrayInfo
    normalized: Stats | None  # D4RL scale, only where reference returns exist for the env


def _array_info(arrays: list[np.ndarray]) -> ArrayInfo:
    """Per-step shape, dtype and range of ``[n, *shape]`` arrays, without joining them (a
    pixel dataset would be copied whole)."""
    filled = [a for a in arrays if a.size]
    return ArrayInfo(
        tuple(arrays[0].shape[1:]),
        str(np.result_type(*arrays)),
        min((float(a.min()) for a in filled), default=float("nan")),
        max((float(a.max()) for a in filled), default=float("nan")),
    )


def _observation_info(dataset: Dataset) -> ArrayInfo | dict[str, ArrayInfo]:
    observations = [e.observations for e in dataset.episodes]
    if not isinstance(observations[0], dict):
        return _array_info(observations)
    return {key: _array_info([o[key] for o in observations]) for key in observations[0]}


def summarize_dataset(dataset: Dataset) -> DatasetSummary:
    """Counts, return statistics, spaces and D4RL-normalised returns of a dataset.

    The env for reference scores is the recorded env id, else the dataset's name or file name.
    """
    returns = dataset.returns
    score_min = normalized_score(float(returns.min()), dataset.env_id or dataset.source)
    normalized = None
    if score_min is not None:
        scores = np.array([normalized_score(r, dataset.env_id or dataset.source) for r in returns])
        normalized = Stats.of(scores)
    return DatasetSummary(
        source=dataset.source,
        env_id=dataset.recorded_env,
        episodes=dataset.num_episodes,
        terminated_episodes=sum(e.terminated for e in dataset.episodes),
        transitions=dataset.num_transitions,
        lengths=Stats.of(np.array([len(e) for e in dataset.episodes], dtype=np.float64)),
        returns=Stats.of(returns),
        observation=_observation_info(dataset),
        action=_array_info([e.actions for e in dataset.episodes]),
        normalized=normalized,
    )


def format_summary(s: DatasetSummary) -> str:
    """Aligned ``label  value`` lines for the terminal."""

    def stats(x: Stats, digits: int = 2) -> str:
        return f"min {x.min:.{digits}f}  mean {x.mean:.{digits}f}  max {x.max:.{digits}f}"

    lines = [
        f"dataset       {s.source}",
        f"env           {s.env_id or 'unknown'}",
        f"episodes      {s.episodes} ({s.terminated_episodes} terminated, "
        f"{s.episodes - s.terminated_episodes} truncated or cut off)",
        f"transitions   {s.transitions}",
        f"lengths       {stats(s.lengths, 1)}",
        f"returns       {stats(s.returns)}",
        *_observation_lines(s.observation),
        f"actions       {s.action}",
    ]
    if s.normalized is not None:
        lines.append(f"normalized    {stats(s.normalized, 1)}  (D4RL: 0 random, 100 expert)")
    return "\n".join(lines)


def _observation_lines(info: ArrayInfo | dict[str, ArrayInfo]) -> list[str]:
    """One line, or one per leaf (its path first) for Dict / Tuple observations."""
    if isinstance(info, ArrayInfo):
        return [f"observations  {info}"]
    width = max(len(path) for path in info)
    return [
        f"{'observations' if i == 0 else '':<14}{path:<{width}}  {leaf}"
        for i, (path, leaf) in enumerate(info.items())
    ]
