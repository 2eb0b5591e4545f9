"""``rlformer dataset info``: what a dataset holds, in one screen."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlformer.data.episodes import Dataset
from rlformer.data.references import normalized_score


@dataclass
class DatasetSummary:
    source: str
    env_id: str | None
    episodes: int
    transitions: int
    return_min: float
    return_mean: float
    return_max: float
    observation: str
    action: str
    normalized_mean: float | None
    terminated_episodes: int


def _describe(arrays: list[np.ndarray]) -> str:
    flat = np.concatenate(arrays)
    shape = flat.shape[1:]
    return f"shape {tuple(shape)} dtype {flat.dtype} range [{flat.min():.3g}, {flat.max():.3g}]"


def summarize_dataset(dataset: Dataset) -> DatasetSummary:
    returns = dataset.returns
    return DatasetSummary(
        source=dataset.source,
        env_id=dataset.env_id,
        episodes=dataset.num_episodes,
        transitions=dataset.num_transitions,
        return_min=float(returns.min()),
        return_mean=float(returns.mean()),
        return_max=float(returns.max()),
        observation=_describe([e.observations for e in dataset.episodes]),
        action=_describe([e.actions for e in dataset.episodes]),
        normalized_mean=normalized_score(float(returns.mean()), dataset.env_id or dataset.source),
        terminated_episodes=sum(e.terminated for e in dataset.episodes),
    )


def format_summary(s: DatasetSummary) -> str:
    lines = [
        f"dataset       {s.source}",
        f"env           {s.env_id or 'unknown'}",
        f"episodes      {s.episodes} ({s.terminated_episodes} terminated, "
        f"{s.episodes - s.terminated_episodes} truncated)",
        f"transitions   {s.transitions}",
        f"returns       min {s.return_min:.2f}  mean {s.return_mean:.2f}  max {s.return_max:.2f}",
        f"observations  {s.observation}",
        f"actions       {s.action}",
    ]
    if s.normalized_mean is not None:
        lines.append(f"normalized    {s.normalized_mean:.1f} (D4RL scale: 0 random, 100 expert)")
    return "\n".join(lines)
