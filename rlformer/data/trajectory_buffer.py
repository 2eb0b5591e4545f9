"""A FIFO replay buffer of whole trajectories, as the Online Decision Transformer trains on.

It starts with the ``capacity`` highest-return offline trajectories, ordered from the lowest
return to the highest. While not full, new trajectories are appended; once full, each new one
overwrites the slot after the last one written, starting at slot 0, so the oldest entries (at
first the weakest offline trajectories) leave first.

Returns-to-go are not stored: windows sampled from the buffer compute them from the rewards a
trajectory actually achieved (hindsight relabelling), never from the return it was conditioned on.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlformer.data.episodes import Episode
from rlformer.networks.spaces import tree_map


class CapacityChanged(ValueError):
    """A checkpointed buffer that already holds online trajectories, loaded at another size."""

    def __init__(self, saved: int, now: int) -> None:
        super().__init__(
            f"the replay buffer held online trajectories at capacity {saved}, and cannot be "
            f"restored at capacity {now}"
        )
        self.saved = saved


class TrajectoryBuffer:
    """Whole trajectories, at most ``capacity`` of them.

    Attributes:
        episodes: The stored trajectories, by slot.
        sources: Per slot, the offline trajectory's index (>= 0) or ``-1 - k`` for the k-th
            trajectory added online; a checkpoint stores only the online ones.
    """

    def __init__(self, capacity: int, offline: list[Episode]) -> None:
        self.capacity = capacity
        self._seed_with(offline)

    def _seed_with(self, offline: list[Episode]) -> None:
        """Empty the buffer, then fill it with the best offline trajectories, lowest first."""
        returns = np.array([e.episode_return for e in offline])
        best = np.argsort(returns, kind="stable")[-self.capacity :] if offline else []
        self.episodes: list[Episode] = [offline[i] for i in best]
        self.sources: list[int] = [int(i) for i in best]
        self.next_slot = 0  # overwritten next once the buffer is full
        self.added = 0  # trajectories added online so far

    def __len__(self) -> int:
        return len(self.episodes)

    def add(self, episodes: list[Episode]) -> None:
        for episode in episodes:
            source = -1 - self.added
            self.added += 1
            if len(self.episodes) < self.capacity:
                self.episodes.append(episode)
                self.sources.append(source)
            else:
                self.episodes[self.next_slot] = episode
                self.sources[self.next_slot] = source
                self.next_slot = (self.next_slot + 1) % self.capacity

    def state_dict(self) -> dict[str, Any]:
        """Slot sources and the online trajectories as tensors (loads with weights_only);
        observation trees as dicts of tensors."""
        online = {
            str(source): {
                "observations": tree_map(torch.as_tensor, e.observations),
                "actions": torch.as_tensor(e.actions),
                "rewards": torch.as_tensor(e.rewards),
                "terminated": bool(e.terminated),
            }
            for source, e in zip(self.sources, self.episodes, strict=True)
            if source < 0
        }
        return {
            "capacity": self.capacity,
            "sources": list(self.sources),
            "next_slot": self.next_slot,
            "added": self.added,
            "online": online,
        }

    def load_state_dict(self, state: dict[str, Any], offline: list[Episode]) -> None:
        """Rebuild the slots: offline trajectories from ``offline``, online ones from ``state``.

        Before any online trajectory the slots are just the best offline ones, so they are
        chosen again for this buffer's capacity: a run pretrained offline can go online with
        another buffer size. Once online trajectories are in, which of them a smaller or larger
        buffer would hold is undefined, so a changed capacity raises :class:`CapacityChanged`.
        """
        if int(state["added"]) == 0:
            self._seed_with(offline)
            return
        # Checkpoints before the capacity was stored betray a shrunk buffer by their slot count.
        saved = int(state.get("capacity", len(state["sources"])))
        if saved != self.capacity and ("capacity" in state or saved > self.capacity):
            raise CapacityChanged(saved, self.capacity)
        episodes = []
        for source in state["sources"]:
            if source >= 0:
                episodes.append(offline[source])
                continue
            entry = state["online"][str(source)]
            episodes.append(
                Episode(
                    tree_map(lambda t: t.numpy(), entry["observations"]),
                    entry["actions"].numpy(),
                    entry["rewards"].numpy(),
                    bool(entry["terminated"]),
                    not bool(entry["terminated"]),
                )
            )
        self.episodes = episodes
        self.sources = [int(s) for s in state["sources"]]
        self.next_slot = int(state["next_slot"])
        self.added = int(state["added"])
