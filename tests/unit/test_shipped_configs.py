"""Every config we ship validates, names a registered env, and fits the machine it targets."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlformer.config import load_config
from rlformer.training import check_config

ROOT = Path(__file__).parents[2] / "configs"
CONFIGS = sorted([*ROOT.glob("*.yaml"), *ROOT.glob("memory/*.yaml")])


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_config_builds_its_env_and_model(path: Path, tmp_path: Path) -> None:
    cfg = load_config(path, [f"run.root={tmp_path}"])
    assert check_config(cfg).startswith(f"ok: {cfg.algo} on {cfg.env.id}")
    assert cfg.run.name in path.stem or path.stem == "quickstart"


def test_quickstart_uses_embedded_ray_on_a_memory_task() -> None:
    cfg = load_config(Path(__file__).parents[2] / "configs" / "quickstart.yaml")
    assert cfg.rollout.backend == "ray" and cfg.rollout.ray_address is None
    assert cfg.env.id == "rlformer/TMaze-v0" and cfg.model.torso == "gtrxl"


SUITES = sorted((Path(__file__).parents[2] / "configs" / "eval").glob("*.yaml"))


@pytest.mark.parametrize("path", SUITES, ids=[p.name for p in SUITES])
def test_eval_suite_tasks_construct(path: Path) -> None:
    from rlformer.evaluation.suites import load_suite
    from rlformer.rollout.env_factory import env_from_config

    suite = load_suite(path)
    assert suite.name == path.stem
    for task in suite.tasks:
        env_from_config(task.env_config()).close()


def test_memory_and_mujoco_suites_are_shipped() -> None:
    assert {"memory", "mujoco", "pomdp", "popgym", "minigrid"} <= {p.stem for p in SUITES}


SWEEPS = sorted((ROOT / "sweeps").glob("*.yaml"))


@pytest.mark.parametrize("path", SWEEPS, ids=[p.name for p in SWEEPS])
def test_shipped_sweeps_expand_and_build_their_envs(path: Path, tmp_path: Path) -> None:
    from rlformer.sweep.runner import check_sweep
    from rlformer.sweep.spec import load_sweep

    sweep = load_sweep(path, tmp_path / "sweep")
    check_sweep(sweep)  # every trial's config validates and every task's env builds
    assert len(sweep.trials) >= 9 and {"gates", "torsos"} <= {p.stem for p in SWEEPS}
