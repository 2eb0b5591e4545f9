"""The README's user env on Ray workers through the real CLI, then evaluation and recording from
the checkpoint alone in fresh processes. Apart from test_spaces_cli.py so that the test
scheduler's Ray worker runs only the tests that start a cluster (tests/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_spaces_cli import USER_CONFIG, USER_MODULE, rlformer


@pytest.mark.slow
@pytest.mark.ray
def test_user_env_with_wrapper_on_ray_then_eval_and_collect_from_checkpoint(
    tmp_path: Path,
) -> None:
    (tmp_path / "myenvs.py").write_text(USER_MODULE)
    (tmp_path / "recall.yaml").write_text(USER_CONFIG)
    out = rlformer("train", "recall.yaml", "--set", f"run.root={tmp_path / 'runs'}", cwd=tmp_path)
    (run_dir,) = sorted((tmp_path / "runs").iterdir())
    assert f"run directory: {run_dir}" in out.stdout
    assert json.loads(out.stdout.strip().splitlines()[-1])["episodes"] == 4

    # A fresh process with nothing but the run directory: the resolved config (id, kwargs,
    # wrappers) travels in the checkpoint, and so do the frozen normalisation statistics.
    from rlformer.runs.directory import load_checkpoint

    payload = load_checkpoint(run_dir)
    assert payload["config"]["env"]["wrappers"][0]["class"] == (
        "gymnasium.wrappers:FilterObservation"
    )
    (count,) = [v for k, v in payload["model"].items() if k.startswith("encoder.norms.")][:1]
    assert float(count) == 128  # the clock leaf: 2 iterations x 2 workers x 2 envs x 16 steps
    result = rlformer("eval", str(run_dir), "--episodes", "5", "--json", "e.json", cwd=tmp_path)
    assert "myenvs:Recall-v0" in result.stdout
    (report,) = json.loads((tmp_path / "e.json").read_text())["reports"]
    assert report["episodes"] == 5 and all(r["length"] == 4 for r in report["episodes_detail"])

    collected = rlformer(
        "collect", "--policy", str(run_dir), "--steps", "24", "--out", "d.hdf5", cwd=tmp_path
    )
    assert "wrote d.hdf5" in collected.stdout
    from rlformer.data import load_dataset

    dataset = load_dataset(str(tmp_path / "d.hdf5"))
    # Dict observations stored leaf by leaf, each in its own dtype.
    observations = dataset.episodes[0].observations
    assert {key: value.shape[1:] for key, value in observations.items()} == {
        "clock": (1,),
        "cue": (),
    }
