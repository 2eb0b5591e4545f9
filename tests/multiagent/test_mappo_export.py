"""A team exported as one ONNX graph per policy group plays, from the graphs alone, exactly the
episodes its run plays: on the relay memory task and on MPE's simple_spread."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pettingzoo")
pytest.importorskip("onnxruntime")

from rlformer.config import load_config  # noqa: E402
from rlformer.policies import load_policy  # noqa: E402
from rlformer.runs.training import train  # noqa: E402

TASKS = {
    "relay": ["mappo.env=rlformer_envs.relay:parallel_env", "mappo.env_kwargs={delay: 8}"],
    "spread": [
        "mappo.env=mpe2.simple_spread_v3:parallel_env",
        "mappo.env_kwargs={N: 3, max_cycles: 25}",
    ],
}


@pytest.mark.slow
@pytest.mark.parametrize("task", sorted(TASKS))
def test_exported_team_scores_what_the_run_scores(task: str, tmp_path: Path) -> None:
    cfg = load_config(
        None,
        [
            "algo=mappo", *TASKS[task], "mappo.total_steps=1024",
            "rollout.envs_per_worker=4", "rollout.fragment_length=64",
            "model.core={n_layers: 1, d_model: 16, n_heads: 2, d_ff: 32, memory_length: 16}",
            f"run.root={tmp_path}", "run.progress=false", "eval.episodes=2",
        ],
    )  # fmt: skip
    run = train(cfg).run_dir
    out = tmp_path / "export"
    done = subprocess.run(
        [sys.executable, "-m", "rlformer.cli", "export", str(run), "--out", str(out)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    team = json.loads((out / "team.json").read_text())
    for group, agents in team["groups"].items():
        meta = json.loads((out / group / "policy.json").read_text())
        assert meta["team"] == {"group": group, "agents": {a: k for k, a in enumerate(agents)}}
        names = {spec["name"] for spec in meta["inputs"]}
        assert "obs.obs" in names and "obs.agent_id" in names
        assert "obs.state" not in names  # the central critic's input is not deployed
    trained, exported = load_policy(run), load_policy(out)
    a = trained.play(12, seed=0, num_envs=5, deterministic=True)
    b = exported.play(12, seed=0, num_envs=5, deterministic=True)
    assert [e.agent_returns for e in a.episodes] == [e.agent_returns for e in b.episodes]
    assert [e.length for e in a.episodes] == [e.length for e in b.episodes]
