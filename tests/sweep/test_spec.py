"""Sweep files: expansion into trials, and malformed files refused before any trial starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rlformer.config import ConfigError
from rlformer.sweep.spec import load_sweep

BASE = {
    "env": {"id": "rlformer/TMaze-v0", "kwargs": {"length": 3}},
    "rollout": {"envs_per_worker": 4, "fragment_length": 16},
    "model": {"core": {"n_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32}},
    "ppo": {"num_minibatches": 2, "total_steps": 128},
}


def _write(tmp_path: Path, **spec: object) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"name": "t", "base": BASE, **spec}, sort_keys=False))
    return path


def test_grid_crosses_axes_tasks_and_seeds(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        axes={"model.core.gate": ["gru", "input"], "ppo.learning_rate": [1e-3, 3e-4]},
        tasks={"short": {"env.kwargs.length": 3}, "long": {"env.kwargs.length": 9}},
        seeds=3,
        first_seed=5,
        set={"ppo.update_epochs": 2},
    )
    sweep = load_sweep(path, tmp_path / "out")
    assert len(sweep.trials) == 2 * 2 * 2 * 3
    names = [t.name for t in sweep.trials]
    assert len(set(names)) == len(names)
    first = sweep.trials[0]
    assert first.name == "short__gate=gru+learning_rate=0.001__seed5"
    assert first.values == {"model.core.gate": "gru", "ppo.learning_rate": 1e-3}
    cfg = first.config
    assert (cfg.model.core.gate, cfg.ppo.learning_rate, cfg.run.seed) == ("gru", 1e-3, 5)
    assert cfg.ppo.update_epochs == 2 and cfg.env.kwargs == {"length": 3}
    assert Path(cfg.run.root) == (tmp_path / "out" / "trials" / first.name).resolve()
    assert {t.seed for t in sweep.trials} == {5, 6, 7}
    assert {t.config.env.kwargs["length"] for t in sweep.trials if t.task == "long"} == {9}


def test_named_axis_sets_several_keys(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        axes={
            "arch": {
                "gtrxl_gru": {"model.core.block": "gtrxl", "model.core.gate": "gru"},
                "post_ln": {"model.core.block": "post_ln"},
            }
        },
    )
    trials = load_sweep(path, tmp_path).trials
    assert [t.variant for t in trials] == ["arch=gtrxl_gru", "arch=post_ln"]
    assert trials[1].config.model.core.block == "post_ln"
    assert trials[1].values == {"arch": "post_ln"}


def test_random_search_is_reproducible_and_in_range(tmp_path: Path) -> None:
    axes = {
        "ppo.learning_rate": {"loguniform": [1e-4, 1e-2]},
        "ppo.ent_coef": {"uniform": [0.0, 0.1]},
        "model.core.memory_length": {"randint": [4, 9]},
        "model.core.gate": ["gru", "highway"],
    }
    path = _write(tmp_path, axes=axes, search="random", num_samples=6, sample_seed=3)
    a, b = load_sweep(path, tmp_path).trials, load_sweep(path, tmp_path).trials
    assert [t.values for t in a] == [t.values for t in b]
    assert len(a) == 6 and a[0].variant.startswith("s00+")
    for t in a:
        assert 1e-4 <= t.config.ppo.learning_rate <= 1e-2
        assert 0.0 <= t.config.ppo.ent_coef <= 0.1
        assert 4 <= t.config.model.core.memory_length < 9
    assert len({t.config.ppo.learning_rate for t in a}) == 6


def test_base_file_relative_to_the_sweep_file(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(BASE))
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "t", "base": "base.yaml", "seeds": 2}))
    trials = load_sweep(path, tmp_path).trials
    assert [t.name for t in trials] == ["base__seed0", "base__seed1"]
    assert trials[0].task == "rlformer/TMaze-v0"


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ({"axes": {"model.core.gat": ["gru"]}}, "model.core.gat: unknown key"),
        ({"axes": {"model.core.gate": []}}, "axis 'model.core.gate' is empty"),
        ({"axes": {"ppo.learning_rate": ["fast"]}}, "ppo.learning_rate: got 'fast'"),
        ({"axes": {"model.core.gate": ["lstm"]}}, "model.core.gate: got 'lstm'"),
        (
            {"axes": {"ppo.learning_rate.x": [1]}},
            "ppo.learning_rate: Input should be a valid number",
        ),
        ({"axes": {"ppo.gamma": {"uniform": [0.9, 0.99]}}}, "a distribution needs search"),
        ({"seeds": 0}, "seeds: got 0"),
        ({"sedes": 2}, "sedes: unknown key (did you mean seeds?"),
        ({"base": "missing.yaml"}, "missing.yaml: config file not found"),
    ],
)
def test_malformed_sweep_is_one_config_error(tmp_path: Path, spec: dict, needle: str) -> None:
    path = _write(tmp_path, **spec)
    with pytest.raises(ConfigError) as info:
        load_sweep(path, tmp_path)
    message = str(info.value)
    assert needle in message, message
    assert "\n" not in message and str(path) in message


def test_cli_refuses_a_malformed_sweep_before_any_trial(tmp_path: Path) -> None:
    path = _write(tmp_path, axes={"model.core.gat": ["gru"]})
    result = subprocess.run(
        [sys.executable, "-m", "rlformer.cli", "sweep", str(path), "--dir", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "model.core.gat" in lines[0]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "d").exists()  # nothing started, nothing written


def test_cli_dry_run_lists_trials_and_unknown_env_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, axes={"model.core.gate": ["gru", "input"]})
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlformer.cli",
            "sweep",
            "run",
            str(path),
            "--dry-run",
            "--dir",
            str(tmp_path / "d"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[:2] == ["gate=gru__seed0", "gate=input__seed0"]
    bad = _write(tmp_path, set={"env.id": "rlformer/NoSuchEnv-v0"})
    result = subprocess.run(
        [sys.executable, "-m", "rlformer.cli", "sweep", str(bad), "--dir", str(tmp_path / "e")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "NoSuchEnv" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_cli_unreachable_cluster_address_is_one_error_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = _write(tmp_path)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlformer.cli",
            "sweep",
            str(path),
            "--dir",
            str(tmp_path / "d"),
            "--address",
            f"127.0.0.1:{port}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "no Ray cluster answers there" in lines[0], result.stderr
