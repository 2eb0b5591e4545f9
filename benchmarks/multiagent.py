"""Multi-agent PPO with memory beside BenchMARL's MAPPO, on the same tasks and the same episodes.

Each run trains one variant of rlformer's ``algo: mappo`` on one task and seed, then plays the
final team on env seeds 0-99 (deterministic actions), the episodes the peer's script
(``benchmarks/peers/benchmarl_mappo.py``, in its own venv) scores BenchMARL on. One JSON row per
run goes to ``benchmarks/results/multiagent/rlformer.jsonl`` with its learning curve.

    python benchmarks/multiagent.py --task relay --variant gtrxl --seeds 0 1 2
    python benchmarks/multiagent.py --task simple_spread --variant gtrxl gru mlp ippo --seeds 0
    python benchmarks/multiagent.py --throughput --peer-python /work/peers/benchmarl-venv/bin/python
    python benchmarks/multiagent.py --report          # the table and the learning-curve PNGs

Runs live under ``--root`` with fixed names: a killed job continues its run from the newest
checkpoint when the same command is started again; finished runs are skipped.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "multiagent"
EVAL_EPISODES = 100

# The tasks: the factory, its kwargs (MPE: BenchMARL's shipped PettingZoo task settings, 100-step
# episodes on both tasks, with discrete actions on both sides), and the budget in env steps.
TASKS: dict[str, tuple[str, dict, int]] = {
    "relay": ("rlformer_envs.relay:parallel_env", {"delay": 20}, 2_000_000),
    "relay_delay30": ("rlformer_envs.relay:parallel_env", {"delay": 30}, 2_000_000),
    "relay_cut": ("rlformer_envs.relay:parallel_env", {"delay": 20, "channel": False}, 2_000_000),
    "simple_spread": (
        "mpe2.simple_spread_v3:parallel_env",
        {"N": 3, "local_ratio": 0.5, "max_cycles": 100, "continuous_actions": False},
        1_000_000,
    ),
    "simple_speaker_listener": (
        "mpe2.simple_speaker_listener_v4:parallel_env",
        {"max_cycles": 100, "continuous_actions": False},
        1_000_000,
    ),
}
# What each variant changes from the default (GTrXL torso, central critic).
VARIANTS: dict[str, tuple[str, ...]] = {
    "gtrxl": (),
    "gru": ("model.torso=gru",),
    "mlp": ("model.torso=mlp",),
    "ippo": ("mappo.critic=independent",),
}


@dataclass
class Row:
    task: str
    variant: str
    seed: int
    steps: int
    eval_return: float  # agents' mean return per episode, mean over env seeds 0-99
    eval_team_return: float
    eval_success: float | None
    curve: list[tuple[int, float]]  # (env steps, mean training return of recent episodes)
    seconds: float
    command: str
    commit: str


def commit() -> str:
    done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=REPO)
    return done.stdout.strip() or "unknown"


def sets(task: str, variant: str, seed: int, steps: int | None) -> list[str]:
    env, kwargs, budget = TASKS[task]
    return [
        "algo=mappo",
        f"mappo.env={env}",
        f"mappo.env_kwargs={json.dumps(kwargs)}",
        f"mappo.total_steps={steps or budget}",
        *VARIANTS[variant],
        f"run.seed={seed}",
    ]


def curve(run: Path) -> list[tuple[int, float]]:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["rollout/return_mean"]) for r in rows if "rollout/return_mean" in r]


def run_one(task: str, variant: str, seed: int, root: Path, steps: int | None) -> Row:
    from rlformer.algos.mappo.policy import team_policy
    from rlformer.config import load_config
    from rlformer.runs.checkpoints import load_checkpoint
    from rlformer.runs.training import resume, train

    label = f"{task}-{variant}-s{seed}"
    items = sets(task, variant, seed, steps)
    own = [f"run.root={root}", f"run.name={label}", "run.progress=false", "eval.episodes=20"]
    found = sorted(root.glob(f"{label}-*"))
    start = time.perf_counter()
    if found and not (found[-1] / "eval.json").exists():
        # This script wrote the run directory itself, so its env.imports are its own.
        run = resume(found[-1], ["run.progress=false"], trust=True).run_dir
    elif found:
        run = found[-1]
    else:
        run = train(load_config(None, [*items, *own])).run_dir
    team = team_policy(load_checkpoint(run), str(run))
    played = team.play(EVAL_EPISODES, seed=0, num_envs=10, deterministic=True).summary()
    budget = int(load_config(None, items).mappo.total_steps)
    return Row(
        task, variant, seed, budget, played["return_mean"], played["team_return_mean"],
        played.get("success_rate"), curve(run), time.perf_counter() - start,
        "rlformer train " + " ".join(f"--set '{x}'" for x in items), commit(),
    )  # fmt: skip


def done(out: Path) -> list[dict]:
    return [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []


# BenchMARL's shipped MAPPO batch and updates in rlformer's keys: 6,000 frames per batch from 10
# envs, 45 epochs of 15 minibatches (rlformer splits minibatches over rows: 30 agent rows of 600
# steps in 15 minibatches of 1,200 agent steps, BenchMARL's 400 frames of 3 agents), and for the
# MLP its [256, 256] layers: the same amount of work on both sides.
EQUAL_WORK = (
    "rollout.envs_per_worker=10",
    "rollout.fragment_length=600",
    "ppo.update_epochs=45",
    "ppo.num_minibatches=15",
)


def throughput(peer_python: str | None, steps: int, envs: list[int], record_to: Path) -> None:
    """Training env steps per second on simple_spread (discrete actions) with 1 process and 1
    torch thread, per wall and per CPU second: rlformer with each count of ``envs`` (10 is
    BenchMARL's, so equal envs; 8 is rlformer's default) and with BenchMARL's batch and
    updates (:data:`EQUAL_WORK`), the peer with its shipped config (10 envs) from its own venv,
    then the ratios. The record goes to ``record_to`` with the commit, the command and the load
    average before and after (a figure taken beside other jobs says so there)."""
    import os
    import tempfile

    import torch

    from rlformer.config import load_config
    from rlformer.runs.training import train

    torch.set_num_threads(1)
    load_before = os.getloadavg()[0]
    results: dict[str, dict[str, float]] = {}
    peer_row: dict | None = None
    runs = {
        f"rlformer {variant}, {count} envs": (variant, [f"rollout.envs_per_worker={count}"])
        for count in envs
        for variant in ("gtrxl", "mlp")
    }
    runs["rlformer gtrxl, BenchMARL's batch and updates"] = ("gtrxl", list(EQUAL_WORK))
    runs["rlformer mlp [256, 256], BenchMARL's batch and updates"] = (
        "mlp", [*EQUAL_WORK, "model.mlp_hidden=[256, 256]"]
    )  # fmt: skip
    quiet = ["eval.episodes=0", "run.progress=false"]
    # The peer times its training alone, its libraries imported and its experiment built: an
    # untimed iteration first, so that the first row does not pay for importing the task's
    # modules (mpe2, pettingzoo) and the team's code on its own.
    warm = [*sets("simple_spread", "gtrxl", 0, 1024), *quiet, f"run.root={tempfile.mkdtemp()}"]
    train(load_config(None, warm))
    for name, (variant, settings) in runs.items():
        own = [*settings, *quiet, f"run.root={tempfile.mkdtemp()}"]
        cfg = load_config(None, [*sets("simple_spread", variant, 0, steps), *own])
        wall, cpu = time.perf_counter(), time.process_time()
        train(cfg)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        results[name] = {"steps_per_s": steps / wall, "cpu_steps_per_s": steps / cpu}
    if peer_python:
        out = Path(tempfile.mkdtemp()) / "peer.jsonl"
        peer = subprocess.run(
            [peer_python, str(REPO / "benchmarks/peers/benchmarl_mappo.py"), "--throughput",
             "--task", "simple_spread", "--actions", "discrete", "--frames", str(steps),
             "--out", str(out)],
            capture_output=True, text=True, timeout=7200,
        )  # fmt: skip
        if peer.returncode != 0:
            raise SystemExit(f"the peer failed: {peer.stderr[-1000:]}")
        row = peer_row = json.loads(out.read_text().splitlines()[-1])
        results["benchmarl mlp"] = {k: row[k] for k in ("steps_per_s", "cpu_steps_per_s")}
        for name, figures in list(results.items()):
            if name.startswith("rlformer"):
                figures["ratio_wall"] = figures["steps_per_s"] / row["steps_per_s"]
                figures["ratio_cpu"] = figures["cpu_steps_per_s"] / row["cpu_steps_per_s"]
    record = {
        "task": "simple_spread_v3 (N=3, max_cycles=100, discrete)",
        "steps": steps,
        "envs": {"rlformer": envs, "benchmarl": 10},
        "torch_threads": 1,
        "processes": 1,
        "command": " ".join(["python", *sys.argv]),
        "commit": commit(),
        "load_average": {"before": load_before, "after": os.getloadavg()[0]},
        "results": results,
        "peer_row": peer_row,  # the peer's own record: versions, shapes, timings
    }
    record_to.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))


def peer_row(row: dict) -> dict:
    """A BenchMARL training row in this script's terms: the evaluation's mean return over agents,
    the budget in env steps (a frame is one step of one env with every agent) and the curve as
    (env steps, training return) pairs."""
    return {
        **row,
        "eval_return": row.get("eval_per_agent_mean_return"),
        "steps": row["frames"],
        "curve": [(p["frames"], p["episode_reward_mean"]) for p in row.get("curve") or []],
    }


def at_steps(points: list[tuple[int, float]], steps: int, width: int = 50_000) -> float | None:
    """The mean training return over the curve's points in the ``width`` env steps up to
    ``steps``: a window wide enough that both libraries' batch sizes (1,024 and 6,000 env steps)
    put several points in it."""
    inside = [value for step, value in points if steps - width < step <= steps]
    return float(np.mean(inside)) if inside else None


def throughput_table(record: dict) -> None:
    """The throughput record as the benchmark page's table: per wall and per CPU second, and
    each rlformer row's ratio to the peer."""
    print(f"\n{record['steps']:,} steps, commit {record['commit'][:7]}, load average "
          f"{record['load_average']['before']:.2f} before and {record['load_average']['after']:.2f}"
          " after")  # fmt: skip
    print("| agent | env steps/s (wall) | per CPU second | ratio to BenchMARL (wall / CPU) |")
    print("|---|---:|---:|---|")
    for name, figures in record["results"].items():
        ratio = (f"{figures['ratio_wall']:.2f}x / {figures['ratio_cpu']:.2f}x"
                 if "ratio_wall" in figures else "1")  # fmt: skip
        print(f"| {name} | {figures['steps_per_s']:,.0f} | {figures['cpu_steps_per_s']:,.0f} "
              f"| {ratio} |")  # fmt: skip


def report() -> None:
    """The table (mean over seeds, per seed), the training returns at equal env steps, the
    throughput record's table and a learning-curve PNG per task."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = done(RESULTS / "rlformer.jsonl")
    peer = [peer_row(r) for r in done(RESULTS / "benchmarl.jsonl") if r.get("mode") == "train"]
    print("| task | agent | steps | seeds | return (mean over agents) | success | per seed |")
    print("|---|---|---|---|---|---|---|")
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["task"], f"rlformer {row['variant']}"), []).append(row)
    for row in peer:
        groups.setdefault((row["task"], "BenchMARL mappo"), []).append(row)
    for (task, agent), runs in sorted(groups.items()):
        values = [r["eval_return"] for r in runs]
        success = [r["eval_success"] for r in runs if r.get("eval_success") is not None]
        rate = f"{100 * np.mean(success):.0f}%" if success else "-"
        per_seed = ", ".join(f"{v:.2f}" for v in values)
        print(f"| {task} | {agent} | {runs[0]['steps']} | {len(runs)} | {np.mean(values):.2f} "
              f"| {rate} | {per_seed} |")  # fmt: skip
    marks = (100_000, 250_000, 500_000, 750_000, 1_000_000)
    print("\n| task | agent | seeds | " + " | ".join(f"at {m // 1000}k" for m in marks) + " |")
    print("|---|---|---|" + "---|" * len(marks))
    for (task, agent), runs in sorted(groups.items()):
        cells = []
        for mark in marks:
            values = [v for r in runs if (v := at_steps(r["curve"], mark)) is not None]
            cells.append(f"{np.mean(values):.1f} ({len(values)})" if values else "-")
        print(f"| {task} | {agent} | {len(runs)} | " + " | ".join(cells) + " |")
    record = RESULTS / "throughput.json"
    if record.exists() and "load_average" in (loaded := json.loads(record.read_text())):
        throughput_table(loaded)
    agents = sorted({agent for _, agent in groups})  # one colour per agent on every plot
    for task in sorted({t for t, _ in groups}):
        fig, ax = plt.subplots(figsize=(6, 4))
        for (t, agent), runs in sorted(groups.items()):
            if t != task:
                continue
            for i, run in enumerate(runs):
                points = np.asarray(run["curve"], dtype=float)
                if points.size:
                    ax.plot(points[:, 0], points[:, 1], color=f"C{agents.index(agent) % 10}",
                            alpha=0.8, label=agent if i == 0 else None)  # fmt: skip
        ax.set_xlabel("env steps")
        ax.set_ylabel("training return (mean over agents)")
        ax.set_title(task)
        ax.legend()
        fig.tight_layout()
        path = REPO / "docs" / "img" / "multiagent" / f"{task}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=100)
        plt.close(fig)
        print(f"wrote {path.relative_to(REPO)}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", nargs="+", choices=sorted(TASKS), default=["relay"])
    parser.add_argument("--variant", nargs="+", choices=sorted(VARIANTS), default=["gtrxl"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--steps", type=int, default=None, help="Override every task's budget.")
    parser.add_argument("--root", type=Path, default=REPO / "runs" / "multiagent")
    parser.add_argument("--out", type=Path, default=RESULTS / "rlformer.jsonl")
    parser.add_argument("--report", action="store_true")
    parser.add_argument("--throughput", action="store_true")
    parser.add_argument("--peer-python", default=None, help="The BenchMARL venv's python.")
    parser.add_argument("--throughput-out", type=Path, default=RESULTS / "throughput.json")
    parser.add_argument(
        "--envs", type=int, nargs="+", default=[10, 8], help="rlformer's env counts (--throughput)."
    )
    args = parser.parse_args()
    if args.report:
        report()
        return
    import torch

    torch.set_num_threads(1)
    if args.throughput:
        throughput(args.peer_python, args.steps or 20_000, args.envs, args.throughput_out)
        return
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds:
        for task in args.task:
            for variant in args.variant:
                if any(r["task"] == task and r["variant"] == variant and r["seed"] == seed
                       for r in done(args.out)):  # fmt: skip
                    continue
                row = run_one(task, variant, seed, args.root, args.steps)
                with args.out.open("a") as f:
                    f.write(json.dumps(asdict(row)) + "\n")
                print(f"{task} {variant} seed {seed}: return {row.eval_return:.3f} "
                      f"success {row.eval_success} ({row.seconds:.0f} s)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
