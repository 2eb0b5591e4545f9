"""The learner's weights reach the Ray rollout workers once per iteration through the object
store: one ``ray.put`` per collection, and every worker's ``set_weights`` gets that same
reference (Ray resolves it on the worker's node, one copy per node), never the tensors."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from rlformer.algos.ppo.algorithm import build_model
from rlformer.config import load_config

ray = pytest.importorskip("ray")
pytestmark = [pytest.mark.ray, pytest.mark.slow]


class _Recorder:
    """An actor method whose ``remote`` calls are recorded before they go out."""

    def __init__(self, method: Any, calls: list[tuple[Any, ...]]) -> None:
        self._method, self._calls = method, calls

    def remote(self, *args: Any) -> Any:
        self._calls.append(args)
        return self._method.remote(*args)


class _Spy:
    """An actor handle whose ``set_weights`` calls are recorded."""

    def __init__(self, actor: Any, calls: list[tuple[Any, ...]]) -> None:
        self._actor, self._calls = actor, calls

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._actor, name)
        return _Recorder(method, self._calls) if name == "set_weights" else method


@pytest.mark.parametrize("async_sampling", [False, True])
def test_one_put_per_iteration_and_the_same_reference_to_every_worker(
    local_ray: None, monkeypatch: pytest.MonkeyPatch, async_sampling: bool
) -> None:
    from rlformer.rollout.ray_collector import RayCollector

    cfg = load_config(
        None,
        [
            "env.id=CartPole-v1",
            "rollout.backend=ray",
            "rollout.num_workers=3",
            "rollout.worker_cpus=0.25",
            "rollout.envs_per_worker=1",
            "rollout.fragment_length=8",
            "model.core.n_layers=1",
            "model.core.d_model=16",
            "model.core.n_heads=2",
            "model.core.memory_length=4",
            "ppo.num_minibatches=1",
            f"rollout.async_sampling={str(async_sampling).lower()}",
        ],
    )
    torch.manual_seed(0)
    model = build_model(cfg)
    collector = RayCollector(cfg)
    actors = list(collector.workers)
    try:
        calls: list[tuple[Any, ...]] = []
        collector.workers = [_Spy(worker, calls) for worker in actors]
        puts: list[Any] = []
        real_put = ray.put

        def counting_put(value: Any, *args: Any, **kwargs: Any) -> Any:
            ref = real_put(value, *args, **kwargs)
            puts.append(ref)
            return ref

        monkeypatch.setattr(ray, "put", counting_put)
        iterations = 3
        for version in range(iterations):
            collector.collect(model.state_dict(), version)
        assert len(puts) == iterations  # once per iteration, not once per worker
        # Every worker got each iteration's reference (the tensors stay in the store).
        assert all(isinstance(args[0], ray.ObjectRef) for args in calls)
        workers = cfg.rollout.num_workers
        by_version: dict[int, set[Any]] = {}
        for weights_ref, version in calls:
            by_version.setdefault(version, set()).add(weights_ref)
        # Asynchronous sampling starts the first and second batches with the first weights.
        assert len(calls) == workers * (iterations + int(async_sampling))
        assert all(len(refs) == 1 for refs in by_version.values())
        assert {ref for refs in by_version.values() for ref in refs} == set(puts)
    finally:
        monkeypatch.undo()
        collector.workers = actors
        collector.close()
