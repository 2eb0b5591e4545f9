"""Observation encoders: every leaf of the observation space to features, concatenated.

One observation becomes one token. Each leaf gets the encoder of its space (the table below);
the leaf features are concatenated in leaf order and the torso projects them to ``d_model``.

=====================================  =================================================
leaf space                             encoder
=====================================  =================================================
Box, uint8, 3 dims, 1/3/4 channels     /image_scale (255), HWC -> CHW, CNN (model.cnn)
Box, bool, 3 dims, any channels        as 0/1 floats, HWC -> CHW, CNN (model.cnn)
Box, bool (other shapes)               flatten to 0/1 floats (never normalised)
Box (anything else)                    flatten to float (optional running normalisation)
Discrete(n)                            one-hot of size n
MultiDiscrete(nvec)                    one-hot per component, concatenated (sum(nvec))
MultiBinary(n)                         the bits as floats
=====================================  =================================================

Leaves without parameters (everything but images) add nothing to the model, so flat-vector
tasks keep the exact model they had before composite spaces existed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import contextmanager

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlformer.config import ModelConfig
from rlformer.networks.normalization import RunningMeanStd
from rlformer.networks.spaces import SpaceError, Tree, image_layout, is_bool_box, leaf_spaces

NATURE_MIN_SIZE = 36  # 8x8/4 -> 4x4/2 -> 3x3/1 needs at least 36 pixels per side
MINATAR_MIN_SIZE = 3  # one 3x3 convolution without padding
MINATAR_FEATURES = 128  # the MinAtar paper's dense layer


def to_torch(tree: Tree, device: torch.device | str | None = None) -> Tree:
    """Array or leaf dict -> tensor or leaf dict of tensors (no copy where possible)."""
    if isinstance(tree, dict):
        return {key: torch.as_tensor(value, device=device) for key, value in tree.items()}
    return torch.as_tensor(tree, device=device)


class NatureCNN(nn.Module):
    """The DQN network of Mnih et al. (2015): three convolutions and a linear layer."""

    def __init__(self, channels: int, height: int, width: int, features: int) -> None:
        super().__init__()
        self.convs = nn.Sequential(
            nn.Conv2d(channels, 32, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            flat = self.convs(torch.zeros(1, channels, height, width)).shape[1]
        self.out = nn.Sequential(nn.Linear(flat, features), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [N, C, H, W] -> [N, features]
        return self.out(self.convs(x))


class _ResidualBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv0 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv1(torch.relu(self.conv0(torch.relu(x))))


class ImpalaCNN(nn.Module):
    """IMPALA's ResNet (Espeholt et al. 2018): 3 stages of conv, max-pool/2, 2 residual blocks.

    Works on any image size (each stage halves it, rounding up), e.g. MiniGrid's 7x7 views.
    """

    def __init__(self, channels: int, height: int, width: int, features: int) -> None:
        super().__init__()
        stages: list[nn.Module] = []
        in_channels = channels
        for out in (16, 32, 32):
            stages += [
                nn.Conv2d(channels, out, 3, padding=1),
                nn.MaxPool2d(3, stride=2, padding=1),
                _ResidualBlock(out),
                _ResidualBlock(out),
            ]
            channels = out
        self.convs = nn.Sequential(*stages, nn.ReLU(), nn.Flatten())
        with torch.no_grad():
            flat = self.convs(torch.zeros(1, in_channels, height, width)).shape[1]
        self.out = nn.Sequential(nn.Linear(flat, features), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [N, C, H, W] -> [N, features]
        return self.out(self.convs(x))


class MinAtarCNN(nn.Module):
    """MinAtar's network (Young & Tian 2019): one 3x3 convolution of 16 channels, stride 1, no
    padding, then a dense layer (128 units in the paper: ``model.cnn_features``).

    Sized for small symbolic grids (MinAtar's 10x10): the Nature CNN needs 36x36, and IMPALA's
    15 convolutions cost far more per step than such an input carries.
    """

    def __init__(self, channels: int, height: int, width: int, features: int) -> None:
        super().__init__()
        self.convs = nn.Sequential(nn.Conv2d(channels, 16, 3, stride=1), nn.ReLU(), nn.Flatten())
        flat = 16 * (height - 2) * (width - 2)
        self.out = nn.Sequential(nn.Linear(flat, features), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [N, C, H, W] -> [N, features]
        return self.out(self.convs(x))


class ObservationEncoder(nn.Module):
    """Observation tree ``[*lead, ...]`` per leaf -> features ``[*lead, out_dim]``."""

    def __init__(
        self,
        space: gym.Space,
        cfg: ModelConfig,
        setting: str = "model.cnn",
        paths: Collection[str] | None = None,
    ) -> None:
        """``setting``: the config key that chooses the CNN, as errors name it (a Decision
        Transformer's is ``dt.cnn``). ``paths``: the leaves it reads (default all), so that a
        centralised critic and its actor can each read their part of one observation."""
        super().__init__()
        self.leaves = {
            path: leaf
            for path, leaf in leaf_spaces(space).items()
            if paths is None or path in paths
        }
        self.kinds: dict[str, str] = {}
        self.cnns = nn.ModuleDict()
        self.norms = nn.ModuleDict()
        self.names: dict[str, str] = {}  # leaf path -> module key (paths may hold "." or "/")
        # Discrete leaves' (start, n) and MultiDiscrete leaves' one-hot widths as Python ints:
        # read per call from the spaces, they are numpy scalars that break torch.compile's graph
        self._discrete: dict[str, tuple[int, int]] = {}
        self._multi_widths: dict[str, int] = {}
        self.clip = cfg.normalize_clip
        self.image_scale = cfg.image_scale
        self._binary_images: set[str] = set()  # bool image leaves: already 0/1, never scaled
        self.out_dim = 0
        self.choices: list[str] = []  # what cnn: auto chose, and why (rlformer train --dry-run)
        for index, (path, leaf) in enumerate(self.leaves.items()):
            name = self.names[path] = f"leaf{index}"
            layout = image_layout(leaf)
            if layout is not None:
                c, h, w = leaf.shape if layout == "chw" else np.roll(leaf.shape, 1)
                self.kinds[path] = layout
                if is_bool_box(leaf):
                    self._binary_images.add(path)
                cnn, features, why = choose_cnn(cfg, int(h), int(w))
                if why is not None:
                    where = f"observation key {path!r}" if path else "the observation"
                    self.choices.append(f"{setting}: {cnn} for {where}, {why}")
                self.cnns[name] = _make_cnn(cnn, features, int(c), int(h), int(w), path, setting)
                self.out_dim += features
            elif isinstance(leaf, gym.spaces.Discrete):
                self.kinds[path] = "discrete"
                self._discrete[path] = (int(leaf.start), int(leaf.n))
                self.out_dim += int(leaf.n)
            elif isinstance(leaf, gym.spaces.MultiDiscrete):
                self.kinds[path] = "multidiscrete"
                nvec = np.asarray(leaf.nvec).reshape(-1)
                offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]])
                self.register_buffer(f"{name}_offsets", torch.as_tensor(offsets, dtype=torch.long))
                self.register_buffer(
                    f"{name}_start",
                    torch.as_tensor(np.asarray(leaf.start).reshape(-1), dtype=torch.long),
                )
                self._multi_widths[path] = int(nvec.sum())
                self.out_dim += self._multi_widths[path]
            else:  # vector Box or MultiBinary
                self.kinds[path] = "vector"
                size = int(np.prod(leaf.shape))
                if cfg.normalize_obs and isinstance(leaf, gym.spaces.Box) and not is_bool_box(leaf):
                    self.norms[name] = RunningMeanStd((size,))
                self.out_dim += size

    def normalized_leaves(self) -> dict[str, RunningMeanStd]:
        """Leaf path -> its running statistics (vector Box leaves when normalisation is on)."""
        return {path: self.norms[name] for path, name in self.names.items() if name in self.norms}

    def forward(self, obs: Tree) -> torch.Tensor:
        parts = []
        for path, x in self.leaf_inputs(obs).items():
            if self.kinds[path] in ("hwc", "chw"):
                images = x.reshape(-1, *x.shape[-3:])
                with _full_fp32_convolutions(images):
                    features = self.cnns[self.names[path]](images)
                parts.append(features.reshape(*x.shape[:-3], -1))
            else:
                parts.append(x)
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)

    def leaf_inputs(self, obs: Tree) -> dict[str, torch.Tensor]:
        """Each leaf as the encoder reads it, before any learned layer: one-hots, (normalised)
        vectors ``[*lead, size]``, and images scaled to ``[*lead, C, H, W]`` floats.

        These are also the targets of the observation decoder (reconstruction.py): being free
        of parameters, they cannot collapse to make the reconstruction trivially easy.
        """
        inputs = {}
        for path, leaf in self.leaves.items():
            x = obs[path] if isinstance(obs, dict) else obs
            lead = x.shape[: x.dim() - len(leaf.shape)]
            kind, name = self.kinds[path], self.names[path]
            if kind in ("hwc", "chw"):
                images = x.reshape(-1, *leaf.shape).float()
                if path not in self._binary_images:
                    images = images / self.image_scale
                if kind == "hwc":
                    images = images.permute(0, 3, 1, 2)  # [N, H, W, C] -> [N, C, H, W]
                inputs[path] = images.reshape(*lead, *images.shape[1:])
            elif kind == "discrete":
                start, n = self._discrete[path]
                inputs[path] = nn.functional.one_hot(x.long() - start, n).float()
            elif kind == "multidiscrete":
                offsets = getattr(self, f"{name}_offsets")
                start = getattr(self, f"{name}_start")
                index = x.reshape(*lead, -1).long() - start + offsets  # [*lead, K] global index
                # K ones in sum(nvec) slots: the components' ranges are disjoint, so a scatter
                # equals the sum of K one-hots without building the [*lead, K, sum(nvec)] tensor.
                hot = torch.zeros(*lead, self.out_size(path), device=x.device, dtype=torch.float32)
                inputs[path] = hot.scatter_(-1, index, 1.0)
            else:
                flat = x.reshape(*lead, -1).float()
                if name in self.norms:
                    flat = self.norms[name].normalize(flat, self.clip)
                inputs[path] = flat
        return inputs

    def out_size(self, path: str) -> int:
        return self._multi_widths[path]


@contextmanager
def _full_fp32_convolutions(x: torch.Tensor) -> Iterator[None]:
    """cuDNN convolutions in full fp32 on CUDA (its default allows TF32, ~1e-3 off).

    CPU rollout workers compute fp32; a CUDA learner must compute the same log-probs, else
    PPO's first-epoch ratio is not 1 (the same reason the core defaults to fp32 for PPO).
    """
    if not x.is_cuda:
        yield
        return
    previous = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32 = previous


def choose_cnn(cfg: ModelConfig, h: int, w: int) -> tuple[str, int, str | None]:
    """The encoder of an ``h`` x ``w`` image, its features, and why when ``cnn: auto`` chose it
    (None when the config named it): Nature-DQN's CNN where its strides fit (36x36 and up),
    else MinAtar's single 3x3 convolution, whose dense layer keeps the grid's cells apart;
    IMPALA's padded ResNet only for images narrower than 3 pixels.

    The choice is a function of the saved config and the image alone, so that a run's config
    rebuilds the same network when it resumes, evaluates or exports.
    """
    if cfg.cnn != "auto":
        return cfg.cnn, cnn_features(cfg.cnn, cfg.cnn_features), None
    if min(h, w) >= NATURE_MIN_SIZE:
        why = f"a {h}x{w} image (Nature-DQN's CNN from {NATURE_MIN_SIZE}x{NATURE_MIN_SIZE})"
        return "nature", cnn_features("nature", cfg.cnn_features), why
    if min(h, w) >= MINATAR_MIN_SIZE:
        features = cnn_features("minatar", cfg.cnn_features)
        why = (
            f"a {h}x{w} image, under Nature-DQN's {NATURE_MIN_SIZE}x{NATURE_MIN_SIZE}: one 3x3 "
            f"convolution and {features} features, as MinAtar's network"
        )
        return "minatar", features, why
    why = f"a {h}x{w} image, too narrow for a 3x3 convolution"
    return "impala", cnn_features("impala", cfg.cnn_features), why


def cnn_features(cnn: str, features: int | None) -> int:
    """``features`` where the config sets it, else the encoder's published width: MinAtar's
    dense layer of 128 (512 would make that network four times wider), 512 for Nature-DQN
    and IMPALA (SB3's default)."""
    if features is not None:
        return features
    return MINATAR_FEATURES if cnn == "minatar" else 512


def _make_cnn(
    cnn: str, features: int, c: int, h: int, w: int, path: str, setting: str = "model.cnn"
) -> nn.Module:
    where = f"observation key {path!r}" if path else "the observation"
    if cnn == "nature":
        if min(h, w) < NATURE_MIN_SIZE:
            raise SpaceError(
                f"{where} is a {h}x{w} image, smaller than the Nature CNN's "
                f"{NATURE_MIN_SIZE}x{NATURE_MIN_SIZE}: set {setting}=impala (any size), "
                f"{setting}=minatar (one small convolution, for grids such as MinAtar's 10x10) "
                "or resize it with a wrapper, e.g. gymnasium.wrappers:ResizeObservation"
            )
        return NatureCNN(c, h, w, features)
    if cnn == "minatar":
        if min(h, w) < MINATAR_MIN_SIZE:
            raise SpaceError(
                f"{where} is a {h}x{w} image, smaller than the MinAtar CNN's 3x3 convolution: "
                f"set {setting}=impala (any size)"
            )
        return MinAtarCNN(c, h, w, features)
    return ImpalaCNN(c, h, w, features)
