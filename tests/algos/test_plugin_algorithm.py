"""An algorithm added from outside the library, the way a separate package adds one: an
``rlformer.algorithms`` entry point naming its declaration (tests/toy_algorithm). With no file
of the library changed, it trains, resumes, sweeps, evaluates and exports through the real CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from rlformer.config.sections.registry import register, registered, unregister
from rlformer.policies import load_policy
from rlformer.runs.checkpoints import load_checkpoint
from tests.toy_algorithm.policy import LinearPolicy
from tests.toy_algorithm.spec import TOY

REPO = Path(__file__).resolve().parents[2]
BASE = ["--set", "algo=toy", "--set", "env.id=CartPole-v1", "--set", "eval.episodes=3"]


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a process that has the toy installed: a distribution's metadata
    declaring the entry point, on the path (what ``pip install`` of a plugin leaves)."""
    site = tmp_path_factory.mktemp("site")
    dist = site / "rlformer_toy-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: rlformer-toy\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[rlformer.algorithms]\ntoy = tests.toy_algorithm.spec:TOY\n"
    )
    paths = [str(site), str(REPO), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def _cli(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "rlformer.cli", *args],
        capture_output=True, text=True, timeout=600, env=env, cwd=cwd,
    )  # fmt: skip
    assert done.returncode == 0, f"rlformer {args}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture
def toy_registered() -> Iterator[None]:
    """This process loads toy checkpoints too (the CLI processes find the entry point)."""
    register(TOY)
    yield
    unregister("toy")


def _latest(run: Path) -> dict:
    return load_checkpoint(run, trust=False)


def _metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_a_plugin_algorithm_trains_resumes_evaluates_and_exports(
    tmp_path: Path, plugin_env: dict[str, str], toy_registered: None
) -> None:
    assert "toy" not in {s.name for s in registered() if s is not TOY}  # not installed here
    root = ["--set", f"run.root={tmp_path}"]
    dry = _cli(plugin_env, "train", "--dry-run", *BASE, cwd=tmp_path)
    assert "toy: a linear policy on CartPole-v1 (2 actions)" in dry.stdout + dry.stderr
    doc = _cli(plugin_env, "config-doc", cwd=tmp_path).stdout
    assert "toy.noise" in doc and "Std of the perturbation of the weights." in doc

    # Six iterations at once, and three then three more after a resume: the same run.
    for name, iterations in (("whole", 6), ("split", 3)):
        named = ["--set", f"run.name={name}", "--set", f"toy.iterations={iterations}"]
        _cli(plugin_env, "train", *BASE, *root, *named, cwd=tmp_path)
    (whole,), (split,) = tmp_path.glob("whole*"), tmp_path.glob("split*")
    assert _latest(split)["iteration"] == 3
    _cli(plugin_env, "train", "--resume", str(split), "--set", "toy.iterations=6", cwd=tmp_path)
    a, b = _latest(whole), _latest(split)
    assert (a["kind"], a["algo"], a["iteration"], b["iteration"]) == ("toy", "toy", 6, 6)
    for key in ("weight", "bias"):
        assert torch.equal(a["model"][key], b["model"][key])
    drop = ("time", "wall", "resumed")
    rows = [
        [
            {k: v for k, v in r.items() if not k.startswith(drop)}
            for r in _metrics(run)
            if "toy/best_return" in r  # the split run also evaluated when it first ended
        ]
        for run in (whole, split)
    ]
    assert rows[0] == rows[1]
    assert [r["step"] for r in rows[0]] == [1, 2, 3, 4, 5, 6]

    # Evaluated by the CLI from the run, exported, and the export evaluated by the CLI.
    shown = _cli(plugin_env, "eval", str(whole), "--episodes", "4", cwd=tmp_path)
    assert "CartPole-v1" in shown.stdout
    export = tmp_path / "export"
    _cli(plugin_env, "export", str(whole), "--out", str(export), cwd=tmp_path)
    meta = json.loads((export / "policy.json").read_text())
    assert meta["kind"] == "toy" and meta["sampling"]["distribution"] == "categorical"
    _cli(plugin_env, "eval", str(export), "--episodes", "4", cwd=tmp_path)

    # The checkpoint's policy and the export act alike on the same observations.
    policy, exported = load_policy(whole), load_policy(export)
    assert isinstance(policy, LinearPolicy)
    obs = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    starts = np.ones(64, dtype=bool)
    got, _ = exported.act(obs, exported.initial_state(64), starts)
    want, _ = policy.act(obs, None, starts)
    assert np.array_equal(got, want)


@pytest.mark.ray
@pytest.mark.slow
def test_a_plugin_algorithm_is_swept_on_ray(tmp_path: Path, plugin_env: dict[str, str]) -> None:
    spec = {
        "name": "toy",
        "base": {"algo": "toy", "env": {"id": "CartPole-v1"}, "eval": {"episodes": 2}},
        "set": {"toy.iterations": 3},
        "axes": {"toy.noise": [0.1, 1.0]},
        "metric": "toy/best_return",
        "score": "eval/return_mean",
        "resources": {"cpu": 0.5},
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = _cli(plugin_env, "sweep", str(path), "--dir", str(tmp_path / "s"), cwd=tmp_path)
    assert "2 finished, 0 unfinished, 0 failed" in out.stdout
    for trial in sorted((tmp_path / "s" / "trials").iterdir()):
        (run,) = trial.glob("run-*")
        assert _latest(run)["kind"] == "toy" and _latest(run)["iteration"] == 3
        noise = float(trial.name.split("=")[1].split("__")[0])
        assert yaml.safe_load((run / "config.yaml").read_text())["toy"]["noise"] == noise
