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


def _reference_window(
    data: Dataset, episode: int, start: int, k: int, gamma: float, scale: float
) -> dict[str, np.ndarray]:
    """One DT window written straight from the definitions, one step at a time."""
    all_obs = np.concatenate([e.observations.reshape(len(e), -1) for e in data.episodes])
    mean, std = all_obs.mean(0), all_obs.std(0) + 1e-6
    ep = data.episodes[episode]
    steps = list(range(start, min(start + k, len(ep))))
    pad = k - len(steps)
    out: dict[str, list] = {"states": [], "actions": [], "rtg": [], "t": [], "mask": []}
    for _ in range(pad):
        out["states"].append(np.zeros_like(mean))
        out["actions"].append(np.zeros(ep.actions.shape[1:]))
        out["rtg"].append(0.0)
        out["t"].append(0)
        out["mask"].append(False)
    for t in steps:
        rtg = sum(gamma ** (u - t) * float(ep.rewards[u]) for u in range(t, len(ep)))
        out["states"].append((ep.observations[t].reshape(-1) - mean) / std)
        out["actions"].append(ep.actions[t])
        out["rtg"].append(rtg / scale)
        out["t"].append(t)
        out["mask"].append(True)
    return {key: np.array(value) for key, value in out.items()}


@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_vectorised_windows_match_a_step_by_step_reference(gamma: float) -> None:
    rng = np.random.default_rng(5)
    episodes = [
        Episode(
            observations=rng.normal(size=(n, 3, 2)).astype(np.float32),
            actions=rng.normal(size=(n, 2)).astype(np.float32),
            rewards=rng.normal(size=n).astype(np.float32),
            terminated=bool(n % 2),
            truncated=not n % 2,
        )
        for n in (1, 4, 9, 17)
    ]
    data = Dataset(episodes, "test")
    sampler = WindowSampler(data, context=5, return_scale=3.0, gamma=gamma)
    pairs = [(e, s) for e in range(4) for s in range(len(episodes[e]))]
    batch = sampler._gather(np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs]))
    assert batch.states.shape == (len(pairs), 5, 6) and batch.returns_to_go.shape[-1] == 1
    for row, (episode, start) in enumerate(pairs):
        ref = _reference_window(data, episode, start, 5, gamma, 3.0)
        np.testing.assert_allclose(batch.states[row].numpy(), ref["states"], atol=1e-5)
        np.testing.assert_allclose(batch.actions[row].numpy(), ref["actions"], atol=1e-6)
        np.testing.assert_allclose(batch.returns_to_go[row, :, 0].numpy(), ref["rtg"], atol=1e-5)
        np.testing.assert_array_equal(batch.timesteps[row].numpy(), ref["t"])
        np.testing.assert_array_equal(batch.mask[row].numpy(), ref["mask"])


def test_start_steps_are_uniform_within_an_episode() -> None:
    sampler = WindowSampler(Dataset([_episode(30)], "test"), context=4)
    batch = sampler.sample(30_000, np.random.default_rng(1))
    newest = batch.timesteps[:, -1].numpy()  # = min(start + 3, 29) with left padding
    counts = np.bincount(newest, minlength=30) / len(newest)
    assert counts[:3].sum() == 0
    # Starts 0..26 give newest 3..28 (1/30 each); starts 26..29 all end at step 29 (4/30).
    tolerance = 4 * (1 / 30 / len(newest)) ** 0.5
    np.testing.assert_allclose(counts[3:29], 1 / 30, atol=tolerance)
    assert counts[29] == pytest.approx(4 / 30, abs=2 * tolerance)
    real = batch.mask.sum(1).numpy()
    assert real.min() == 1 and real.max() == 4  # the start at step 29 keeps one real step
