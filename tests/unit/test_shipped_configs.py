"""Every config we ship validates, names a registered env, and fits the machine it targets."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlformer.config import load_config
from rlformer.data.recorder import collect_dataset
from rlformer.runs.training import check_config

ROOT = Path(__file__).parents[2] / "configs"
CONFIGS = sorted([*ROOT.glob("*.yaml"), *ROOT.glob("memory/*.yaml"), *ROOT.glob("minatar/*.yaml")])


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_config_builds_its_env_and_model(path: Path, tmp_path: Path) -> None:
    cfg = load_config(path, [f"run.root={tmp_path}"])
    if cfg.algo in ("dt", "odt"):
        # --dry-run reads the dataset, which the config's comment says how to make: a small
        # random-policy recording on the config's env stands in for it.
        data = tmp_path / "data.hdf5"
        env = cfg.env
        collect_dataset("random", env.id, 200, data, env_kwargs=env.kwargs, progress=False)
        cfg = load_config(path, [f"run.root={tmp_path}", f"dt.dataset={data}"])
    task = cfg.mappo.env if cfg.algo == "mappo" else cfg.env.id  # a team names its own task
    assert check_config(cfg).startswith(f"ok: {cfg.algo} on {task}")
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


@pytest.mark.parametrize("path", SUITES, ids=[p.name for p in SUITES])
def test_eval_suite_tasks_fit_the_agent_their_env_id_trains(path: Path) -> None:
    """An agent trained from a task's env id alone (its family's preset, as `preset: auto` lays
    it) plays that task of the suite, as `rlformer eval --suite` builds it: same observation and
    action spaces. The minigrid suite once kept MiniGrid's raw codes after the preset moved to
    the one-hot view, and then refused every preset-trained agent."""
    from rlformer.evaluation.suites import load_suite
    from rlformer.rollout.env_factory import env_from_config

    for task in load_suite(path).tasks:
        trained_on = load_config(None, [f"env.id={task.env}"]).env
        suite_env = env_from_config(task.env_config(trained_on))
        trained_env = env_from_config(trained_on)
        assert suite_env.observation_space == trained_env.observation_space, task.label
        assert suite_env.action_space == trained_env.action_space, task.label
        suite_env.close()
        trained_env.close()


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
