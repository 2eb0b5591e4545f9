"""Boolean Box observations (MinAtar's 10x10xC grids, binary feature vectors) read as 0/1 floats,
and the MinAtar CNN that fits such small grids."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from rlformer.config import ModelConfig
from rlformer.networks.actor_critic import ActorCritic
from rlformer.networks.encoders import MinAtarCNN, ObservationEncoder, to_torch
from rlformer.networks.reconstruction import ReconstructionHead
from rlformer.networks.spaces import SpaceError, check_observation_space, image_layout

torch.set_num_threads(1)

BREAKOUT = spaces.Box(0.0, 1.0, (10, 10, 4), bool)  # as MinAtar declares it
SEAQUEST = spaces.Box(0.0, 1.0, (10, 10, 10), bool)


def _grids(shape: tuple[int, ...], seed: int = 0) -> torch.Tensor:
    return torch.as_tensor(np.random.default_rng(seed).random(shape) < 0.3)


def test_bool_boxes_pass_the_space_check() -> None:
    for space in (BREAKOUT, SEAQUEST, spaces.Box(0.0, 1.0, (5,), bool)):
        check_observation_space(space)
    assert image_layout(BREAKOUT) == image_layout(SEAQUEST) == "hwc"
    assert image_layout(spaces.Box(0.0, 1.0, (4, 10, 10), bool)) == "chw"


def test_bool_image_reaches_the_cnn_as_0_1_not_divided_by_image_scale() -> None:
    """A bool grid is what a uint8 grid of 0/1 is with image_scale 1: same inputs, same features
    (bool leaves ignore image_scale, which stays 255 for camera pixels)."""
    grids = _grids((2, 3, 10, 10, 4))  # [B, T, H, W, C]
    torch.manual_seed(0)
    binary = ObservationEncoder(BREAKOUT, ModelConfig(cnn="minatar"))
    torch.manual_seed(0)
    codes = ObservationEncoder(
        spaces.Box(0, 1, (10, 10, 4), np.uint8), ModelConfig(cnn="minatar", image_scale=1.0)
    )
    inputs = binary.leaf_inputs(grids)[""]
    assert inputs.dtype == torch.float32 and inputs.shape == (2, 3, 4, 10, 10)
    assert torch.equal(inputs, grids.permute(0, 1, 4, 2, 3).float())
    assert set(inputs.unique().tolist()) == {0.0, 1.0}
    torch.testing.assert_close(binary(grids), codes(grids.to(torch.uint8)), rtol=0, atol=0)
    assert binary(grids).shape == (2, 3, 128)


def test_bool_chw_and_hwc_grids_give_the_same_features() -> None:
    grids = _grids((5, 10, 10, 10))
    torch.manual_seed(0)
    hwc = ObservationEncoder(SEAQUEST, ModelConfig(cnn="minatar", cnn_features=8))
    torch.manual_seed(0)
    chw = ObservationEncoder(
        spaces.Box(0.0, 1.0, (3, 10, 10), bool), ModelConfig(cnn="minatar", cnn_features=8)
    )
    assert hwc.kinds[""] == "hwc" and chw.kinds[""] == "chw"
    three = _grids((5, 10, 10, 3), seed=1)
    torch.manual_seed(0)
    hwc3 = ObservationEncoder(
        spaces.Box(0.0, 1.0, (10, 10, 3), bool), ModelConfig(cnn="minatar", cnn_features=8)
    )
    torch.testing.assert_close(hwc3(three), chw(three.permute(0, 3, 1, 2)))
    assert hwc(grids).shape == (5, 8)


def test_bool_vector_is_its_bits_and_never_normalised() -> None:
    space = spaces.Dict(
        {"flags": spaces.Box(0.0, 1.0, (5,), bool), "x": spaces.Box(-1.0, 1.0, (2,))}
    )
    encoder = ObservationEncoder(space, ModelConfig(normalize_obs=True))
    assert list(encoder.normalized_leaves()) == ["x"]  # the float leaf only
    flags = np.array([[True, False, True, True, False]])
    obs = to_torch({"flags": flags, "x": np.zeros((1, 2), np.float32)})
    assert encoder.leaf_inputs(obs)["flags"].tolist() == [[1.0, 0.0, 1.0, 1.0, 0.0]]
    assert encoder.out_dim == 7 and not list(encoder.parameters())
    head = ReconstructionHead(encoder, width=4)
    assert head.binary.tolist() == [True] * 5 + [False] * 2  # bits get the BCE loss


def test_minatar_cnn_is_the_papers_network() -> None:
    cfg = ModelConfig(cnn="minatar")
    assert ObservationEncoder(BREAKOUT, cfg).out_dim == 128  # the paper's dense layer unless set
    assert ObservationEncoder(BREAKOUT, ModelConfig(cnn="minatar", cnn_features=64)).out_dim == 64
    pixels = spaces.Box(0, 255, (36, 36, 3), np.uint8)  # the other encoders keep theirs
    assert ObservationEncoder(pixels, ModelConfig(cnn="impala")).out_dim == 512
    cnn = ObservationEncoder(BREAKOUT, cfg).cnns["leaf0"]
    assert isinstance(cnn, MinAtarCNN)
    conv = cnn.convs[0]
    assert conv.out_channels == 16 and conv.kernel_size == (3, 3)
    assert conv.stride == (1, 1) and conv.padding == (0, 0)
    assert cnn.out[0].in_features == 16 * 8 * 8 and cnn.out[0].out_features == 128
    # Heads directly on those features (mlp_hidden: []), as configs/minatar/ has it.
    model = ActorCritic(
        BREAKOUT, spaces.Discrete(6), ModelConfig(cnn="minatar", torso="mlp", mlp_hidden=[])
    )
    assert sum(p.numel() for p in model.parameters()) == 592 + 131_200 + 6 * 129 + 129


def test_nature_cnn_on_a_10x10_grid_names_the_minatar_cnn() -> None:
    with pytest.raises(SpaceError) as err:
        ObservationEncoder(BREAKOUT, ModelConfig(cnn="nature"))
    message = str(err.value)
    assert "10x10" in message and "model.cnn=minatar" in message and "\n" not in message


def test_minatar_cnn_refuses_images_below_its_kernel() -> None:
    with pytest.raises(SpaceError, match="model.cnn=impala"):
        ObservationEncoder(spaces.Box(0.0, 1.0, (2, 2, 4), bool), ModelConfig(cnn="minatar"))
