"""Decision-Transformer windows: returns-to-go, left-padded K-step contexts, masks, timesteps.

Episodes are stored concatenated in flat arrays with offsets, and a batch of windows is gathered
with index arithmetic only (no Python loop over samples or time). As in the DT reference,
episodes are drawn with probability proportional to their length, a start step uniformly within
the episode, and a window that runs past the episode end is padded on the *left*, so the newest
real step is always last.

States are one standardised vector per step, or (for images, discrete and composite
observations) one array per leaf kept in its own dtype, as the model's encoder reads them
(:class:`~rlformer.networks.dt_spaces.StateLayout`): a window of uint8 images stays uint8.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from rlformer.data.episodes import Dataset
from rlformer.networks.dt_spaces import StateLayout
from rlformer.networks.spaces import Tree, tree_map, tree_stack


@dataclass
class WindowBatch:
    """``B`` windows of ``K`` steps (padding where ``mask`` is False)."""

    states: Tree  # [B, K, state_dim] normalised, or per leaf [B, K, *leaf]
    actions: torch.Tensor  # [B, K, act_dim] float, [B, K] or [B, K, components] long indices
    rewards: torch.Tensor  # [B, K]
    returns_to_go: torch.Tensor  # [B, K, 1], divided by the return scale
    timesteps: torch.Tensor  # [B, K] long
    mask: torch.Tensor  # [B, K] bool

    def to(self, device: torch.device) -> WindowBatch:
        """The same windows with every tensor on ``device``."""
        return WindowBatch(
            *(
                tree_map(lambda t: t.to(device), getattr(self, f))
                for f in WindowBatch.__dataclass_fields__
            )
        )


def returns_to_go(rewards: np.ndarray, gamma: float = 1.0) -> np.ndarray:
    """``R_t = sum_{t' >= t} gamma^(t'-t) r_t'`` for one episode."""
    if gamma == 1.0:
        return np.cumsum(rewards[::-1])[::-1].astype(np.float64)
    out = np.zeros(len(rewards), dtype=np.float64)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running
        out[t] = running
    return out


class WindowSampler:
    """Samples DT training windows from a :class:`Dataset`."""

    def __init__(
        self,
        dataset: Dataset,
        context: int,
        return_scale: float = 1.0,
        gamma: float = 1.0,
        discrete_actions: bool = False,
        state_stats: tuple[np.ndarray, np.ndarray] | None = None,
        layout: StateLayout | None = None,
    ) -> None:
        """``state_stats`` (mean, std) normalises states instead of this dataset's own
        statistics: a model keeps the normalisation it was trained with when its data changes
        (an online DT's replay buffer). ``discrete_actions``: actions are indices (Discrete,
        MultiDiscrete), kept as int64. ``layout``: how states are kept (None: flat vectors)."""
        episodes = dataset.episodes
        self.context, self.return_scale, self.discrete = context, return_scale, discrete_actions
        self.lengths = np.array([len(e) for e in episodes], dtype=np.int64)
        self.offsets = np.r_[0, np.cumsum(self.lengths)[:-1]]
        if layout is None or layout.flat:
            self._flat_states(dataset, state_stats)
        else:
            self._leaf_states(dataset, state_stats, layout)
        actions = np.concatenate([e.actions for e in episodes])
        self.actions = (
            actions.astype(np.int64)
            if discrete_actions
            else actions.reshape(len(actions), -1).astype(np.float32)
        )
        self.rewards = np.concatenate([e.rewards for e in episodes]).astype(np.float32)
        self.rtg = np.concatenate([returns_to_go(e.rewards, gamma) for e in episodes]).astype(
            np.float32
        )
        self.timesteps = np.concatenate([np.arange(n) for n in self.lengths])
        self.probabilities = self.lengths / self.lengths.sum()

    def _flat_states(
        self, dataset: Dataset, state_stats: tuple[np.ndarray, np.ndarray] | None
    ) -> None:
        """One standardised float32 vector per step."""
        episodes = dataset.episodes
        states = np.concatenate([e.observations.reshape(len(e), -1) for e in episodes]).astype(
            np.float32
        )
        if state_stats is None:
            self.state_mean, self.state_std = states.mean(0), states.std(0) + 1e-6
        else:
            self.state_mean = np.asarray(state_stats[0], np.float32)
            self.state_std = np.asarray(state_stats[1], np.float32)
        self.states: Tree = (states - self.state_mean) / self.state_std

    def _leaf_states(
        self,
        dataset: Dataset,
        state_stats: tuple[np.ndarray, np.ndarray] | None,
        layout: StateLayout,
    ) -> None:
        """One array per leaf in its window dtype, vector leaves standardised."""
        inputs = layout.inputs(
            tree_stack([e.observations for e in dataset.episodes], np.concatenate)
        )
        if state_stats is None:
            self.state_mean, self.state_std = layout.statistics(inputs)
        else:
            self.state_mean = np.asarray(state_stats[0], np.float32)
            self.state_std = np.asarray(state_stats[1], np.float32)
        self.states = layout.standardize(inputs, self.state_mean, self.state_std)

    def _gather(self, episode: np.ndarray, start: np.ndarray, pad: str = "left") -> WindowBatch:
        """Windows ``[start, start + K)`` of the given episodes.

        ``pad="left"`` right-aligns the real steps of a window that runs past the episode end
        (plain DT); ``pad="right"`` keeps them at the front, so consecutive windows of one
        episode stay contiguous for a DT that carries memory from one window to the next.
        """
        k = self.context
        valid = np.clip(self.lengths[episode] - start, 0, k)  # [B] real steps per window
        steps = np.arange(k)[None, :]
        offset = (
            steps - (k - valid)[:, None]
            if pad == "left"
            else np.broadcast_to(steps, (len(start), k))
        )
        mask = (offset >= 0) & (offset < valid[:, None])
        index = self.offsets[episode][:, None] + start[:, None] + np.clip(offset, 0, None)  # [B, K]
        index = np.minimum(index, len(self.rewards) - 1)  # masked positions may point past the end

        def take(array: np.ndarray) -> torch.Tensor:
            out = array[index]
            out[~mask] = 0
            return torch.as_tensor(out)

        return WindowBatch(
            states=tree_map(take, self.states),
            actions=take(self.actions),
            rewards=take(self.rewards),
            returns_to_go=(take(self.rtg) / self.return_scale).unsqueeze(-1),
            timesteps=take(self.timesteps),
            mask=torch.as_tensor(mask),
        )

    def sample(self, batch_size: int, rng: np.random.Generator) -> WindowBatch:
        """Episodes drawn proportionally to length, start steps uniform within them."""
        episode = rng.choice(len(self.lengths), size=batch_size, p=self.probabilities)
        start = (rng.random(batch_size) * self.lengths[episode]).astype(np.int64)
        return self._gather(episode, start)

    def sample_sequences(
        self, batch_size: int, segments: int, rng: np.random.Generator
    ) -> list[WindowBatch]:
        """``segments`` consecutive right-padded windows per sampled (episode, start).

        Starts are aligned to multiples of K, as at evaluation time, where a memory DT fills a
        window step by step and passes memory on once it is complete.
        """
        episode = rng.choice(len(self.lengths), size=batch_size, p=self.probabilities)
        windows = (self.lengths[episode] + self.context - 1) // self.context
        first = (rng.random(batch_size) * windows).astype(np.int64)
        first = np.maximum(np.minimum(first, windows - segments), 0)
        return [
            self._gather(episode, (first + i) * self.context, pad="right") for i in range(segments)
        ]

    def episode_windows(self, episode: int) -> Iterator[WindowBatch]:
        """Consecutive K-step windows of one episode, the last one right-padded."""
        for start in range(0, int(self.lengths[episode]), self.context):
            yield self._gather(np.array([episode]), np.array([start]), pad="right")
