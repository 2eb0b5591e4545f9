"""Every config we ship validates, names a registered env, and fits the machine it targets."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlformer.config import load_config
from rlformer.rollout.env_factory import check_env_id

CONFIGS = sorted((Path(__file__).parents[2] / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_config_validates(path: Path) -> None:
    cfg = load_config(path)
    check_env_id(cfg.env.id)
    assert cfg.run.name in path.stem or path.stem == "quickstart"


def test_quickstart_uses_embedded_ray_on_a_memory_task() -> None:
    cfg = load_config(Path(__file__).parents[2] / "configs" / "quickstart.yaml")
    assert cfg.rollout.backend == "ray" and cfg.rollout.ray_address is None
    assert cfg.env.id == "rlformer/TMaze-v0" and cfg.model.torso == "gtrxl"


SUITES = sorted((Path(__file__).parents[2] / "configs" / "eval").glob("*.yaml"))


@pytest.mark.parametrize("path", SUITES, ids=[p.name for p in SUITES])
def test_eval_suite_tasks_construct(path: Path) -> None:
    from rlformer.evaluation.suites import load_suite
    from rlformer.rollout.env_factory import make_env

    suite = load_suite(path)
    assert suite.name == path.stem
    for task in suite.tasks:
        make_env(task.env, task.kwargs, task.max_episode_steps).close()


def test_memory_and_mujoco_suites_are_shipped() -> None:
    assert {"memory", "mujoco"} <= {p.stem for p in SUITES}
