"""The one default across suites: every task trained from its env id alone.

What a user types is ``rlformer train --set env.id=X`` (plus ``env.imports`` where the family
registers its ids that way, and the task's own kwargs where the published setting needs them):
no other key. This script trains exactly that on each task of the suites, with seeds fixed in
advance, and writes one row per run (the final evaluation, the training return, the commit).

    python benchmarks/default_suite.py --suites popgym --seeds 0 1 2 --shard 0/2
    python benchmarks/default_suite.py --suites popgym --agent task-config --shard 0/2
    python benchmarks/default_suite.py --random-play
    python benchmarks/default_suite.py --report-only

``--random-play`` scores uniform random actions on every task (100 episodes, env seeds 0-99, the
env made with the task's imports and kwargs), the floor of the normalised score.

Runs live under ``--root`` with fixed names; a killed job continues its run from the newest
checkpoint on the next start (rows are written once a run has its ``eval.json``), so the suite
is resumed by starting the same command again. ``--shard i/n`` takes every n-th run, so one job
per core splits the suite without overlap; a run that another job holds is skipped.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "results" / "default_suite" / "rows.jsonl"
RANDOM_OUT = OUT.with_name("random_play.jsonl")


@dataclass(frozen=True)
class Task:
    env_id: str
    steps: int
    keys: tuple[str, ...] = ()  # env.imports and the task's own env.kwargs, nothing else


def _popgym() -> dict[str, Task]:
    names = [
        "Autoencode", "Battleship", "Concentration", "CountRecall", "HigherLower",
        "MineSweeper", "MultiarmedBandit", "NoisyPositionOnlyCartPole",
        "NoisyPositionOnlyPendulum", "PositionOnlyCartPole", "PositionOnlyPendulum",
        "RepeatFirst", "RepeatPrevious", "VelocityOnlyCartpole",
    ]  # fmt: skip
    return {
        f"popgym-{n}": Task(f"popgym-{n}Easy-v0", 1_000_000, ("env.imports=[popgym]",))
        for n in names
    }


def _minatar() -> dict[str, Task]:
    games = ["Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders"]
    keys = ("env.imports=[minatar.gym:register_envs]", "env.kwargs.use_minimal_action_set=false")
    return {f"minatar-{g}": Task(f"MinAtar/{g}-v1", 2_000_000, keys) for g in games}


SUITES: dict[str, dict[str, Task]] = {
    "popgym": _popgym(),
    "minatar": _minatar(),
    "minigrid": {
        "minigrid-MemoryS11": Task("MiniGrid-MemoryS11-v0", 1_000_000, ("env.imports=[minigrid]",)),
        "minigrid-DoorKey-8x8": Task(
            "MiniGrid-DoorKey-8x8-v0", 1_000_000, ("env.imports=[minigrid]",)
        ),
    },  # fmt: skip
    "classic": {
        "CartPole": Task("CartPole-v1", 100_000),
        "Acrobot": Task("Acrobot-v1", 100_000),
        "Pendulum": Task("Pendulum-v1", 100_000),
        "LunarLander": Task("LunarLander-v3", 1_000_000),
        "Hopper": Task("Hopper-v5", 1_000_000),
    },
}
TASKS = {name: task for suite in SUITES.values() for name, task in suite.items()}
EVAL_EPISODES = 100


@dataclass
class Row:
    task: str
    env_id: str
    seed: int
    steps: int
    eval_return: float
    eval_success: float | None
    train_return: float | None  # mean of the last 10% of training episodes
    seconds: float
    command: str
    commit: str
    agent: str = "default"  # a key of AGENTS


# What is compared with the default: each agent is the env id alone plus these keys, or (the
# task-config agents) the task's own config from configs/memory/ plus these keys. The GRU torso
# under the same settings is the torso comparison; every agent but the default is a candidate
# for a task's ceiling.
AGENTS: dict[str, tuple[str, ...]] = {
    "default": (),
    "gru": ("model.torso=gru",),
    "task-config": (),
    "task-config-gru": ("model.torso=gru",),
}
ON_TASK_CONFIG = {"task-config", "task-config-gru"}

# The task configs that tuned a POPGym task, at the suite's budget (their own budget is
# replaced). Where a task has two, the one its documented best result came from. Tasks whose
# default reaches the best possible return on every seed need none: no ceiling is above it.
# PositionOnlyPendulum's config resolves to the default itself (reward normalisation on).
TASK_CONFIGS: dict[str, str] = {
    "popgym-Autoencode": "configs/memory/popgym_autoencode_sinusoidal_clock.yaml",
    "popgym-Battleship": "configs/memory/popgym_battleship.yaml",
    "popgym-Concentration": "configs/memory/popgym_concentration.yaml",
    "popgym-CountRecall": "configs/memory/popgym_count_recall_constant_lr.yaml",
    "popgym-HigherLower": "configs/memory/popgym_higher_lower.yaml",
    "popgym-MineSweeper": "configs/memory/popgym_minesweeper.yaml",
}


MEMORY_SUITE_OUT = REPO / "benchmarks" / "results" / "memory_suite" / "results.jsonl"
PEERS = {"recurrent_ppo": "recurrent-ppo"}
"""The memory suite's agents that are ceiling candidates here, by their name in this suite:
sb3-contrib's RecurrentPPO (benchmarks/memory_suite.py trains it with the rollout shape, step
size and discounting of the task's config there, or rl-baselines3-zoo's entry)."""


def suite_row(task: str, agent: str, result: object) -> dict:
    """Another benchmark's result (``memory_suite.Result`` or ``defaults.Result``) as a row of
    this suite under its suite task and agent names."""
    fields = ("seed", "env_steps", "score")
    seed, steps, score = (getattr(result, name) for name in fields)
    return {"task": task, "agent": agent, "seed": seed, "steps": steps, "eval_return": score}


def peer_rows(path: Path = MEMORY_SUITE_OUT) -> list[dict]:
    """The memory suite's rows of :data:`PEERS` that ran a suite task's env at the suite's
    budget, as rows of this suite (no variant's ``--set`` rows): each task is matched by the
    env id its memory-suite config makes."""
    if not path.exists():
        return []
    import memory_suite

    from rlformer.config import load_config

    by_env = {task.env_id: name for name, task in TASKS.items()}
    env_ids: dict[str, str] = {}
    rows = []
    for line in path.read_text().splitlines():
        result = memory_suite.Result(**{"commit": None, **json.loads(line)})
        spec = memory_suite.TASKS.get(result.task)
        if result.agent not in PEERS or result.overrides or spec is None:
            continue
        if result.task not in env_ids:
            config = load_config(memory_suite.CONFIGS / spec.config, list(spec.overrides))
            env_ids[result.task] = config.env.id
        name = by_env.get(env_ids[result.task])
        if name is None or memory_suite.row_budget(result) != TASKS[name].steps:
            continue
        rows.append(suite_row(name, PEERS[result.agent], result))
    return rows


DEFAULTS_OUT = REPO / "benchmarks" / "results" / "defaults" / "results.jsonl"
SB3_AGENTS = {"sb3_ppo": "sb3-ppo", "sb3_ppo_zoo": "sb3-ppo-zoo"}
"""``benchmarks/defaults.py``'s SB3 PPO agents (its defaults; rl-baselines3-zoo's tuned entry),
ceiling candidates of the fully observed tasks, by their name in this suite."""


def sb3_rows(path: Path = DEFAULTS_OUT) -> list[dict]:
    """``benchmarks/defaults.py``'s rows of :data:`SB3_AGENTS` that ran a suite task's env at the
    suite's budget, as rows of this suite."""
    if not path.exists():
        return []
    import defaults

    by_env = {task.env_id: name for name, task in TASKS.items()}
    rows = []
    for line in path.read_text().splitlines():
        result = defaults.Result(**{"commit": None, **json.loads(line)})
        name = by_env.get(defaults.TASKS[result.task][0])
        if result.agent not in SB3_AGENTS or name is None:
            continue
        if defaults.budget(result) != TASKS[name].steps:
            continue
        rows.append(suite_row(name, SB3_AGENTS[result.agent], result))
    return rows


def commit() -> str:
    done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=REPO)
    return done.stdout.strip() or "unknown"


def command(task: Task, seed: int, root: Path, name: str, agent: str = "default") -> list[str]:
    """The ``--set`` items of one run: the env id alone (and the agent's keys), then the run's
    own bookkeeping, from ``run.seed`` on."""
    return [
        f"env.id={task.env_id}",
        *task.keys,
        f"ppo.total_steps={task.steps}",
        *AGENTS[agent],
        f"run.seed={seed}",
        f"run.root={root}",
        f"run.name={name}",
        "run.progress=false",
        f"eval.episodes={EVAL_EPISODES}",
    ]


def train_return(run: Path) -> float | None:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    returns = [r["rollout/return_mean"] for r in rows if "rollout/return_mean" in r]
    return float(np.mean(returns[-max(1, len(returns) // 10) :])) if returns else None


def run_one(name: str, task: Task, seed: int, root: Path, agent: str = "default") -> Row:
    """Train (or continue) one run and return its row."""
    from rlformer.config import load_config
    from rlformer.runs.training import resume, train

    label = f"{name}-s{seed}" if agent == "default" else f"{name}-{agent}-s{seed}"
    found = sorted(root.glob(f"{label}-*"))
    start = time.perf_counter()
    items = command(task, seed, root, label, agent)
    config = TASK_CONFIGS[name] if agent in ON_TASK_CONFIG else None
    if found and not (found[-1] / "eval.json").exists():
        # The suite wrote this run directory itself, so its env.imports are its own.
        result = resume(found[-1], ["run.progress=false"], trust=True)
    else:
        result = train(load_config(None if config is None else REPO / config, items))
    run = result.run_dir
    evaluation = json.loads((run / "eval.json").read_text())
    sets = " ".join(f"--set {x}" for x in items[: len(task.keys) + 2 + len(AGENTS[agent])])
    if config is not None:
        sets = f"{config} {sets}"
    return Row(
        name, task.env_id, seed, task.steps, evaluation["return_mean"],
        evaluation.get("success_rate"), train_return(run), time.perf_counter() - start,
        f"rlformer train {sets}", commit(), agent,
    )  # fmt: skip


def done_rows(out: Path) -> list[dict]:
    return [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []


def random_play(names: list[str], out: Path) -> None:
    """Uniform random actions on each task's env as its config makes it (benchmarks/
    random_play.py); one row per task, each played once."""
    from random_play import random_returns

    from rlformer.config import load_config
    from rlformer.rollout.env_factory import import_env_modules

    played = {r["task"] for r in done_rows(out)}
    for name in names:
        if name in played:
            continue
        task = TASKS[name]
        env = load_config(None, command(task, 0, REPO / "runs", name)).env
        import_env_modules(env.imports)
        returns = random_returns(env.id, EVAL_EPISODES, seed=0, kwargs=env.kwargs)
        row = {"task": name, "env_id": task.env_id, "episodes": len(returns)}
        row |= {"return_mean": float(returns.mean()), "return_std": float(returns.std())}
        with out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"{name} random play: {row['return_mean']:.3f}", flush=True)


def popgym_aggregate(rows: list[dict], floors: dict[str, float]) -> tuple[float, float, float]:
    """POPGym's aggregate as AMAGO and POPGym report it: each run's return rescaled so that
    random play is 0 and the best possible return (1) is 1, averaged over tasks; a bootstrap
    95% CI over runs resampled within each task."""
    by_task: dict[str, list[float]] = {}
    for row in rows:
        if row["task"].startswith("popgym-") and row["task"] in floors:
            floor = floors[row["task"]]
            by_task.setdefault(row["task"], []).append((row["eval_return"] - floor) / (1 - floor))
    scores = [np.asarray(v) for v in by_task.values()]
    rng = np.random.default_rng(0)
    means = [
        np.mean([rng.choice(s, s.size).mean() for s in scores]) for _ in range(2000)
    ]  # fmt: skip
    low, high = np.quantile(means, [0.025, 0.975])
    return float(np.mean([s.mean() for s in scores])), float(low), float(high)


def report(
    out: Path, random_out: Path, peers: Path = MEMORY_SUITE_OUT, sb3: Path = DEFAULTS_OUT
) -> None:
    """Per task and agent (this suite's rows, the memory suite's peers, :func:`peer_rows`, and
    SB3 PPO, :func:`sb3_rows`): mean of the evaluation return over the seeds done, per seed,
    random play; then the default's POPGym aggregate over the POPGym tasks with rows, and the
    ceilings."""
    floors = {r["task"]: r["return_mean"] for r in done_rows(random_out)}
    every_row = done_rows(out) + peer_rows(peers) + sb3_rows(sb3)
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in every_row:
        groups.setdefault((row["task"], row.get("agent", "default")), []).append(row)
    print("| task | agent | steps | seeds | evaluation return (mean) | per seed | random play |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for (task, agent), rows in sorted(groups.items()):
        rows.sort(key=lambda r: r["seed"])
        values = [r["eval_return"] for r in rows]
        seeds = " / ".join(f"{v:.3f}" for v in values)
        floor = f"{floors[task]:.3f}" if task in floors else "not measured"
        print(
            f"| {task} | {agent} | {rows[0]['steps']:,} | {len(rows)} | {np.mean(values):.3f} "
            f"| {seeds} | {floor} |"
        )
    default = [r for (t, a), rows in groups.items() if a == "default" for r in rows]
    popgym = [r for r in default if r["task"].startswith("popgym-") and r["task"] in floors]
    if popgym:
        mean, low, high = popgym_aggregate(popgym, floors)
        runs = Counter(r["task"] for r in popgym)
        # Resampling a task's one run gives it no spread: a CI only once every task has two.
        interval = (
            f"[{low:.3f}, {high:.3f}]"
            if min(runs.values()) > 1
            else f"(no CI: one seed on {sum(n == 1 for n in runs.values())} of {len(runs)} tasks)"
        )
        print(f"\nPOPGym aggregate over {len(runs)} tasks: {mean:.3f} {interval}")
    counts = [report_ceilings(every_row, floors), report_minatar(every_row, floors)]
    within, counted = (sum(c) for c in zip(*counts, strict=True))
    print(f"\nevery suite: within {WITHIN} of the ceiling on {within} of {counted} counted tasks")


MINATAR_PUBLISHED = {
    "minatar-Asterix": (14.3, 6.5),
    "minatar-Breakout": (9.7, 14.2),
    "minatar-Freeway": (50.7, 14.4),
    "minatar-Seaquest": (4.9, 2.1),
    "minatar-SpaceInvaders": (41.5, 106.0),
}
"""(DQN, AC(0.8)) training return at 2M frames (one frame is one agent step), read off the
MinAtar README's learning curves (``img/learning_curves.gif`` at kenjyoung/MinAtar 4241f24: the
mean of 30 runs of the 100-episode moving average, full action set, sticky actions 0.1; read to
about ±0.5, ±2 where a curve is steep at 2M: Freeway's AC(0.8), Space Invaders)."""


def report_minatar(rows: list[dict], floors: dict[str, float]) -> tuple[int, int]:
    """Per MinAtar game: each seed's training return (the mean of the last tenth of training,
    as the published curves plot it) and greedy evaluation beside the published values; the
    ceiling is the better published agent, and the default's mean training return is
    normalised between random play (0) and it (1)."""
    games: dict[str, list[dict]] = {}
    for row in rows:
        if row["task"] in MINATAR_PUBLISHED and row.get("agent", "default") == "default":
            games.setdefault(row["task"], []).append(row)
    if not games:
        return 0, 0
    within = 0
    print(
        "\n| game | random play | training return: mean (per seed) | evaluation per seed "
        "| DQN, 2M | AC(0.8), 2M | normalised | verdict |"
    )
    print("| --- | ---: | --- | --- | ---: | ---: | ---: | --- |")
    for task, done in sorted(games.items()):
        done.sort(key=lambda r: r["seed"])
        train = [r["train_return"] for r in done]
        per_seed = " / ".join(f"{v:.2f}" for v in train)
        evaluation = " / ".join(f"{r['eval_return']:.2f}" for r in done)
        dqn, ac = MINATAR_PUBLISHED[task]
        floor = floors.get(task, float("nan"))
        score = (np.mean(train) - floor) / (max(dqn, ac) - floor)
        verdict = "within" if score >= 1 - WITHIN else "behind"
        within += verdict == "within"
        print(
            f"| {task} | {floor:.2f} | {np.mean(train):.2f} ({per_seed}) | {evaluation} | {dqn} "
            f"| {ac} | {score:.2f} | {verdict} |"
        )
    above = [t for t, done in games.items() if all(
        r["train_return"] > MINATAR_PUBLISHED[t][0] for r in done
    )]  # fmt: skip
    print(f"every seed's training return above DQN at 2M on {len(above)} of {len(games)} games")
    return within, len(games)


WITHIN = 0.05
"""The target's margin, in normalised score: the default within it of the task's ceiling."""


# Published scores at a suite task's budget, ceiling candidates beside the agents run here:
# rl-baselines3-zoo's benchmark.md (DLR-RM/rl-baselines3-zoo 0088472) for PPO with its tuned
# entry at 1M steps, one trained agent each, on the ids of its time (LunarLander-v2, Hopper-v3),
# scored with greedy actions as here.
PUBLISHED_CEILINGS: dict[str, tuple[float, str]] = {
    "LunarLander": (242.119, "rl-zoo PPO, published"),
    "Hopper": (2410.435, "rl-zoo PPO, published"),
}


def ceiling_verdicts(
    rows: list[dict], floors: dict[str, float], published: dict | None = None
) -> list[dict]:
    """Per task: the ceiling (the best mean of the agents other than the default, each over
    its own seeds, and of the ``published`` scores, :data:`PUBLISHED_CEILINGS` when None) and
    the default's mean over the same seeds (all its seeds against a published score),
    normalised between random play (0) and the ceiling (1).

    A task is counted toward the target only when some other agent was run on it and its
    ceiling is more than ``WITHIN`` above random play; otherwise it is listed apart.
    """
    scores = PUBLISHED_CEILINGS if published is None else published
    returns: dict[str, dict[str, dict[int, float]]] = {}
    for row in rows:
        agents = returns.setdefault(row["task"], {})
        agents.setdefault(row.get("agent", "default"), {})[row["seed"]] = row["eval_return"]
    verdicts = []
    for task, agents in sorted(returns.items()):
        if "default" not in agents or task not in floors:
            continue
        floor, default = floors[task], agents["default"]
        others = {a: float(np.mean(list(v.values()))) for a, v in agents.items() if a != "default"}
        if task in scores:
            value, label = scores[task]
            others[label] = value
        verdict: dict = {"task": task, "random": floor, "ceiling": None}
        verdict["default"] = float(np.mean(list(default.values())))
        if others:
            best = max(others, key=others.__getitem__)
            seeds = sorted(agents.get(best, {}))
            verdict |= {"ceiling": others[best], "by": best, "seeds": seeds}
            if seeds and all(seed in default for seed in seeds):
                verdict["default"] = float(np.mean([default[seed] for seed in seeds]))
        if verdict["ceiling"] is None or verdict["ceiling"] - floor <= WITHIN:
            verdict["counted"] = False
        else:
            score = (verdict["default"] - floor) / (verdict["ceiling"] - floor)
            verdict |= {"counted": True, "normalised": score, "within": score >= 1 - WITHIN}
        verdicts.append(verdict)
    return verdicts


def against(rows: list[dict], agent: str) -> dict[str, tuple[float, float, list[int]]]:
    """Per task: the default's mean and ``agent``'s mean over the seeds both ran."""
    by_task: dict[str, dict[str, dict[int, float]]] = {}
    for row in rows:
        by_agent = by_task.setdefault(row["task"], {})
        by_agent.setdefault(row.get("agent", "default"), {})[row["seed"]] = row["eval_return"]
    pairs = {}
    for task, by_agent in sorted(by_task.items()):
        default, other = by_agent.get("default", {}), by_agent.get(agent, {})
        seeds = sorted(set(default) & set(other))
        if seeds:
            means = (np.mean([default[s] for s in seeds]), np.mean([other[s] for s in seeds]))
            pairs[task] = (float(means[0]), float(means[1]), seeds)
    return pairs


def report_ceilings(rows: list[dict], floors: dict[str, float]) -> tuple[int, int]:
    # the MinAtar games' ceilings are published curves: report_minatar judges them
    verdicts = [v for v in ceiling_verdicts(rows, floors) if v["task"] not in MINATAR_PUBLISHED]
    head = "| task | random play | ceiling (agent, seeds) | default, same seeds | normalised |"
    print(f"\n{head} verdict |")
    print("| --- | ---: | --- | ---: | ---: | --- |")
    for v in verdicts:
        ceiling = "none"
        if v["ceiling"] is not None:
            seeds = ", ".join(str(seed) for seed in v["seeds"])
            ceiling = f"{v['ceiling']:.3f} ({v['by']}" + (f", seeds {seeds})" if seeds else ")")
        if v["counted"]:
            score, verdict = f"{v['normalised']:.2f}", "within" if v["within"] else "behind"
        else:
            score, verdict = "", "apart: " + ("no ceiling" if v["ceiling"] is None else "at random")
        print(
            f"| {v['task']} | {v['random']:.3f} | {ceiling} | {v['default']:.3f} | {score} "
            f"| {verdict} |"
        )
    counted = [v for v in verdicts if v["counted"]]
    within = sum(v["within"] for v in counted)
    print(f"\nwithin {WITHIN} of the ceiling on {within} of {len(counted)} counted tasks")
    pairs = against([r for r in rows if r["task"].startswith("popgym-")], "gru")
    ahead = [task for task, (default, gru, _) in pairs.items() if default >= gru]
    behind = ", ".join(sorted(set(pairs) - set(ahead))) or "none"
    print(f"at or above the GRU torso (same seeds) on {len(ahead)} of {len(pairs)} POPGym tasks;")
    print(f"behind on: {behind}")
    return within, len(counted)


def main() -> None:
    parser = argparse.ArgumentParser(description="Train every suite task from its env id alone.")
    parser.add_argument("--suites", nargs="+", default=list(SUITES), choices=list(SUITES))
    parser.add_argument("--tasks", nargs="*", help="Only these task names.")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--agent", default="default", choices=list(AGENTS))
    parser.add_argument("--shard", default="0/1", help="i/n: every n-th run from the i-th.")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--root", type=Path, default=REPO / "runs" / "default_suite")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--random-play", action="store_true", help="Score uniform random actions.")
    args = parser.parse_args()
    if args.report_only:
        report(args.out, args.out.with_name(RANDOM_OUT.name))
        return
    names = [n for suite in args.suites for n in SUITES[suite] if not args.tasks or n in args.tasks]
    if args.random_play:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        random_play(names, args.out.with_name(RANDOM_OUT.name))
        return
    import torch

    from rlformer.runs.directory import RunDirError

    torch.set_num_threads(1)
    index, count = (int(x) for x in args.shard.split("/"))
    plan = [
        (name, task, seed)
        for seed in args.seeds
        for suite in args.suites
        for name, task in SUITES[suite].items()
        if (not args.tasks or name in args.tasks)
        and (args.agent not in ON_TASK_CONFIG or name in TASK_CONFIGS)
    ][index::count]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for name, task, seed in plan:
        if any(
            (r["task"], r["seed"], r.get("agent", "default")) == (name, seed, args.agent)
            for r in done_rows(args.out)
        ):
            continue
        try:
            row = run_one(name, task, seed, args.root, args.agent)
        except RunDirError as err:  # another job holds this run: it writes the row
            print(f"{name} {args.agent} seed {seed}: skipped ({err})", flush=True)
            continue
        with args.out.open("a") as f:
            f.write(json.dumps(asdict(row)) + "\n")
        outcome = f"{row.eval_return:.3f} ({row.seconds:.0f} s)"
        print(f"{name} {args.agent} seed {seed}: {outcome}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
