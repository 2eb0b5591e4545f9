"""DT windows: returns-to-go by hand, left padding and masks, length-proportional sampling."""

from __future__ import annotations

import numpy as np
import pytest

from rlformer.data.episodes import Dataset, Episode
from rlformer.data.sampling import WindowSampler, returns_to_go


def _episode(n: int, offset: float = 0.0) -> Episode:
    return Episode(
        observations=(np.arange(n, dtype=np.float32) + offset)[:, None].repeat(2, 1),
        actions=np.arange(n, dtype=np.float32)[:, None] + offset,
        rewards=np.arange(1, n + 1, dtype=np.float32),
        terminated=True,
        truncated=False,
    )


def test_returns_to_go_by_hand() -> None:
    np.testing.assert_allclose(returns_to_go(np.array([1.0, 2.0, 3.0])), [6, 5, 3])
    np.testing.assert_allclose(
        returns_to_go(np.array([1.0, 2.0, 3.0]), 0.5), [1 + 1 + 0.75, 2 + 1.5, 3]
    )


def test_window_padding_mask_and_values() -> None:
    sampler = WindowSampler(
        Dataset([_episode(3), _episode(5, 100)], "test"), context=4, return_scale=2.0
    )
    batch = sampler._gather(np.array([0, 1, 1]), np.array([1, 0, 3]))
    np.testing.assert_array_equal(batch.mask.numpy(), [[0, 0, 1, 1], [1, 1, 1, 1], [0, 0, 1, 1]])
    # Episode 0 from step 1: steps 1, 2 right-aligned; rtg of rewards [1,2,3] -> [6,5,3] / 2.
    np.testing.assert_allclose(batch.returns_to_go[0, :, 0].numpy(), [0, 0, 2.5, 1.5])
    np.testing.assert_array_equal(batch.timesteps[0].numpy(), [0, 0, 1, 2])
    np.testing.assert_array_equal(batch.actions[2, :, 0].numpy(), [0, 0, 103, 104])
    assert (batch.states[~batch.mask] == 0).all()
    # States are normalised with the dataset's mean and std.
    raw = np.concatenate([np.arange(3), np.arange(5) + 100]).astype(np.float32)
    expected = (100 + 1 - raw.mean()) / (raw.std() + 1e-6)
    assert batch.states[1, 1, 0].item() == pytest.approx(expected, rel=1e-5)


def test_sampling_is_proportional_to_episode_length() -> None:
    sampler = WindowSampler(Dataset([_episode(10), _episode(30, offset=100)], "test"), context=4)
    batch = sampler.sample(20_000, np.random.default_rng(0))
    from_long = batch.actions[:, -1, 0] >= 100  # the newest step is always real (left padding)
    # The long episode holds 30 of the 40 steps: 75% of windows, +/- 3 standard errors.
    assert float(from_long.float().mean()) == pytest.approx(
        0.75, abs=3 * (0.75 * 0.25 / 20_000) ** 0.5
    )
    starts = batch.timesteps[from_long, -1].numpy()
    assert starts.max() == 29 and (starts >= 3).all()  # last real step = min(start + 3, 29)


def test_consecutive_windows_cover_the_episode_once() -> None:
    sampler = WindowSampler(Dataset([_episode(10)], "test"), context=4)
    windows = list(sampler.episode_windows(0))
    steps = np.concatenate([w.timesteps[w.mask].numpy() for w in windows])
    np.testing.assert_array_equal(steps, np.arange(10))
    assert [int(w.mask.sum()) for w in windows] == [4, 4, 2]
    np.testing.assert_array_equal(windows[-1].mask.numpy(), [[1, 1, 0, 0]])


def test_consecutive_sequences_are_contiguous_and_aligned() -> None:
    sampler = WindowSampler(Dataset([_episode(10), _episode(7, 100)], "test"), context=4)
    segments = sampler.sample_sequences(64, 2, np.random.default_rng(0))
    first, second = segments
    for row in range(64):
        real = np.concatenate(
            [
                first.timesteps[row][first.mask[row]].numpy(),
                second.timesteps[row][second.mask[row]].numpy(),
            ]
        )
        assert real[0] % 4 == 0 and (np.diff(real) == 1).all()
        assert first.mask[row].all()  # only the later window may be short
