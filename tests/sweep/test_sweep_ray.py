"""Real sweeps on a real Ray through the real CLI: a tiny grid, kill + resume, two nodes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ray = pytest.importorskip("ray")
pytest.importorskip("ray.tune")
pytestmark = [pytest.mark.ray, pytest.mark.slow]

TINY = {
    "env": {"id": "rlformer/TMaze-v0", "kwargs": {"length": 3}},
    "rollout": {"envs_per_worker": 4, "fragment_length": 16, "worker_cpus": 0.5},
    "model": {"core": {"n_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32, "memory_length": 8}},
    "ppo": {"num_minibatches": 2, "update_epochs": 2, "total_steps": 4 * 64},
    "eval": {"episodes": 4, "num_envs": 4},
    "run": {"checkpoint_every": 2},
}


def _sweep_file(tmp_path: Path, **spec: object) -> Path:
    path = tmp_path / "sweep.yaml"
    body = {
        "name": "tiny",
        "base": TINY,
        "metric": "rollout/success_rate",
        "score": "eval/success_rate",
        "resources": {"cpu": 0.5},
        **spec,
    }
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "rlformer.cli", *args]


def _run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(_cli(*args), capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise AssertionError(f"rlformer {args} failed:\n{result.stdout[-3000:]}\n{result.stderr}")
    return result


def _trial_dirs(sweep_dir: Path) -> dict[str, Path]:
    return {p.name: p for p in sorted((sweep_dir / "trials").iterdir())}


def _run_dir(trial: Path) -> Path:
    (run,) = trial.glob("run-*")  # exactly one run directory per trial, ever
    return run


def _steps(run: Path) -> list[int]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r["step"] for r in rows if "eval/success_rate" not in r]


def test_tiny_sweep_local_and_ray_rollouts(tmp_path: Path) -> None:
    """2 x 2 trials: local rollouts and Ray rollout actors inside the sweep's own Ray."""
    path = _sweep_file(tmp_path, axes={"rollout.backend": ["local", "ray"]}, seeds=2)
    out = _run("sweep", str(path), "--dir", str(tmp_path / "s"))
    assert "4 finished, 0 unfinished, 0 failed" in out.stdout
    trials = _trial_dirs(tmp_path / "s")
    assert sorted(trials) == [
        "backend=local__seed0",
        "backend=local__seed1",
        "backend=ray__seed0",
        "backend=ray__seed1",
    ]
    for name, trial in trials.items():
        run = _run_dir(trial)  # an ordinary run directory
        assert (run / "config.yaml").is_file() and list((run / "tb").iterdir())
        assert (run / "checkpoints" / "latest").is_file()
        assert _steps(run) == [64, 128, 192, 256]
        config = yaml.safe_load((run / "config.yaml").read_text())
        assert config["rollout"]["backend"] == name.split("=")[1].split("__")[0]
        assert config["run"]["seed"] == int(name[-1])
        done = json.loads((trial / "done.json").read_text())
        assert done["iteration"] == 4 and "eval/success_rate" in done
        # Tune saw every iteration (what its schedulers act on).
        results = (tmp_path / "s" / "tune" / name / "result.json").read_text().splitlines()
        assert [json.loads(r)["iteration"] for r in results] == [1, 2, 3, 4]
    report = _run("sweep", "report", str(tmp_path / "s"), "--csv", str(tmp_path / "r.csv"))
    assert "| rlformer/TMaze-v0 | backend=ray | 2 |" in report.stdout
    # The same command on a finished sweep trains nothing again, and starts no Ray for it:
    # Tune's experiment state (rewritten by every Tune run) stays as it was.
    before = {n: (_run_dir(t) / "metrics.jsonl").read_bytes() for n, t in trials.items()}
    tune_state = {p: p.stat().st_mtime_ns for p in (tmp_path / "s" / "tune").rglob("*")}
    again = _run("sweep", str(path), "--dir", str(tmp_path / "s"))
    assert "4 finished" in again.stdout
    assert before == {n: (_run_dir(t) / "metrics.jsonl").read_bytes() for n, t in trials.items()}
    assert tune_state == {p: p.stat().st_mtime_ns for p in (tmp_path / "s" / "tune").rglob("*")}


def test_killed_sweep_resumes_without_rerunning_finished_trials(tmp_path: Path) -> None:
    iterations = 18
    path = _sweep_file(
        tmp_path,
        axes={"model.core.gate": ["gru", "input"]},
        seeds=2,
        max_concurrent=2,
        set={"ppo.total_steps": iterations * 64},
    )
    sweep_dir = tmp_path / "s"
    command = _cli("sweep", str(path), "--dir", str(sweep_dir))
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    trials_root = sweep_dir / "trials"

    def checkpointed_iteration(trial: Path) -> int:
        """Iteration of the trial's newest checkpoint (0: none yet)."""
        for latest in trial.glob("run-*/checkpoints/latest"):
            name = latest.read_text().strip()  # ckpt_<env steps>.pt
            if name:
                return int(name.split("_")[1].split(".")[0]) // 64
        return 0

    def state() -> tuple[list[Path], dict[str, int]]:
        trials = sorted(trials_root.iterdir()) if trials_root.exists() else []
        done = [t for t in trials if (t / "done.json").exists()]
        # Mid-run: a checkpoint, and still several iterations (not just the evaluation) to go.
        mid_run = {
            t.name: k
            for t in trials
            if t not in done and 2 <= (k := checkpointed_iteration(t)) <= iterations - 6
        }
        return done, mid_run

    deadline = time.monotonic() + 400
    try:
        while True:  # SIGKILL once a trial finished and another is mid-run
            done, mid_run = state()
            if done and mid_run:
                os.kill(process.pid, signal.SIGKILL)
                break
            assert process.poll() is None, "the sweep ended before it could be killed"
            assert time.monotonic() < deadline, "no kill point reached"
            time.sleep(0.05)
    finally:
        process.kill()
        process.wait()
    done, _ = state()
    finished_before = {
        t.name: ((_run_dir(t) / "metrics.jsonl").read_bytes(), (t / "done.json").stat().st_mtime)
        for t in done
    }
    # Unfinished trials that had written a checkpoint (the others start over, in a new run dir).
    unfinished = {
        t.name: _run_dir(t).name
        for t in trials_root.iterdir()
        if t.name not in finished_before and checkpointed_iteration(t) > 0
    }
    assert set(mid_run) <= set(unfinished)

    out = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr
    assert "4 finished, 0 unfinished, 0 failed" in out.stdout
    trials = _trial_dirs(sweep_dir)
    resumed = 0
    for name, trial in trials.items():
        run = _run_dir(trial)
        assert _steps(run) == [64 * (i + 1) for i in range(iterations)], name
        attempts = [json.loads(x) for x in (trial / "attempts.jsonl").read_text().splitlines()]
        if name in finished_before:  # not trained again: same bytes, same done.json
            assert (run / "metrics.jsonl").read_bytes() == finished_before[name][0]
            assert (trial / "done.json").stat().st_mtime == finished_before[name][1]
            assert len(attempts) == 1
        elif name in unfinished:  # same run directory, continued from its checkpoint
            # (one killed before its first checkpoint started over: only one run dir is left)
            assert run.name == unfinished[name]
            first = [a["first_iteration"] for a in attempts]
            if name in mid_run:  # resumed from a checkpoint at or after the one seen
                checkpointed = first[1] - 1
                assert len(first) == 2 and checkpointed >= mid_run[name], first
                assert checkpointed % 2 == 0, first  # checkpoint_every: 2
                resumed += 1
    assert resumed == len(mid_run) >= 1


def test_sweep_trials_run_where_the_cluster_has_cpus(tmp_path: Path) -> None:
    """The sweep's driver joins the cluster at its head, which offers no CPU; every trial runs
    on the other node. (Two nodes with a CPU each would not pin down where two trials land:
    Tune reuses a finished trial's actor, so both may run one after another on one node.)"""
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 0, "resources": {"node_head": 1}, "include_dashboard": False},
    )
    cluster.add_node(num_cpus=1, resources={"node_second": 1})
    cluster.wait_for_nodes()
    try:
        path = _sweep_file(tmp_path, seeds=2, resources={"cpu": 1})
        out = _run("sweep", str(path), "--dir", str(tmp_path / "s"), "--address", cluster.address)
        assert "2 finished" in out.stdout
        nodes = [
            json.loads((t / "done.json").read_text())["node_id"]
            for t in _trial_dirs(tmp_path / "s").values()
        ]
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
        names = {
            node["NodeID"]: next(k for k in node["Resources"] if k.startswith("node_"))
            for node in ray.nodes()
            if node["Alive"]
        }
        assert [names[n] for n in nodes] == ["node_second", "node_second"]
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_asha_scheduler_stops_trials_early(tmp_path: Path) -> None:
    """Tune's ASHA acts on the per-iteration metric; stopped trials keep their run dirs."""
    path = _sweep_file(
        tmp_path,
        axes={"ppo.learning_rate": [1e-5, 1e-4, 1e-3, 3e-3]},
        metric="rollout/return_mean",
        scheduler={"type": "asha", "grace_period": 1, "reduction_factor": 4},
        max_concurrent=2,
        set={"ppo.total_steps": 16 * 64},
    )
    out = _run("sweep", str(path), "--dir", str(tmp_path / "s"))
    match = re.search(r"(\d+) finished, (\d+) stopped early, 0 failed", out.stdout)
    assert match is not None, out.stdout[-2000:]
    finished, stopped = int(match[1]), int(match[2])
    assert finished + stopped == 4 and finished >= 1, out.stdout[-2000:]
    for trial in _trial_dirs(tmp_path / "s").values():
        steps = _steps(_run_dir(trial))
        assert steps == [64 * (i + 1) for i in range(len(steps))]
        assert (len(steps) == 16) == (trial / "done.json").exists()
    report = _run("sweep", "report", str(tmp_path / "s"), "--metric", "rollout/return_mean")
    assert "ppo.learning_rate" not in report.stderr


def test_a_trial_in_a_reused_process_computes_what_a_run_alone_computes(tmp_path: Path) -> None:
    """One trial at a time: the second runs in the first one's process (Tune reuses it), and
    its metrics equal those of the same config trained alone by ``rlformer train``."""
    path = _sweep_file(tmp_path, seeds=2, max_concurrent=1, set={"ppo.total_steps": 2 * 64})
    _run("sweep", str(path), "--dir", str(tmp_path / "s"))
    first, second = _trial_dirs(tmp_path / "s").values()
    pids = [json.loads((t / "attempts.jsonl").read_text())["pid"] for t in (first, second)]
    assert pids[0] == pids[1], "Tune started a new process for the second trial"
    run = _run_dir(second)
    alone = tmp_path / "alone"
    _run("train", str(run / "config.yaml"), "--set", f"run.root={alone}")

    def rows(run_dir: Path) -> list[dict]:
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
        return [
            {k: v for k, v in json.loads(x).items() if not k.startswith("time/")} for x in lines
        ]

    (alone_run,) = alone.iterdir()
    assert rows(alone_run) == rows(run)
