"""ODT's online collection on Ray workers against the same run in-process. Apart from
test_odt_runs.py so that the test scheduler's Ray worker runs only the tests that start a
cluster (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tests.algos.test_odt_runs import _played


@pytest.mark.ray
@pytest.mark.slow
def test_online_collection_on_ray_equals_local(
    walks: Path, tmp_path: Path, local_ray: None
) -> None:
    local_episodes, local_sources, local_weights = _played("local", walks, tmp_path / "local")
    ray_episodes, ray_sources, ray_weights = _played("ray", walks, tmp_path / "ray")
    assert local_sources == ray_sources
    assert sum(s < 0 for s in local_sources) == 12  # 3 iterations x 2 workers x 2 envs
    for a, b in zip(local_episodes, ray_episodes, strict=True):
        np.testing.assert_array_equal(a.observations, b.observations)
        np.testing.assert_array_equal(a.actions, b.actions)
        np.testing.assert_array_equal(a.rewards, b.rewards)
    for key in local_weights:
        assert torch.equal(local_weights[key], ray_weights[key]), key
