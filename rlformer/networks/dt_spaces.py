"""What a Decision Transformer reads and predicts, on every space rlformer's encoders take.

**States.** A :class:`StateLayout` says how observations become the model's state inputs:

* *flat*: a Box that is not an image is one vector standardised with the data's mean and std,
  as in the DT paper (checkpoints whose statistics cover a whole Discrete or image observation
  are read this way too: :meth:`StateLayout.of_checkpoint`);
* *leaves*: any other space (images, Discrete, MultiDiscrete, MultiBinary, Dict, Tuple) keeps
  one array per leaf (:mod:`rlformer.networks.spaces`), read by PPO's
  :class:`~rlformer.networks.encoders.ObservationEncoder`: images through a CNN, discrete leaves
  one-hot, the leaves' features concatenated. Non-image Box leaves are standardised with the
  data's statistics (concatenated in leaf order); discrete leaves are renumbered from 0 so that
  the zeros that pad a window are valid values; images and bits stay as they are, as uint8
  (a window of bool images costs a byte per value, and exported graphs keep them that way).

**Actions.** One head per action space; its outputs are ``act_dim`` numbers per step:

=================  ===============================  ==================  ========================
action space       action token                     head (``act_dim``)  imitation loss per step
=================  ===============================  ==================  ========================
Box                linear on the [-1, 1] action     A, tanh             squared error
Discrete(n)        embedding of the index           n logits            cross-entropy
MultiDiscrete      sum of its components'           sum(nvec) logits    sum of the components'
                   embeddings                                           cross-entropies
MultiBinary(n)     linear on the bits               n logits            sum of the bits' binary
                                                                        cross-entropies
=================  ===============================  ==================  ========================

The model's actions are indices from 0 (Discrete, MultiDiscrete: the env's ``start`` is taken
off and put back), bits as floats (MultiBinary), or Box actions scaled from the env's bounds to
[-1, 1] (:func:`action_bounds`).
"""

from __future__ import annotations

from typing import Any, Literal

import gymnasium as gym
import numpy as np

from rlformer.networks.spaces import Tree, image_layout, is_composite, leaf_spaces

ActionKind = Literal["box", "discrete", "multidiscrete", "multibinary"]
LeafKind = Literal["vector", "image", "discrete", "multidiscrete", "binary"]

STD_FLOOR = 1e-6
"""Added to the data's standard deviations (a constant input would divide by zero)."""


# ------------------------------------------------------------------ states
def reads_flat(space: gym.Space | None) -> bool:
    """Whether a DT reads ``space`` as one standardised vector (a non-image Box, or unknown)."""
    return space is None or (isinstance(space, gym.spaces.Box) and image_layout(space) is None)


def _leaf_kind(leaf: gym.Space) -> LeafKind:
    if image_layout(leaf) is not None:
        return "image"
    if isinstance(leaf, gym.spaces.Discrete):
        return "discrete"
    if isinstance(leaf, gym.spaces.MultiDiscrete):
        return "multidiscrete"
    if isinstance(leaf, gym.spaces.MultiBinary):
        return "binary"
    return "vector"


_WINDOW_DTYPES: dict[LeafKind, type] = {
    "vector": np.float32,
    "image": np.uint8,
    "discrete": np.int64,
    "multidiscrete": np.int64,
    "binary": np.uint8,
}


def zero_based(space: gym.Space) -> gym.Space:
    """``space`` with every Discrete / MultiDiscrete leaf numbered from 0 (what the model reads)."""
    if isinstance(space, gym.spaces.Dict):
        return gym.spaces.Dict({key: zero_based(sub) for key, sub in space.spaces.items()})
    if isinstance(space, gym.spaces.Tuple):
        return gym.spaces.Tuple(tuple(zero_based(sub) for sub in space.spaces))
    if isinstance(space, gym.spaces.Discrete):
        return gym.spaces.Discrete(int(space.n))
    if isinstance(space, gym.spaces.MultiDiscrete):
        return gym.spaces.MultiDiscrete(np.asarray(space.nvec))
    return space


class StateLayout:
    """How a DT reads the observations of one space (see the module docstring).

    Attributes:
        flat: One standardised vector (True) or one array per leaf (False).
        leaves: Leaf path -> space (leaves layout; ``""`` for a space that is not a Dict/Tuple).
        kinds: Leaf path -> how the leaf is stored (vector, image, discrete, ...).
        vector: The standardised leaves, in the order of the statistics.
    """

    def __init__(self, space: gym.Space | None, flat: bool | None = None) -> None:
        self.space = space
        self.flat = reads_flat(space) if flat is None else flat
        self.composite = space is not None and is_composite(space)
        self.leaves: dict[str, gym.Space] = {} if self.flat or space is None else leaf_spaces(space)
        self.kinds: dict[str, LeafKind] = {p: _leaf_kind(s) for p, s in self.leaves.items()}
        self.vector = [path for path, kind in self.kinds.items() if kind == "vector"]
        self.sizes = {path: int(np.prod(leaf.shape)) for path, leaf in self.leaves.items()}

    @classmethod
    def of_checkpoint(cls, space: gym.Space, statistics_size: int) -> StateLayout:
        """The layout a checkpoint was trained with, told by the size of its statistics.

        A checkpoint whose DT reads a Discrete or image observation as one standardised vector
        has statistics with one entry per value, where the leaves layout standardises none of
        them: such a checkpoint keeps its flat layout.
        """
        layout = cls(space)
        if layout.flat or layout.composite:
            return layout
        flat_size = int(np.prod(space.shape))
        if statistics_size == flat_size != layout.statistics_size:
            return cls(space, flat=True)
        return layout

    @property
    def statistics_size(self) -> int:
        """Entries of the state mean and std (the flat size, or the vector leaves' sizes)."""
        if self.flat:
            return int(np.prod(self.space.shape)) if self.space is not None else -1
        return sum(self.sizes[path] for path in self.vector)

    def model_space(self) -> gym.Space:
        """The space the model's encoder reads (discrete leaves numbered from 0)."""
        assert self.space is not None and not self.flat
        return zero_based(self.space)

    def window_dtype(self, path: str) -> type:
        """The numpy dtype a leaf is kept in (windows, contexts, exported state)."""
        return _WINDOW_DTYPES[self.kinds[path]]

    def starts(self, path: str) -> np.ndarray:
        """A discrete leaf's ``start`` (per component for MultiDiscrete)."""
        return np.asarray(self.leaves[path].start, dtype=np.int64)  # type: ignore[attr-defined]

    # ------------------------------------------------------------ numpy
    def as_dict(self, tree: Tree) -> dict[str, Any]:
        """A leaves-layout tree as ``{path: array}`` (``{"": array}`` for a flat space)."""
        return tree if isinstance(tree, dict) else {"": tree}

    def from_dict(self, leaves: dict[str, Any]) -> Tree:
        """The inverse of :meth:`as_dict`."""
        return leaves if self.composite else leaves[""]

    def inputs(self, observations: Tree) -> Tree:
        """Leaves of ``[N, *leaf]`` observations as the model keeps them, before
        standardisation: discrete leaves from 0, images and bits as uint8, vectors float32."""
        out = {}
        for path, value in self.as_dict(observations).items():
            kind, value = self.kinds[path], np.asarray(value)
            if kind in ("discrete", "multidiscrete"):
                out[path] = value.astype(np.int64) - self.starts(path)
            else:
                out[path] = value.astype(self.window_dtype(path))
        return self.from_dict(out)

    def statistics(self, inputs: Tree) -> tuple[np.ndarray, np.ndarray]:
        """Mean and std (plus :data:`STD_FLOOR`) of the vector leaves, concatenated."""
        leaves = self.as_dict(inputs)
        if not self.vector:
            return np.zeros(0, np.float32), np.ones(0, np.float32)
        columns = np.concatenate(
            [leaves[p].reshape(len(leaves[p]), -1) for p in self.vector], axis=1
        )
        return columns.mean(0), columns.std(0) + STD_FLOOR

    def standardize(self, inputs: Tree, mean: np.ndarray, std: np.ndarray) -> Tree:
        """``inputs`` with each vector leaf standardised by its slice of ``mean`` and ``std``."""
        out = dict(self.as_dict(inputs))
        offset = 0
        for path in self.vector:
            value, size = out[path], self.sizes[path]
            flat = value.reshape(len(value), -1)
            part = (flat - mean[offset : offset + size]) / std[offset : offset + size]
            out[path] = part.astype(np.float32).reshape(value.shape)
            offset += size
        return self.from_dict(out)

    def zeros(self, lead: tuple[int, ...]) -> Tree:
        """Zero-filled leaves of shape ``[*lead, *leaf]`` (padding)."""
        return self.from_dict(
            {
                path: np.zeros((*lead, *leaf.shape), self.window_dtype(path))
                for path, leaf in self.leaves.items()
            }
        )


# ------------------------------------------------------------------ actions
def action_kind(space: gym.Space) -> ActionKind:
    """The head a DT predicts ``space``'s actions with."""
    if isinstance(space, gym.spaces.Discrete):
        return "discrete"
    if isinstance(space, gym.spaces.MultiDiscrete):
        return "multidiscrete"
    if isinstance(space, gym.spaces.MultiBinary):
        return "multibinary"
    return "box"


def action_nvec(space: gym.Space) -> list[int]:
    """Choices per component: ``[n]`` for Discrete, the ``nvec`` of a MultiDiscrete."""
    if isinstance(space, gym.spaces.Discrete):
        return [int(space.n)]
    return [int(n) for n in np.asarray(space.nvec).reshape(-1)]  # type: ignore[attr-defined]


def head_size(space: gym.Space) -> int:
    """``act_dim``: the head's outputs per step (logits, or the Box action's values)."""
    if isinstance(space, gym.spaces.Discrete | gym.spaces.MultiDiscrete):
        return sum(action_nvec(space))
    return int(np.prod(space.shape))


def action_start(space: gym.Space | None) -> np.ndarray | int:
    """What the env adds to the model's indices (0 for other spaces or none known)."""
    if isinstance(space, gym.spaces.Discrete):
        return int(space.start)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return np.asarray(space.start, dtype=np.int64).reshape(-1)
    return 0


def action_bounds(space: gym.Space) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Finite Box bounds used to train continuous actions in [-1, 1] (None otherwise)."""
    if (
        isinstance(space, gym.spaces.Box)
        and np.isfinite(space.low).all()
        and np.isfinite(space.high).all()
    ):
        return space.low.astype(np.float32).reshape(-1), space.high.astype(np.float32).reshape(-1)
    return None, None


def model_actions(
    actions: np.ndarray,
    space: gym.Space,
    low: np.ndarray | None = None,
    high: np.ndarray | None = None,
) -> np.ndarray:
    """Env actions ``[N, ...]`` as the model predicts them: indices from 0 (int64), bits as
    float32 ``[N, n]``, Box actions rescaled from ``low``/``high`` to [-1, 1] when bounded."""
    kind = action_kind(space)
    if kind == "box":
        if low is None or high is None:
            return actions
        return 2.0 * (actions - low) / (high - low) - 1.0
    if kind == "multibinary":
        return np.asarray(actions).reshape(len(actions), -1).astype(np.float32)
    indices = np.asarray(actions).astype(np.int64)
    if kind == "multidiscrete":
        indices = indices.reshape(len(indices), -1)
    return indices - action_start(space)


def env_actions(indices: np.ndarray, space: gym.Space | None) -> np.ndarray:
    """Model-space indices or bits ``[n, ...]`` as the env takes them (start added, the
    space's shape and dtype); ``space`` None leaves them as they are."""
    if space is None:
        return indices
    kind = action_kind(space)
    if kind == "discrete":
        return np.asarray(indices).astype(np.int64) + action_start(space)
    if kind == "multidiscrete":
        return (np.asarray(indices).astype(np.int64) + action_start(space)).astype(space.dtype)
    if kind == "multibinary":
        return np.asarray(indices).reshape(-1, *space.shape).astype(space.dtype)
    return indices
