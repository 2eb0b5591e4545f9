"""Ray backend with a real local Ray: same data as the local backend, worker death, clusters."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
from typing import Any

import numpy as np
import pytest
import torch

from rlformer.algos.ppo.algorithm import build_model
from rlformer.config import TrainConfig, load_config
from rlformer.rollout.collector import LocalCollector
from rlformer.rollout.fragment import Fragment

ray = pytest.importorskip("ray")
pytestmark = [pytest.mark.ray, pytest.mark.slow]

FIELDS = (
    "obs",
    "actions",
    "log_probs",
    "values",
    "rewards",
    "terminated",
    "truncated",
    "episode_start",
    "truncation_values",
    "last_value",
)


def _cfg(*extra: str) -> TrainConfig:
    return load_config(
        None,
        [
            "env.id=CartPole-v1",
            "env.max_episode_steps=8",
            "rollout.backend=ray",
            "rollout.num_workers=2",
            "rollout.envs_per_worker=2",
            "rollout.fragment_length=16",
            "model.core.n_layers=1",
            "model.core.d_model=16",
            "model.core.n_heads=2",
            "model.core.memory_length=8",
            "ppo.num_minibatches=2",
            "rollout.worker_cpus=0.25",
            *extra,
        ],
    )


def _assert_same(a: Fragment, b: Fragment) -> None:
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    if a.state.actor is not None:
        assert torch.equal(a.state.actor.hidden, b.state.actor.hidden)
    assert a.episode_returns == b.episode_returns


@pytest.mark.parametrize("torso", ["gtrxl", "mlp"])
def test_ray_returns_exactly_the_local_data(local_ray: None, torso: str) -> None:
    from rlformer.rollout.ray_collector import RayCollector

    torch.manual_seed(0)
    cfg = _cfg(f"model.torso={torso}")
    model = build_model(cfg)
    remote, local = RayCollector(cfg), LocalCollector(cfg)
    try:
        for version in range(3):
            _assert_same(
                remote.collect(model.state_dict(), version),
                local.collect(model.state_dict(), version),
            )
        # Resume state travels out of the actors: a fresh local collector continues exactly ...
        fresh = LocalCollector(cfg)
        fresh.set_state(remote.get_state())
        _assert_same(remote.collect(model.state_dict(), 3), fresh.collect(model.state_dict(), 3))
        fresh.close()
        # ... and into them (a Ray run resumed from a checkpoint).
        local.collect(model.state_dict(), 3)
        local.collect(model.state_dict(), 4)  # now one fragment ahead of the actors ...
        remote.set_state(local.get_state())  # ... until its state is restored into them
        _assert_same(remote.collect(model.state_dict(), 5), local.collect(model.state_dict(), 5))
    finally:
        remote.close()
        local.close()
    assert ray.is_initialized(), "a collector must not shut down a Ray it did not start"


def _perturbed(model: torch.nn.Module, seed: int) -> dict[str, torch.Tensor]:
    """The model's weights after a random nudge: a stand-in for one learner update."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.3 * torch.randn(parameter.shape, generator=generator))
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_async_sampling_returns_the_batch_of_the_previous_weights_and_resumes_exactly(
    local_ray: None,
) -> None:
    """collect(w_v) returns the batch sampled with w_(v-1) (the first call's own), the data
    equal to a synchronous collector given the weights one call late; a checkpoint taken with
    a batch in flight continues in a fresh collector exactly as in the original."""
    from rlformer.rollout.ray_collector import RayCollector

    torch.manual_seed(0)
    cfg = _cfg("rollout.async_sampling=true")
    model = build_model(cfg)
    weights = [_perturbed(model, seed) for seed in range(5)]
    remote, local = RayCollector(cfg), LocalCollector(cfg)
    fresh = None
    try:
        _assert_same(remote.collect(weights[0], 0), local.collect(weights[0], 0))
        for version in (1, 2):
            batch = remote.collect(weights[version], version)
            assert batch.policy_version == version - 1
            _assert_same(batch, local.collect(weights[version - 1], version - 1))
        # Checkpoint now: the batch sampled with weights[2] is in flight.
        states = remote.get_state()
        fresh = RayCollector(cfg)
        fresh.set_state(states)
        for version in (3, 4):
            expected = local.collect(weights[version - 1], version - 1)
            _assert_same(remote.collect(weights[version], version), expected)
            _assert_same(fresh.collect(weights[version], version), expected)
    finally:
        for collector in (remote, local, fresh):
            if collector is not None:
                collector.close()


def test_worker_killed_with_a_batch_in_flight_is_replaced_and_samples_it_again(
    local_ray: None,
) -> None:
    from rlformer.rollout.ray_collector import RayCollector

    torch.manual_seed(0)
    cfg = _cfg("rollout.async_sampling=true", "rollout.max_worker_restarts=1")
    model = build_model(cfg)
    collector = RayCollector(cfg)
    try:
        collector.collect(model.state_dict(), 0)
        # process_ids() queues behind the next batch's sampling: that batch is done, then the
        # worker dies, so the batch started by the next call has a dead worker.
        os.kill(collector.process_ids()[1], signal.SIGKILL)
        assert collector.collect(model.state_dict(), 1).policy_version == 0
        assert collector.restarts == 0
        batch = collector.collect(model.state_dict(), 2)
        assert collector.restarts == 1
        # Sampled again by the replacement, with the weights it was started with (version 1).
        assert batch.policy_version == 1 and batch.obs.shape == (16, 4, 4)
        assert batch.episode_start[0, 2:].all()  # the replacement's envs start afresh
    finally:
        collector.close()


def test_async_sampling_needs_the_ray_backend_and_an_algorithm_that_samples_ahead() -> None:
    with pytest.raises(
        ValueError, match=r"rollout: async_sampling needs backend=ray \(--set rollout.backend=ray\)"
    ):
        _cfg("rollout.backend=local", "rollout.async_sampling=true")
    with pytest.raises(ValueError, match="for algo ppo and mappo only, not dt"):
        _cfg("algo=dt", "rollout.async_sampling=true")


def test_killed_worker_is_replaced_and_batch_is_complete(local_ray: None) -> None:
    from rlformer.rollout.ray_collector import RayCollector

    torch.manual_seed(0)
    cfg = _cfg("rollout.max_worker_restarts=1")
    model = build_model(cfg)
    collector = RayCollector(cfg)
    try:
        collector.collect(model.state_dict(), 0)
        victim = collector.process_ids()[1]
        os.kill(victim, signal.SIGKILL)
        fragment = collector.collect(model.state_dict(), 1)
        assert fragment.obs.shape == (16, 4, 4) and fragment.policy_version == 1
        assert collector.restarts == 1
        assert victim not in collector.process_ids()
        # The replacement starts its envs afresh: its first observation opens an episode.
        assert fragment.episode_start[0, 2:].all()
        # Past the restart budget: a clear error, not a silent half batch.
        os.kill(collector.process_ids()[0], signal.SIGKILL)
        from rlformer.rollout.ray_collector import RolloutError

        with pytest.raises(RolloutError, match="max_worker_restarts=1"):
            collector.collect(model.state_dict(), 2)
    finally:
        collector.close()


def test_hanging_worker_times_out_and_is_replaced(local_ray: None) -> None:
    from rlformer.rollout.ray_collector import RayCollector

    torch.manual_seed(0)
    # Short enough to keep the test short, long enough for the replacement's first fragment on
    # a loaded machine (2 s was not: a second replacement, under the whole suite and more).
    cfg = _cfg("model.torso=mlp", "rollout.sample_timeout_s=6")
    model = build_model(cfg)
    collector = RayCollector(cfg)
    try:
        collector.collect(model.state_dict(), 0)
        frozen = collector.process_ids()[0]
        os.kill(frozen, signal.SIGSTOP)  # alive but silent: only the timeout can notice
        try:
            fragment = collector.collect(model.state_dict(), 1)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(frozen, signal.SIGKILL)
        assert collector.restarts == 1 and frozen not in collector.process_ids()
        assert fragment.obs.shape == (16, 4, 4) and fragment.episode_start[0, :2].all()
    finally:
        collector.close()


def test_fragment_of_another_version_is_refused(local_ray: None) -> None:
    from rlformer.rollout.ray_collector import RayCollector, RolloutError

    class LaggingCollector(RayCollector):
        """Worker 1 keeps getting the previous version, as a stale actor would produce."""

        def _submit(self, batch: Any, index: int) -> None:
            # A copy tagged one version back that shares the batch's pending references.
            super()._submit(dataclasses.replace(batch, version=batch.version - (index == 1)), index)

    torch.manual_seed(0)
    cfg = _cfg("model.torso=mlp")
    model = build_model(cfg)
    collector = LaggingCollector(cfg)
    try:
        with pytest.raises(RolloutError, match=r"version 5, got \{1: 4\}"):
            collector.collect(model.state_dict(), 5)
    finally:
        collector.close()


def test_two_node_cluster_places_workers_on_both_nodes() -> None:
    from ray.cluster_utils import Cluster

    from rlformer.rollout.ray_collector import RayCollector

    if ray.is_initialized():
        ray.shutdown()
    # Each node carries a custom resource naming it, so placement is checked by name.
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "resources": {"node_head": 1}, "include_dashboard": False},
    )
    cluster.add_node(num_cpus=1, resources={"node_second": 1})
    cluster.wait_for_nodes()
    try:
        torch.manual_seed(0)
        cfg = _cfg("rollout.worker_cpus=1", f"rollout.ray_address={cluster.address}")
        model = build_model(cfg)
        collector = RayCollector(cfg)
        try:
            names = {
                node["NodeID"]: next(k for k in node["Resources"] if k.startswith("node_"))
                for node in ray.nodes()
                if node["Alive"]
            }
            placed = sorted(names[node_id] for node_id in collector.node_ids())
            # One worker per node: each actor needs a node's only CPU.
            assert placed == ["node_head", "node_second"]
            local = LocalCollector(cfg)
            for version in range(2):
                _assert_same(
                    collector.collect(model.state_dict(), version),
                    local.collect(model.state_dict(), version),
                )
            local.close()
        finally:
            collector.close()
        # Leaving a joined cluster disconnects this driver but never stops the cluster.
        assert not ray.is_initialized()
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
        assert sum(node["Alive"] for node in ray.nodes()) == 2
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_user_env_module_and_wrapper_on_a_cluster_via_runtime_env(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user's env module (module:EnvId) plus a wrapper, shipped to cluster workers with
    rollout.ray_runtime_env, gives the same fragments as the local backend."""
    from ray.cluster_utils import Cluster

    from rlformer.rollout.ray_collector import RayCollector
    from tests.cli.test_spaces_cli import USER_MODULE

    package = tmp_path / "code"
    package.mkdir()
    (package / "myenvs.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(package))  # the driver imports it from here
    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    try:
        torch.manual_seed(0)
        cfg = _cfg(
            "env.id=myenvs:Recall-v0",
            "env.max_episode_steps=null",
            "env.wrappers=[{class: gymnasium.wrappers:FilterObservation, "
            "kwargs: {filter_keys: [cue, clock]}}]",
            "model.prev_action_reward=true",
            "model.normalize_obs=true",
            "rollout.worker_cpus=1",
            f"rollout.ray_address={cluster.address}",
            f"rollout.ray_runtime_env={{working_dir: {package}}}",
        )
        model = build_model(cfg)
        collector = RayCollector(cfg)
        try:
            assert len(set(collector.node_ids())) == 2
            local = LocalCollector(cfg)
            for version in range(2):
                remote_fragment = collector.collect(model.state_dict(), version)
                local_fragment = local.collect(model.state_dict(), version)
                for key in ("cue", "clock"):
                    np.testing.assert_array_equal(remote_fragment.obs[key], local_fragment.obs[key])
                for name in FIELDS[1:]:
                    np.testing.assert_array_equal(
                        getattr(remote_fragment, name), getattr(local_fragment, name), name
                    )
                model.merge_statistics(remote_fragment.statistics)
            local.close()
        finally:
            collector.close()
    finally:
        ray.shutdown()
        cluster.shutdown()
