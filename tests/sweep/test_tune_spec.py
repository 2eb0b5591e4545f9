"""Tune files: validation before Ray starts, one line per problem; PBT limited to resumable keys."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rlformer.config import ConfigError
from rlformer.sweep.tune_spec import load_tune

BASE = {
    "env": {"id": "rlformer/TMaze-v0", "kwargs": {"length": 3}},
    "rollout": {"envs_per_worker": 4, "fragment_length": 16},
    "model": {"core": {"n_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32}},
    "ppo": {"num_minibatches": 2},
}
SPACE = {"ppo.learning_rate": {"loguniform": [1e-4, 1e-2]}, "ppo.ent_coef": [0.0, 0.01]}


def _write(tmp_path: Path, **spec: object) -> Path:
    path = tmp_path / "tune.yaml"
    body = {"name": "t", "base": BASE, "space": SPACE, "budget": 256, **spec}
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def test_random_search_is_a_reproducible_random_sweep(tmp_path: Path) -> None:
    path = _write(tmp_path, num_samples=3, seeds=2, first_seed=4)
    tune = load_tune(path, tmp_path / "out")
    assert tune.sweep is not None and len(tune.sweep.trials) == 6
    assert {t.config.ppo.total_steps for t in tune.sweep.trials} == {256}
    assert {t.seed for t in tune.sweep.trials} == {4, 5}
    for trial in tune.sweep.trials:
        assert 1e-4 <= trial.config.ppo.learning_rate <= 1e-2
        assert trial.config.ppo.ent_coef in (0.0, 0.01)
    again = load_tune(path, tmp_path / "out")
    assert [t.name for t in again.sweep.trials] == [t.name for t in tune.sweep.trials]
    assert tune.spec.scheduler.type == "asha"  # the default


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"spaec": {}}, "spaec"),
        ({"space": {"ppo.learning_rate": {"loguniform": [0, 1]}}}, "loguniform needs [low, high]"),
        ({"space": {"ppo.learning_rate": []}}, "is empty"),
        ({"budget": 0}, "budget"),
        ({"set": {"ppo.total_steps": 5}}, "set budget instead"),
        ({"scheduler": {"type": "hyperband"}}, "scheduler"),
        ({"scheduler": {"type": "asha", "reduction_factor": 1}}, "reduction_factor"),
        ({"metric": "eval/success_rate"}, "logged once, after training"),
        ({"search": "optuna", "seeds": 2}, "one seed per configuration"),
        ({"space": {"ppo.gamma": [0.9, 2.0]}}, "ppo.gamma"),
        ({"space": {"model.core.gate": ["gru", "nope"]}}, "gate"),
        ({"search": "optuna", "space": {"ppo.gamma": {"uniform": [0.9, 1.5]}}}, "ppo.gamma = 1.5"),
    ],
)
def test_bad_tune_files_are_one_config_error(tmp_path: Path, spec: dict, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_tune(_write(tmp_path, **spec))
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_pbt_refuses_keys_a_resume_may_not_change(tmp_path: Path) -> None:
    pbt = {"type": "pbt", "perturbation_interval": 128}
    space = {
        **SPACE,
        "model.core.memory_length": [8, 16],
        "rollout.fragment_length": [16, 32],
        "arch": {"a": {"model.core.gate": "gru", "ppo.gamma": 0.9}},
    }
    with pytest.raises(ConfigError) as err:
        load_tune(_write(tmp_path, scheduler=pbt, space=space))
    message = str(err.value)
    assert "\n" not in message
    assert "cannot change model.core.memory_length, rollout.fragment_length, model.core.gate;" in (
        message
    )
    assert "learning_rate" not in message and "ppo.gamma" not in message
    tune = load_tune(_write(tmp_path, scheduler=pbt, space=SPACE))  # resumable keys: fine
    assert tune.native


def test_cli_bad_file_is_one_line_and_exit_2_before_ray(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        scheduler={"type": "pbt", "perturbation_interval": 2},
        space={"model.core.memory_length": [8, 16]},
    )
    out = subprocess.run(
        [sys.executable, "-m", "rlformer.cli", "tune", str(path), "--dir", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "memory_length" in lines[0]
    assert not (tmp_path / "o").exists()
