"""Encoders per observation leaf, distributions per action space, running statistics."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from rlformer.config import ModelConfig
from rlformer.networks.actor_critic import ActorCritic
from rlformer.networks.distributions import make_distribution
from rlformer.networks.encoders import ObservationEncoder, to_torch
from rlformer.networks.normalization import RunningMeanStd, merge_moments, moments
from rlformer.networks.spaces import (
    SpaceError,
    check_observation_space,
    flatten_obs,
    leaf_spaces,
    tree_stack,
)
from tests.space_envs import OBSERVATIONS


def test_flat_leaves_are_one_hot_or_as_is() -> None:
    space = spaces.Dict(
        {
            "d": spaces.Discrete(4, start=1),
            "md": spaces.MultiDiscrete([3, 2]),
            "t": spaces.Tuple((spaces.MultiBinary(3), spaces.Box(-1, 1, (2,)))),
        }
    )
    assert list(leaf_spaces(space)) == ["d", "md", "t/0", "t/1"]
    encoder = ObservationEncoder(space, ModelConfig())
    obs = {"d": 3, "md": np.array([2, 1]), "t": (np.array([1, 0, 1]), np.array([0.5, -0.25]))}
    tree = flatten_obs(space, obs)
    features = encoder(to_torch(tree_stack([tree])))  # batch of one
    expected = [0, 0, 1, 0] + [0, 0, 1, 0, 1] + [1, 0, 1] + [0.5, -0.25]
    assert features.tolist() == [expected]
    assert encoder.out_dim == len(expected) and not list(encoder.parameters())


def test_multidiscrete_is_each_components_one_hot_in_turn() -> None:
    """A 2-D MultiDiscrete with offsets, batched over [B, T]: component k's one-hot fills
    slots offset_k .. offset_k + nvec_k - 1, in row-major component order."""
    nvec, start = np.array([[3, 2], [4, 2]]), np.array([[1, 0], [-1, 5]])
    encoder = ObservationEncoder(spaces.MultiDiscrete(nvec, start=start), ModelConfig())
    rng = np.random.default_rng(0)
    obs = start + rng.integers(0, nvec, size=(2, 5, 2, 2))  # [B, T, 2, 2]
    features = encoder(torch.as_tensor(obs))
    expected = torch.cat(
        [
            torch.nn.functional.one_hot(torch.as_tensor(value - low), int(n))
            for value, low, n in zip(
                np.moveaxis(obs.reshape(2, 5, 4), -1, 0), start.ravel(), nvec.ravel(), strict=True
            )
        ],
        dim=-1,
    ).float()
    assert features.shape == (2, 5, 11) and encoder.out_dim == 11
    assert torch.equal(features, expected)


@pytest.mark.parametrize("cnn", ["nature", "impala"])
def test_hwc_and_chw_images_give_the_same_features(cnn: str) -> None:
    cfg = ModelConfig(cnn=cnn, cnn_features=8)
    hwc, chw = spaces.Box(0, 255, (36, 40, 3), np.uint8), spaces.Box(0, 255, (3, 36, 40), np.uint8)
    torch.manual_seed(0)
    a = ObservationEncoder(hwc, cfg)
    torch.manual_seed(0)
    b = ObservationEncoder(chw, cfg)
    images = torch.randint(0, 256, (2, 5, 36, 40, 3), dtype=torch.uint8)  # [B, T, H, W, C]
    out_a, out_b = a(images), b(images.permute(0, 1, 4, 2, 3))
    assert out_a.shape == (2, 5, 8)
    torch.testing.assert_close(out_a, out_b)
    # Scaled to [0, 1]: a zero image and a full image give different, finite features.
    assert torch.isfinite(a(torch.full((1, 36, 40, 3), 255, dtype=torch.uint8))).all()


def test_image_scale_sets_what_the_cnn_sees() -> None:
    """Symbolic grids (codes 0..5 here) divided by 5 look to the CNN like pixels 0..255 / 255."""
    space = spaces.Box(0, 255, (7, 7, 3), np.uint8)
    codes = torch.randint(0, 6, (4, 7, 7, 3), dtype=torch.uint8)
    torch.manual_seed(0)
    grid = ObservationEncoder(space, ModelConfig(cnn="impala", cnn_features=8, image_scale=5.0))
    torch.manual_seed(0)
    pixels = ObservationEncoder(space, ModelConfig(cnn="impala", cnn_features=8))
    torch.testing.assert_close(grid(codes), pixels(codes * 51))
    assert not torch.allclose(grid(codes), pixels(codes))


def test_small_image_with_nature_cnn_names_the_fix() -> None:
    with pytest.raises(SpaceError, match="model.cnn=impala"):
        ObservationEncoder(OBSERVATIONS["image"](), ModelConfig(cnn="nature"))
    assert ObservationEncoder(OBSERVATIONS["image"](), ModelConfig(cnn="impala")).out_dim == 512


def test_text_leaf_is_refused_with_the_wrapper_that_removes_it() -> None:
    with pytest.raises(SpaceError) as err:
        check_observation_space(OBSERVATIONS["text"]())
    message = str(err.value)
    assert "'mission'" in message and "FilterObservation" in message and "\n" not in message


def _reference(space: gym.Space, params: torch.Tensor) -> torch.distributions.Distribution:
    """torch.distributions written from each space's definition, for comparison."""
    if isinstance(space, spaces.Discrete):
        return torch.distributions.Categorical(logits=params)
    if isinstance(space, spaces.MultiBinary):
        return torch.distributions.Independent(torch.distributions.Bernoulli(logits=params), 1)
    assert isinstance(space, spaces.MultiDiscrete)
    parts = [torch.distributions.Categorical(logits=p) for p in params.split(list(space.nvec), -1)]

    class Product:
        def log_prob(self, a: torch.Tensor) -> torch.Tensor:
            return sum(d.log_prob(a[..., k]) for k, d in enumerate(parts))

        def entropy(self) -> torch.Tensor:
            return sum(d.entropy() for d in parts)

    return Product()  # type: ignore[return-value]


@pytest.mark.parametrize(
    "space",
    [
        spaces.Discrete(5, start=2),
        spaces.MultiDiscrete([3, 4, 2], start=[1, 0, -1]),
        spaces.MultiBinary(4),
        spaces.Box(-1.0, 1.0, (2, 2), np.float32),
    ],
    ids=["discrete", "multidiscrete", "multibinary", "box"],
)
def test_distributions_match_references_and_produce_valid_env_actions(space: gym.Space) -> None:
    dist = make_distribution(space, log_std_init=-0.5)
    generator = torch.Generator().manual_seed(0)
    params = torch.randn(6, 3, dist.param_dim)  # [B, T, params]
    action = dist.sample(params, deterministic=False, generator=generator)
    assert action.shape == (6, 3, *dist.action_shape) and action.dtype == dist.action_dtype
    log_prob, entropy = dist.log_prob_entropy(params, action)
    if isinstance(space, spaces.Box):
        ref = torch.distributions.Independent(
            torch.distributions.Normal(params, dist.log_std.exp()), 1
        )
    else:
        ref = _reference(space, params)
    torch.testing.assert_close(log_prob, ref.log_prob(action.to(params.dtype)))
    torch.testing.assert_close(entropy, ref.entropy().expand_as(entropy))
    env_actions = dist.env_action(action[:, 0].detach().numpy())
    assert all(space.contains(a) for a in env_actions), env_actions
    greedy = dist.env_action(dist.sample(params[:, 0], True, None).detach().numpy())
    assert all(space.contains(a) for a in greedy)


def test_unsupported_action_space_is_refused() -> None:
    with pytest.raises(SpaceError, match="action space Tuple is not supported"):
        make_distribution(spaces.Tuple((spaces.Discrete(2), spaces.Discrete(2))))


def test_parallel_moments_equal_the_whole_batch() -> None:
    rng = np.random.default_rng(0)
    data = rng.normal(3.0, 2.0, size=(50, 3))
    merged = moments(data[:7], (3,))
    for part in (data[7:20], data[20:21], data[21:]):
        merged = merge_moments(merged, moments(part, (3,)))
    count, mean, m2 = merged
    assert count == 50
    np.testing.assert_allclose(mean, data.mean(0))
    np.testing.assert_allclose(m2 / count, data.var(0))
    rms = RunningMeanStd((3,))
    x = torch.as_tensor(data[:4], dtype=torch.float32)
    torch.testing.assert_close(rms.normalize(x, 10.0), x)  # nothing seen yet: identity
    rms.merge(merged)
    expected = np.clip((data[:4] - data.mean(0)) / np.sqrt(data.var(0) + 1e-8), -1, 1)
    torch.testing.assert_close(rms.normalize(x, 1.0), torch.as_tensor(expected).float())


def test_moments_arriving_read_only_merge_without_a_warning() -> None:
    """Ray hands a worker's moments over as read-only arrays (zero-copy from its store)."""
    count, mean, m2 = moments(np.arange(6.0).reshape(3, 2), (2,))
    for array in (mean, m2):
        array.setflags(write=False)
    rms = RunningMeanStd((2,))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rms.merge((count, mean, m2))
    torch.testing.assert_close(rms.mean, torch.tensor([2.0, 3.0], dtype=torch.float64))


def test_actor_critic_on_every_observation_kind() -> None:
    cfg = ModelConfig(cnn="impala", cnn_features=8, torso="mlp", prev_action_reward=True)
    for kind in ("box", "discrete", "multidiscrete", "multibinary", "image", "tuple", "dict"):
        space = OBSERVATIONS[kind]()
        model = ActorCritic(space, spaces.MultiDiscrete([3, 4]), cfg)
        obs = to_torch(tree_stack([flatten_obs(space, space.sample()) for _ in range(2)]))
        out = model.act(obs, model.initial_state(2), torch.ones(2, dtype=torch.bool))
        assert out.action.shape == (2, 2) and torch.isfinite(out.log_prob).all(), kind


def test_weights_saved_with_the_old_log_std_name_still_load() -> None:
    space = spaces.Box(-1.0, 1.0, (3,), np.float32)
    model = ActorCritic(space, spaces.Box(-1.0, 1.0, (2,), np.float32), ModelConfig(torso="mlp"))
    old = dict(model.state_dict())
    old["log_std"] = torch.full((2,), -0.7)
    del old["dist.log_std"]
    model.load_state_dict(old)
    assert torch.equal(model.dist.log_std.detach(), torch.full((2,), -0.7))
