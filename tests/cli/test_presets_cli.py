"""Presets through the real CLI: an env id alone trains with its family's settings, or, with no
family, with defaults that learn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.cli.test_train_cli import rlformer


@pytest.mark.slow
def test_env_id_alone_trains_with_the_family_preset_and_records_it(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    result = rlformer(
        "train",
        "--set",
        "env.id=popgym-RepeatPreviousEasy-v0",  # no imports, wrappers or settings
        "--set",
        "ppo.total_steps=2048",
        "--set",
        "eval.episodes=2",
        "--set",
        f"run.root={root}",
        cwd=tmp_path,
    )
    assert "preset popgym:" in result.stdout
    (run_dir,) = [p for p in root.iterdir() if p.is_dir()]
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["preset"] == "popgym"
    assert saved["env"]["wrappers"][0]["class"] == "popgym.wrappers:PreviousAction"
    assert saved["rollout"]["envs_per_worker"] == 16
    # Two iterations of 16 x 64 steps: the preset's rollout shape, not the default 8 x 128.
    assert "iteration 2/2 steps 2048" in result.stderr


@pytest.mark.parametrize(
    ("sets", "notice", "steps"),
    [([], "preset popgym:", "200,000"), (["preset=null", "env.imports=[popgym]"], None, "100,000")],
)
def test_dry_run_names_the_preset_in_effect(
    sets: list[str], notice: str | None, steps: str, tmp_path: Path
) -> None:
    extra = [item for value in sets for item in ("--set", value)]
    result = rlformer(
        "train",
        "--dry-run",
        "--set",
        "env.id=popgym-RepeatPreviousEasy-v0",
        "--set",
        f"run.root={tmp_path / 'runs'}",
        *extra,
        cwd=tmp_path,
    )
    lines = result.stdout.splitlines()
    notices = [line for line in lines if line.startswith("preset ")]
    assert [line.partition(" ")[2].partition(":")[0] for line in notices] == (
        [] if notice is None else [notice.removeprefix("preset ").rstrip(":")]
    )
    (ok,) = [line for line in lines if line.startswith("ok: ")]
    assert ok.startswith("ok: ppo on popgym-") and f"{steps} env steps" in ok
    # then one line per setting the run takes without being named
    assert any(line.startswith("model.value_scaling: ") for line in lines[lines.index(ok) :])


@pytest.mark.slow
def test_an_env_id_without_a_preset_learns_with_the_defaults(tmp_path: Path) -> None:
    """A user's first run on a fully observed task nobody here wrote: Acrobot-v1 (random play
    -500). The defaults solve it by about 30k env steps (seed 0: -99 at 32k); before reward
    normalisation was on by default they stayed at -500 through 100k
    (docs/benchmarks/defaults.md)."""
    root = tmp_path / "runs"
    result = rlformer(
        "train",
        "--set",
        "env.id=Acrobot-v1",
        "--set",
        "ppo.total_steps=40000",
        "--set",
        f"run.root={root}",
        cwd=tmp_path,
    )
    assert "preset " not in result.stdout  # the defaults alone, no family preset
    (run_dir,) = [p for p in root.iterdir() if p.is_dir()]
    evaluation = json.loads((run_dir / "eval.json").read_text())
    assert evaluation["return_mean"] > -200, evaluation
