"""Multi-agent rollouts on a real local Ray: the same team fragments as in-process workers,
resume state in and out of the actors, and a killed worker replaced with nothing lost."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
import torch

pytest.importorskip("pettingzoo")
pytest.importorskip("ray")

from rlformer.algos.mappo.algorithm import describe_team, team_worker_spec  # noqa: E402
from rlformer.algos.mappo.worker import TeamFragment  # noqa: E402
from rlformer.config import TrainConfig, load_config  # noqa: E402
from rlformer.rollout.collector import LocalCollector  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.slow]

FIELDS = ("obs", "actions", "log_probs", "values", "rewards", "terminated", "truncated",
          "episode_start", "truncation_values", "last_value", "valid")  # fmt: skip


def _cfg(*extra: str) -> TrainConfig:
    return load_config(
        None,
        [
            "algo=mappo",
            "mappo.env=rlformer_envs.staggered:parallel_env",
            "mappo.env_kwargs={truncate: true}",
            "rollout.backend=ray",
            "rollout.num_workers=2",
            "rollout.envs_per_worker=2",
            "rollout.fragment_length=16",
            "rollout.worker_cpus=0.25",
            "model.core={n_layers: 1, d_model: 16, n_heads: 2, d_ff: 32, memory_length: 8}",
            *extra,
        ],
    )


def _assert_same(a: TeamFragment, b: TeamFragment) -> None:
    assert a.fragments.keys() == b.fragments.keys()
    for group, fragment in a.fragments.items():
        other = b.fragments[group]
        for name in FIELDS:
            mine, theirs = getattr(fragment, name), getattr(other, name)
            if not isinstance(mine, dict):  # obs with an agent id: a leaf dict
                mine, theirs = {"": mine}, {"": theirs}
            assert mine.keys() == theirs.keys()
            for leaf in mine:
                np.testing.assert_array_equal(mine[leaf], theirs[leaf], err_msg=f"{group}.{name}")
        assert torch.equal(fragment.state.actor.hidden, other.state.actor.hidden)
    assert a.episode_returns == b.episode_returns


def test_ray_returns_exactly_the_local_team_data(local_ray: None) -> None:
    from rlformer.rollout.ray_collector import RayCollector

    torch.manual_seed(0)
    cfg = _cfg()
    _, model = describe_team(cfg)
    spec = team_worker_spec(cfg)
    remote, local = RayCollector(cfg, spec), LocalCollector(cfg, spec)
    try:
        for version in range(3):
            _assert_same(
                remote.collect(model.state_dict(), version),
                local.collect(model.state_dict(), version),
            )
        fresh = LocalCollector(cfg, spec)  # resume state travels out of the actors ...
        fresh.set_state(remote.get_state())
        _assert_same(remote.collect(model.state_dict(), 3), fresh.collect(model.state_dict(), 3))
        fresh.close()
        local.collect(model.state_dict(), 3)
        local.collect(model.state_dict(), 4)
        remote.set_state(local.get_state())  # ... and into them
        _assert_same(remote.collect(model.state_dict(), 5), local.collect(model.state_dict(), 5))
    finally:
        remote.close()
        local.close()


def test_killed_team_worker_is_replaced_and_its_rows_sampled_again(local_ray: None) -> None:
    from rlformer.rollout.ray_collector import RayCollector

    torch.manual_seed(0)
    cfg = _cfg("rollout.max_worker_restarts=1")
    _, model = describe_team(cfg)
    collector = RayCollector(cfg, team_worker_spec(cfg))
    try:
        collector.collect(model.state_dict(), 0)
        victim = collector.process_ids()[1]
        os.kill(victim, signal.SIGKILL)
        batch = collector.collect(model.state_dict(), 1)
        assert collector.restarts == 1 and victim not in collector.process_ids()
        fragment = batch.fragments["agent"]
        # 2 workers x 2 envs x 3 agents: every row is there, from this version's weights.
        assert fragment.rewards.shape == (16, 12) and batch.policy_version == 1
        # The replacement's envs start afresh: its agents' first rows open their episodes
        # (present agents) and the late agent is absent until it joins.
        assert fragment.episode_start[0, 6:].all()
        assert not fragment.valid[0, 6:][2::3].any()
    finally:
        collector.close()
