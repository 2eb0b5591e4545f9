"""``--resume`` with ``--set``: training settings change and are recorded; what shapes the run
is refused in one line before anything is loaded or written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rlformer.config import ConfigError, changed_keys, load_saved_config
from rlformer.runs.checkpoints import load_checkpoint
from rlformer.runs.resume import FIXED_ON_RESUME
from rlformer.runs.training import resume, train
from tests.reliability.tiny import tiny_config


def _finished_run(root: Path) -> Path:
    return train(tiny_config(root, "ppo.total_steps=128", "run.checkpoint_every=1")).run_dir


def _contents(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}


def test_training_settings_change_on_resume_and_config_yaml_records_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = _finished_run(tmp_path)
    result = resume(run_dir, ["ppo.total_steps=256", "ppo.learning_rate=1e-4"])
    assert result.iterations == 4
    logged = capsys.readouterr()
    said = logged.out + logged.err
    assert "resuming with changed settings: ppo.total_steps: 128 -> 256" in said
    assert "ppo.learning_rate: 0.0003 -> 0.0001" in said
    recorded = load_saved_config(run_dir / "config.yaml")
    assert recorded.ppo.total_steps == 256 and recorded.ppo.learning_rate == pytest.approx(1e-4)
    assert load_checkpoint(run_dir)["config"]["ppo"]["learning_rate"] == pytest.approx(1e-4)
    # Resuming again without --set continues with the recorded settings: nothing is left.
    assert resume(run_dir).iterations == 4
    said = "".join(capsys.readouterr())
    assert "nothing left to train: raise ppo.total_steps to train on" in said
    assert "changed settings" not in said


def test_how_the_network_computes_and_where_modules_live_may_change(tmp_path: Path) -> None:
    run_dir = _finished_run(tmp_path)
    changes = ["model.core.dropout=0.1", "env.imports=[rlformer_envs]", "ppo.total_steps=192"]
    assert resume(run_dir, changes).iterations == 3
    recorded = load_saved_config(run_dir / "config.yaml")
    assert recorded.model.core.dropout == pytest.approx(0.1)
    assert recorded.env.imports == ["rlformer_envs"]


@pytest.mark.parametrize(
    "override",
    [
        "env.kwargs.length=5",
        "model.core.n_layers=2",
        "rollout.envs_per_worker=2",
        "rollout.fragment_length=8",
        "run.seed=3",
        "rollout.num_workers=2",
    ],
)
def test_what_shapes_the_run_is_refused_and_nothing_is_written(
    tmp_path: Path, override: str
) -> None:
    run_dir = _finished_run(tmp_path)
    before = _contents(run_dir)
    key = override.split("=")[0]
    with pytest.raises(ConfigError) as info:
        resume(run_dir, ["ppo.total_steps=256", override])
    message = str(info.value)
    assert f"--resume cannot change {key}" in message and "\n" not in message
    assert _contents(run_dir) == before


def test_every_fixed_key_exists_in_the_config() -> None:
    from rlformer.config import TrainConfig

    dumped = TrainConfig().model_dump(mode="json")
    for key in FIXED_ON_RESUME:
        node = dumped
        for part in key.split("."):
            assert isinstance(node, dict) and part in node, key
            node = node[part]


def test_changed_keys_walks_nested_sections_and_added_keys() -> None:
    old = {"ppo": {"gamma": 0.99, "lr": 1}, "env": {"kwargs": {}}}
    new = {"ppo": {"gamma": 0.9, "lr": 1}, "env": {"kwargs": {"length": 3}}, "extra": 1}
    assert changed_keys(new, old) == ["ppo.gamma", "env.kwargs.length", "extra"]


def test_cli_refuses_a_fixed_key_in_one_line_with_status_2(tmp_path: Path) -> None:
    run_dir = _finished_run(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "rlformer.cli", "train", "--resume", str(run_dir)]
        + ["--set", "model.core.d_model=32"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--resume cannot change model.core.d_model" in lines[0]
