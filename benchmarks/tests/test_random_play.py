"""The chance-floor script measures the env a config trains on: its imports and make kwargs."""

from __future__ import annotations

import numpy as np
import pytest
from script_loader import load_script


def test_function_imports_and_make_kwargs_reach_the_env() -> None:
    pytest.importorskip("minatar")
    script = load_script("random_play")
    script.import_env_modules(["minatar.gym:register_envs"])
    kwargs = {"use_minimal_action_set": False}
    first = script.random_returns("MinAtar/Breakout-v1", 3, seed=5, kwargs=kwargs)
    again = script.random_returns("MinAtar/Breakout-v1", 3, seed=5, kwargs=kwargs)
    assert first.shape == (3,) and np.all(first >= 0)
    np.testing.assert_array_equal(first, again)  # seeded episode by episode
    with pytest.raises(TypeError):
        script.random_returns("MinAtar/Breakout-v1", 1, seed=5, kwargs={"no_such_kwarg": 1})
