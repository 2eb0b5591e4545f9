"""The DT speed bench on image observations (benchmarks/dt.py --images) compares like with
like: transformers' model gets the same CNN as rlformer's DT, trained through in both."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
import torch
from script_loader import load_script

pytest.importorskip("transformers")


def _bench() -> ModuleType:
    return load_script("dt")


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    torch.set_num_threads(1)
    return _bench()


@pytest.mark.parametrize("kind", ["minatar", "nature"])
def test_both_models_train_the_same_cnn_end_to_end(bench: ModuleType, kind: str) -> None:
    from rlformer.data.sampling import WindowSampler
    from rlformer.networks.decision_transformer import dt_loss
    from rlformer.networks.dt_spaces import StateLayout

    task = bench.IMAGE_TASKS[kind]
    dataset, space, _ = bench.synthetic_image_dataset(task, 300)
    assert dataset.episodes[0].observations.dtype == task.dtype
    sampler = WindowSampler(dataset, 4, 10.0, discrete_actions=True, layout=StateLayout(space))
    models = bench.image_models(task, space, 4, [])
    ours, peer = models.values()
    assert repr(ours.encoder) == repr(peer.encoder)
    cnn_params = [sum(p.numel() for p in m.encoder.parameters()) for m in (ours, peer)]
    assert cnn_params[0] == cnn_params[1] > 0
    features = 128 if kind == "minatar" else 512  # the dt section's defaults per dt.cnn
    assert ours.encoder.out_dim == peer.state_dim == features
    assert peer.inner.config.state_dim == features
    window = sampler.sample(2, np.random.default_rng(0))
    assert window.states.shape[-3:] == task.shape
    for model in (ours, peer):
        out = model(
            window.states, window.actions, window.returns_to_go, window.timesteps, window.mask
        )
        assert out.action_preds.shape == (2, 4, task.actions)
        dt_loss(out.action_preds, window.actions, window.mask, True).backward()
        grads = [p.grad for p in model.encoder.parameters()]
        assert all(g is not None for g in grads) and any(g.abs().sum() > 0 for g in grads)


def test_image_speed_prints_both_learners_and_their_ratio(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = bench.image_speed("minatar", 2, 2, torch.device("cpu"), [])
    names = list(rows)
    assert names == ["rlformer DT (shared core)", "transformers DecisionTransformerModel"]
    assert rows[names[0]][1] == rows[names[1]][1]  # CNN parameters
    assert all(rate > 0 and median > 0 for _, _, rate, median in rows.values())
    out = capsys.readouterr().out
    assert "MinAtar-shaped 10x10x4" in out and "1.00x" in out


def test_round_rates_leave_the_vector_rates_as_they_were(bench: ModuleType) -> None:
    """``round_rates`` only records: the returned rates are the whole run's, as without it."""
    from rlformer.data.episodes import Dataset, Episode
    from rlformer.data.sampling import WindowSampler

    rng = np.random.default_rng(0)
    episodes = [
        Episode(
            rng.normal(size=(30, 3)).astype(np.float32),
            rng.integers(0, 2, 30),
            np.ones(30, np.float32),
            True,
            False,
        )
        for _ in range(3)
    ]
    sampler = WindowSampler(Dataset(episodes, "test"), 4, 10.0, discrete_actions=True)
    models = {"bc": bench.BehaviourCloning(3, 2, True)}
    per_round: dict[str, list[float]] = {}
    rates = bench.train(models, sampler, 5, 2, True, seed=0, round_steps=2, round_rates=per_round)
    assert len(per_round["bc"]) == 3  # rounds of 2, 2 and 1 steps
    assert set(rates) == {"bc"} and rates["bc"] > 0
