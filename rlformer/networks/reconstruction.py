"""Observation reconstruction: an auxiliary decoder from the actor's latent to its own input.

On memory tasks with sparse rewards (POPGym's hard tasks, long T-Mazes) the policy gradient alone
gives the torso little signal about *what* to keep, which can leave PPO at chance. Asking the latent
at step ``t`` to reproduce the observation of step ``t`` makes it carry the observation's
content from the first update, which the memory can then attend to (CleanRL's ppo_trxl trains
Memory Gym's Mortar Mayhem with such a loss, weighted 0.1). ``model.reconstruction`` builds the
decoder, ``ppo.reconstruction_coef`` weighs its loss.

The target is what the encoder reads before any learned layer
(:meth:`~rlformer.networks.encoders.ObservationEncoder.leaf_inputs`), leaf by leaf, concatenated:

=====================================  ==========================================  =========
leaf                                   target units                                loss
=====================================  ==========================================  =========
Box vector                             flattened (normalised with normalize_obs)   squared
Discrete / MultiDiscrete               the one-hot(s)                              BCE
MultiBinary, bool Box vector           the bits                                    BCE
uint8 / bool image                     ``/image_scale`` (bool: as 0/1), average-   squared
                                       pooled to at most 8x8 per channel
=====================================  ==========================================  =========

A target without parameters cannot collapse (a decoder of the CNN's learned features could be
satisfied by features that carry nothing). Images are pooled because a per-pixel decoder would
dwarf the actor-critic; 8x8 keeps a MiniGrid view (7x7) whole and an 84x84 frame's layout.
0/1 units are binary events, so they get the binary cross-entropy (on logits) rather than a
regression loss. The per-step loss is the mean over all target units.
"""

from __future__ import annotations

import gymnasium as gym
import torch
from torch import nn

from rlformer.networks.encoders import ObservationEncoder
from rlformer.networks.spaces import Tree, is_bool_box

IMAGE_TARGET_SIDE = 8  # images are pooled to at most this many cells per side


def _pooled_side(side: int) -> int:
    return min(int(side), IMAGE_TARGET_SIDE)


class ReconstructionHead(nn.Module):
    """Decoder ``latent [*lead, width] -> target [*lead, size]`` and its per-step loss.

    Its only state is the decoder's weights (the layout of the target is rebuilt from the
    encoder), so a model without the head keeps the state-dict keys it always had.
    """

    def __init__(self, encoder: ObservationEncoder, width: int) -> None:
        super().__init__()
        binary: list[bool] = []
        self.image_sides: dict[str, tuple[int, int]] = {}
        for path, leaf in encoder.leaves.items():
            kind = encoder.kinds[path]
            if kind in ("hwc", "chw"):
                c, h, w = leaf.shape if kind == "chw" else (leaf.shape[2], *leaf.shape[:2])
                self.image_sides[path] = (_pooled_side(h), _pooled_side(w))
                binary += [False] * (int(c) * _pooled_side(h) * _pooled_side(w))
            elif kind in ("discrete", "multidiscrete"):
                size = int(leaf.n) if kind == "discrete" else encoder.out_size(path)
                binary += [True] * size
            else:
                size = int(torch.Size(leaf.shape).numel())
                binary += [isinstance(leaf, gym.spaces.MultiBinary) or is_bool_box(leaf)] * size
        self.size = len(binary)
        # Not persistent: derived from the spaces, so checkpoints hold only the decoder.
        self.register_buffer("binary", torch.tensor(binary), persistent=False)
        self.decoder = nn.Sequential(
            nn.Linear(width, width), nn.ReLU(), nn.Linear(width, self.size)
        )

    def target(self, encoder: ObservationEncoder, obs: Tree) -> torch.Tensor:
        """The observation's target units ``[*lead, size]`` (see the module docstring)."""
        parts = []
        for path, x in encoder.leaf_inputs(obs).items():
            if path in self.image_sides:
                lead = x.shape[:-3]
                images = x.reshape(-1, *x.shape[-3:])
                pooled = nn.functional.adaptive_avg_pool2d(images, self.image_sides[path])
                x = pooled.reshape(*lead, -1)
            parts.append(x)
        return torch.cat(parts, dim=-1).detach()

    def error(self, latent: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Per-step loss ``[*lead]``: the mean over target units of BCE-with-logits (0/1 units)
        or the squared error (the others) of the decoder's prediction."""
        prediction = self.decoder(latent)
        squared = (prediction - target).pow(2)
        bce = nn.functional.binary_cross_entropy_with_logits(prediction, target, reduction="none")
        return torch.where(self.binary, bce, squared).mean(dim=-1)
