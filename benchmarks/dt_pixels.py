"""Decision Transformers from pixels: MinAtar Breakout and Seaquest data of an rlformer PPO agent.

The pipeline, per game, each stage skipped when its output is there (a killed run continues):

1. **Data.** Two checkpoints of a trained PPO run (``--ppo-run GAME=RUN_DIR``) are recorded with
   ``rlformer collect`` (actions sampled, ``--random-fraction`` of them uniformly random: the
   e-noise): *expert* is the run's final checkpoint; *medium* the checkpoint whose training
   ``rollout/return_mean`` (metrics.jsonl) is closest to half of the final one, D4RL's recipe
   (medium: about a third to half of expert), unless ``--medium-step GAME=STEP`` names one.
   *medium-expert* is the two files concatenated, with both recordings' metadata. Files go to
   ``ROOT/data/GAME-DATASET.hdf5``; the env (id, kwargs, imports, time limit) is the PPO run's.
   Recording seeds (100 medium, 200 expert; slot i seeded seed + i) are disjoint from the
   evaluation's (0..episodes-1).
2. **Training.** Per dataset, method and seed, one ``algo: dt`` run under ``--root``:
   ``dt`` (plain DT), ``mdt`` (memory DT: ``dt.memory_segments`` consecutive K-step windows
   carrying the core's memory) and ``bc`` (behaviour cloning: ``dt.condition_on_return=false``,
   the same network with its returns-to-go zeroed). Same encoder (``dt.cnn=minatar``), model,
   batch, gradient steps and every other flag; ``--dt-set KEY=VALUE`` changes all three.
3. **Evaluation.** rlformer's own (``rlformer eval --target-return``'s
   :func:`~rlformer.evaluation.report.evaluate_task`): greedy actions, ``--episodes`` episodes
   per target (``--target-episodes`` at the target itself, where the score needs more), the
   same env seeds for every run. A finished run is not trained again: a new ``--out`` with
   other episode counts re-evaluates it. The score is the return at the target fixed
   before training, the expert data's mean episode return; the sweep plays ``--sweep``
   fractions of it. Beside them, the dataset's mean and best episode return.
4. **Rows and report.** One JSON row per run in ``--out``; a markdown report (method mean over
   seeds with a bootstrap 95% CI, per game and dataset) printed and written beside it
   (``--report-only`` re-renders it from the rows).

Dataset statistics count whole episodes: the episodes the recording cut off at its end (the last
one of each env slot, marked truncated) are left out of the mean and best.

**Defaults, and why.** The DT paper's Atari setting (K = 30, 6 layers, width 128, 8 heads,
batch 128) trains at seconds per step on one CPU core. Kept: K = 30 (MinAtar shows motion in a
trail channel, so the context is for the return bookkeeping and the memory comparison, not for
frame stacking), the paper's 16 features per head and its dropout of 0.1. Smaller: 3 layers of
width 64 (4 heads), batch 32, 5,000 gradient steps (160k windows: about 24 passes over the 200k
steps of the mixed data, 48 over a 100k one) at learning rate 3e-4 after 500 warm-up steps.
Returns-to-go are divided by the expert data's best episode return (at least 1), so they enter
the network at about 0..1; the timestep table covers the longest recorded episode. The memory DT
reads 2 consecutive windows per sample (its memory reaching one window back per layer), so its
gradient step costs about 2.5x the plain DT's.

Timed at these defaults with one torch thread on a 2-core machine busy with two other jobs (upper
bounds): a gradient step takes 0.23 s (DT, BC) or 0.55 s (memory DT), one step of the 20
evaluation envs 35-43 ms. One (game, dataset, method, seed) run is then about 19 minutes of
training (46 for the memory DT) plus 5 targets x the longest evaluation episode x 35 ms (6
minutes at 2,000-step episodes); the full grid (2 games x 3 datasets x 3 methods x 5 seeds)
about 50 hours on one core. Two invocations with ``--games breakout`` and ``--games seaquest``
share ``--out`` and ``--root`` safely, one core each; so do invocations with ``--only-seed S``
and one ``--methods`` each, one process per run (how ten runs share one GPU). Training runs on
``run.device`` (auto: the GPU when there is one); ``--eval-device cuda`` evaluates there too.

    .venv/bin/python benchmarks/dt_pixels.py \\
        --ppo-run breakout=runs/minatar/ppo_breakout_seed0-TIMESTAMP \\
        --ppo-run seaquest=runs/minatar/ppo_seaquest_seed0-TIMESTAMP
    .venv/bin/python benchmarks/dt_pixels.py --report-only
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from memory_suite import CODE_VERSION

from rlformer.config import EnvConfig, TrainConfig, load_config, load_saved_config
from rlformer.data.d4rl_format import read_d4rl, write_d4rl
from rlformer.data.episodes import Dataset
from rlformer.evaluation.report import evaluate_task
from rlformer.evaluation.statistics import ScoreSummary, summarize_scores
from rlformer.policies.registry import load_policy
from rlformer.runs.checkpoints import checkpoint_candidates
from rlformer.runs.directory import read_metrics
from rlformer.runs.training import resume, train

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "benchmarks" / "results" / "dt_pixels" / "results.jsonl"
GAMES = {"breakout": "MinAtar/Breakout-v1", "seaquest": "MinAtar/Seaquest-v1"}
DATASETS = ("medium", "expert", "medium-expert")
METHODS = ("dt", "mdt", "bc")
METHOD_NAMES = {"dt": "DT", "mdt": "memory DT", "bc": "BC (DT, no returns)"}
RECORDING_SEEDS = {"medium": 100, "expert": 200}
CHECKPOINT_EVERY = 10
"""DT iterations (``dt.log_every`` gradient steps each) between the checkpoints of a run."""


# ------------------------------------------------------------------ the PPO run's policies
@dataclass(frozen=True)
class Checkpoint:
    """One PPO checkpoint and the training return logged at its step."""

    path: Path
    step: int
    training_return: float


def checkpoint_returns(run_dir: Path) -> list[Checkpoint]:
    """The run's checkpoints, newest first, each with the last ``rollout/return_mean`` logged
    at or before its step (NaN where none was)."""
    logged = [
        (int(row["step"]), float(row["rollout/return_mean"]))
        for row in read_metrics(run_dir)
        if "rollout/return_mean" in row
    ]
    found = []
    for path in checkpoint_candidates(run_dir):
        match = re.fullmatch(r"ckpt_(\d+)\.pt", path.name)
        if match is None:
            continue
        step = int(match.group(1))
        before = [value for at, value in logged if at <= step]
        found.append(Checkpoint(path.resolve(), step, before[-1] if before else float("nan")))
    return found


def choose_policies(run_dir: Path, medium_step: int | None) -> tuple[Checkpoint, Checkpoint]:
    """(medium, expert): expert is the final checkpoint, medium the one at ``medium_step`` or
    the earlier one whose training return is closest to half of the expert's."""
    found = checkpoint_returns(run_dir)
    if not found:
        raise SystemExit(f"{run_dir}: no checkpoint to record from")
    expert, earlier = found[0], found[1:]
    if medium_step is not None:
        chosen = [c for c in found if c.step == medium_step]
        if not chosen:
            steps = ", ".join(str(c.step) for c in reversed(found))
            raise SystemExit(f"{run_dir}: no checkpoint at step {medium_step} (it has {steps})")
        return chosen[0], expert
    usable = [c for c in earlier if np.isfinite(c.training_return)]
    if not usable:
        raise SystemExit(
            f"{run_dir}: no earlier checkpoint with a logged training return to be the medium "
            "policy; name one with --medium-step GAME=STEP"
        )
    half = 0.5 * expert.training_return
    return min(usable, key=lambda c: (abs(c.training_return - half), c.step)), expert


def ppo_env(game: str, run_dir: Path, expert: Checkpoint) -> EnvConfig:
    """The PPO run's env section (the data's env, so also the DTs'), checked to be ``game``'s
    and to have finished training (its final checkpoint is the expert)."""
    saved = load_saved_config(run_dir / "config.yaml")
    if saved.env.id != GAMES[game]:
        raise SystemExit(f"{run_dir}: trained on {saved.env.id}, not {GAMES[game]} ({game})")
    if saved.algo != "ppo" or expert.step < saved.ppo.total_steps:
        raise SystemExit(
            f"{run_dir}: not a finished PPO run (newest checkpoint at step {expert.step} of "
            f"{saved.ppo.total_steps}); its final checkpoint is the expert"
        )
    return saved.env


# ------------------------------------------------------------------ datasets
@dataclass(frozen=True)
class DataStats:
    """Whole-episode statistics of a dataset (recording cut-offs left out)."""

    mean: float
    best: float
    episodes: int
    transitions: int
    longest: int  # steps of the longest episode, cut-offs included


def whole_episode_returns(dataset: Dataset) -> np.ndarray:
    """Returns of the episodes that ended in the env: the last ``num_envs`` episodes of a
    recording that did not terminate are the slots' cut-offs (an env's own time limit in
    those last few episodes is counted as a cut-off too)."""
    slots = int(dataset.metadata.get("num_envs", 0))
    episodes = dataset.episodes
    head, tail = episodes[: len(episodes) - slots], episodes[len(episodes) - slots :]
    kept = head + [e for e in tail if e.terminated]
    return np.array([e.episode_return for e in kept], dtype=np.float64)


def data_stats(parts: Sequence[Dataset]) -> DataStats:
    """Statistics of one recording, or of a mixture from its recordings."""
    returns = np.concatenate([whole_episode_returns(d) for d in parts])
    if returns.size == 0:
        raise SystemExit(
            f"{parts[0].source}: no episode ended within the recording; record more transitions"
        )
    return DataStats(
        float(returns.mean()),
        float(returns.max()),
        int(returns.size),
        sum(d.num_transitions for d in parts),
        max(len(e) for d in parts for e in d.episodes),
    )


def collect(policy: Checkpoint, out: Path, args: argparse.Namespace, seed: int) -> None:
    """Record ``out`` with ``rlformer collect``: the checkpoint's sampled actions with
    e-noise. Its saved env imports call MinAtar's registration, hence --trust-checkpoint (the
    PPO run was named on this command line)."""
    command = [
        *(sys.executable, "-m", "rlformer.cli", "collect"),
        *("--policy", str(policy.path), "--steps", str(args.transitions), "--out", str(out)),
        *("--seed", str(seed), "--num-envs", str(args.num_envs), "--stochastic"),
        *("--random-fraction", str(args.random_fraction), "--trust-checkpoint"),
    ]
    print(f"recording {out.name} from {policy.path}", flush=True)
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"rlformer collect for {out} failed: {done.stderr.strip()}")


def check_recording(
    path: Path, data: Dataset, policy: Checkpoint, args: argparse.Namespace
) -> None:
    """An existing file is reused only if it is the recording this invocation would make.

    The policy counts as the same by its run folder and checkpoint name, not by where the run
    lies: a PPO run moved or its parent renamed keeps its recordings."""
    meta = data.metadata
    expected = {"random_fraction": args.random_fraction, "num_envs": args.num_envs}
    wrong = [f"{k} {meta.get(k)!r} (wanted {v!r})" for k, v in expected.items() if meta.get(k) != v]
    if Path(str(meta.get("policy"))).parts[-3:] != policy.path.parts[-3:]:
        wrong.insert(0, f"policy {meta.get('policy')!r} (wanted {str(policy.path)!r})")
    if data.num_transitions != args.transitions:
        wrong.append(f"{data.num_transitions} transitions (wanted {args.transitions})")
    if wrong:
        raise SystemExit(
            f"{path} was recorded otherwise: {'; '.join(wrong)}; remove it or use another --root"
        )


def mix(medium: Dataset, expert: Dataset, out: Path) -> None:
    """medium-expert: both recordings' episodes in one file, both metadata kept in ``parts``."""
    parts, shared = [], {}
    for name, data in (("medium", medium), ("expert", expert)):
        meta = {k: v for k, v in data.metadata.items() if k != "episode_returns"}
        parts.append({"dataset": name, "file": data.source.removeprefix("d4rl:"), **meta})
    for key, value in medium.metadata.items():
        if key != "episode_returns" and expert.metadata.get(key) == value:
            shared[key] = value
    returns = [e.episode_return for d in (medium, expert) for e in d.episodes]
    metadata = {**shared, "policy": "medium-expert", "parts": parts, "episode_returns": returns}
    write_d4rl(out, [*medium.episodes, *expert.episodes], metadata)


@dataclass(frozen=True)
class GameData:
    """One game's env, datasets and their statistics."""

    env: EnvConfig
    files: dict[str, Path]
    stats: dict[str, DataStats]


def prepare_game(game: str, run_dir: Path, args: argparse.Namespace) -> GameData:
    """Record (or reuse) the game's three datasets; their files and statistics."""
    medium, expert = choose_policies(run_dir, args.medium_step.get(game))
    env = ppo_env(game, run_dir, expert)
    print(
        f"{game}: expert = step {expert.step} (training return {expert.training_return:.2f}), "
        f"medium = step {medium.step} ({medium.training_return:.2f})",
        flush=True,
    )
    folder = args.root / "data"
    folder.mkdir(parents=True, exist_ok=True)
    files = {name: folder / f"{game}-{name}.hdf5" for name in DATASETS}
    loaded: dict[str, Dataset] = {}
    for level, policy in (("medium", medium), ("expert", expert)):
        if not files[level].exists():
            collect(policy, files[level], args, RECORDING_SEEDS[level])
        loaded[level] = read_d4rl(files[level])
        check_recording(files[level], loaded[level], policy, args)
    if not files["medium-expert"].exists():
        mix(loaded["medium"], loaded["expert"], files["medium-expert"])
    stats = {
        "medium": data_stats([loaded["medium"]]),
        "expert": data_stats([loaded["expert"]]),
        "medium-expert": data_stats([loaded["medium"], loaded["expert"]]),
    }
    for name, s in stats.items():
        print(
            f"  {name}: {s.transitions:,} transitions, {s.episodes} whole episodes, "
            f"return mean {s.mean:.2f}, best {s.best:.2f}",
            flush=True,
        )
    return GameData(env, files, stats)


# ------------------------------------------------------------------ training
def env_overrides(env: EnvConfig) -> list[str]:
    """The env section as ``--set`` items (JSON values are YAML)."""
    return [f"env.{key}={json.dumps(value)}" for key, value in env.model_dump(mode="json").items()]


def shared_settings(args: argparse.Namespace, data: GameData) -> list[str]:
    """What every method's run shares (model, optimiser, steps, scales), ``--dt-set`` last."""
    expert = data.stats["expert"]
    k = args.context
    return [
        "dt.cnn=minatar",
        f"dt.context={k}",
        f"dt.return_scale={max(1.0, expert.best)}",
        f"dt.max_timestep={max(d.longest for d in data.stats.values()) + 1}",
        f"dt.batch_size={args.batch}",
        f"dt.learning_rate={args.lr}",
        f"dt.warmup_steps={args.warmup}",
        f"dt.train_steps={args.steps}",
        f"dt.log_every={min(100, args.steps)}",
        f"dt.core.n_layers={args.layers}",
        f"dt.core.d_model={args.width}",
        f"dt.core.n_heads={args.heads}",
        f"dt.core.d_ff={4 * args.width}",
        f"dt.core.dropout={args.dropout}",
        f"dt.core.memory_length={3 * k}",  # a whole window (3 tokens a step)
        f"dt.target_returns=[{expert.mean}]",
        *args.dt_set,
    ]


def method_settings(method: str, args: argparse.Namespace) -> list[str]:
    if method == "mdt":
        return [f"dt.memory_segments={args.mdt_segments}"]
    if method == "bc":
        return ["dt.condition_on_return=false"]
    return []


def variant(settings: Sequence[str]) -> str:
    """Short digest of a run's settings: rows and run directories of other settings differ."""
    return hashlib.sha1(json.dumps(list(settings)).encode()).hexdigest()[:8]


def run_config(
    game: str, dataset: str, method: str, seed: int, args: argparse.Namespace, data: GameData
) -> tuple[TrainConfig, str]:
    """One run's config and its settings digest."""
    settings = [
        *env_overrides(data.env),
        f"dt.dataset={data.files[dataset].resolve()}",
        *shared_settings(args, data),
        *method_settings(method, args),
    ]
    digest = variant(settings)
    name = f"{game}-{dataset}-{method}-seed{seed}-{args.steps}-{digest}"
    run = [
        "algo=dt",
        f"run.name={name}",
        f"run.root={args.root / 'runs'}",
        f"run.seed={seed}",
        "run.progress=false",
        f"run.checkpoint_every={CHECKPOINT_EVERY}",
        "run.keep_checkpoints=2",
        "eval.episodes=0",  # evaluated below, on every target of the sweep
    ]
    return load_config(None, [*run, *settings]), digest


def progress(run_dir: Path) -> int:
    """Gradient steps of the run's newest checkpoint (0: none)."""
    steps = [
        int(m.group(1))
        for p in (run_dir / "checkpoints").glob("ckpt_*.pt")
        if (m := re.fullmatch(r"ckpt_(\d+)\.pt", p.name))
    ]
    return max(steps, default=0)


def train_run(cfg: TrainConfig) -> tuple[Path, float, bool]:
    """(run directory, seconds trained here, resumed): a finished run of this name is reused,
    a killed one resumed from its newest checkpoint (with the dataset where it lies now, should
    the root have moved), else a new one trained."""
    root, name = Path(cfg.run.root), cfg.run.name
    pattern = re.compile(rf"{re.escape(name)}-\d{{8}}-\d{{6}}(-\d+)?")
    earlier = [p for p in root.glob(f"{name}-*") if p.is_dir() and pattern.fullmatch(p.name)]
    started = sorted((progress(p), p.name, p) for p in earlier if progress(p) > 0)
    start = time.perf_counter()
    if started and started[-1][0] >= cfg.dt.train_steps:
        return started[-1][2], 0.0, True
    if started:
        dataset_here = [f"dt.dataset={cfg.dt.dataset}"]
        # trust: its env imports are ours
        run_dir = resume(started[-1][2], dataset_here, trust=True).run_dir
        return run_dir, time.perf_counter() - start, True
    run_dir = train(cfg).run_dir
    return run_dir, time.perf_counter() - start, False


def evaluate_run(
    run_dir: Path, targets: Sequence[float], episodes: int, device: str = "cpu"
) -> list[ScoreSummary]:
    """Each target's statistics, in order, as ``rlformer eval RUN --target-return ...
    --device DEVICE`` computes them (greedy actions, env seeds 0..episodes-1 for every target)."""
    policy = load_policy(run_dir, trust=True, device=device)  # its env imports are ours
    env = policy.info.training_env
    assert env is not None
    reports = evaluate_task(policy, env, episodes, seeds=1, targets=list(targets))
    return [r.summary for r in reports]


# ------------------------------------------------------------------ rows
@dataclass
class Row:
    task: str
    dataset: str
    method: str
    seed: int
    train_steps: int
    target: float  # the expert data's mean episode return, fixed before training
    score: float  # mean return at the target
    score_ci: list[float]  # bootstrap 95% CI over the episodes
    sweep: list[dict[str, float]]  # fraction, target, mean, ci_low, ci_high
    dataset_mean: float
    dataset_best: float
    dataset_episodes: int
    episodes: int
    variant: str
    commit: str | None
    seconds: float  # training (this process's part of a resumed run) and evaluation
    train_seconds: float
    resumed: bool
    run_dir: str
    settings: dict[str, Any] = field(default_factory=dict)
    sweep_episodes: int | None = None  # per sweep fraction; None: ``episodes``, as the score


def row_key(row: Row) -> tuple[Any, ...]:
    return (row.task, row.dataset, row.method, row.seed, row.train_steps, row.variant)


def read_rows(out: Path) -> list[Row]:
    if not out.exists():
        return []
    return [Row(**json.loads(line)) for line in out.read_text().splitlines() if line.strip()]


def measure(
    game: str, dataset: str, method: str, seed: int, args: argparse.Namespace, data: GameData
) -> Row | None:
    """Train and evaluate one run; None if ``--out`` has its row."""
    cfg, digest = run_config(game, dataset, method, seed, args, data)
    key = (game, dataset, method, seed, args.steps, digest)
    if key in {row_key(r) for r in read_rows(args.out)}:
        return None
    print(f"{game} {dataset} {method} seed {seed}: training", flush=True)
    run_dir, train_seconds, resumed = train_run(cfg)
    start = time.perf_counter()
    target = cfg.dt.target_returns[0]
    fractions = sorted({*args.sweep, 1.0})
    target_episodes = args.target_episodes or args.episodes
    if target_episodes == args.episodes:
        summaries = evaluate_run(
            run_dir, [f * target for f in fractions], args.episodes, args.eval_device
        )
        scored = summaries[fractions.index(1.0)]
    else:  # the score on more episodes than the sweep; the sweep's 1x column from the score
        others = [f for f in fractions if f != 1.0]
        scored = evaluate_run(run_dir, [target], target_episodes, args.eval_device)[0]
        summaries = evaluate_run(
            run_dir, [f * target for f in others], args.episodes, args.eval_device
        )
        summaries.insert(fractions.index(1.0), scored)
    seconds = train_seconds + time.perf_counter() - start
    sweep = [
        {"fraction": f, "target": f * target, "mean": s.mean}
        | {"ci_low": s.mean_ci[0], "ci_high": s.mean_ci[1]}
        for f, s in zip(fractions, summaries, strict=True)
    ]
    stats = data.stats[dataset]
    return Row(
        game,
        dataset,
        method,
        seed,
        args.steps,
        target,
        scored.mean,
        list(scored.mean_ci),
        sweep,
        stats.mean,
        stats.best,
        stats.episodes,
        target_episodes,
        digest,
        CODE_VERSION,
        seconds,
        train_seconds,
        resumed,
        str(run_dir),
        settings={"shared": shared_settings(args, data), "method": method_settings(method, args)},
        sweep_episodes=args.episodes,
    )


# ------------------------------------------------------------------ report
def _ci(values: Sequence[float]) -> str:
    s = summarize_scores(list(values), seed=0)
    return f"{s.mean:.2f} [{s.mean_ci[0]:.2f}, {s.mean_ci[1]:.2f}]"


def _verdict(rows: list[Row]) -> str | None:
    """The benchmark's target on one game's mixed data: DT above BC with non-overlapping CIs, and
    DT at least the data's mean return."""
    by_method = {m: [r.score for r in rows if r.method == m] for m in ("dt", "bc")}
    if not all(by_method.values()):
        return None
    dt, bc = (summarize_scores(by_method[m], seed=0) for m in ("dt", "bc"))
    separate = dt.mean_ci[0] > bc.mean_ci[1]
    mean = rows[0].dataset_mean
    return (
        f"DT above BC with CIs apart: {'yes' if separate else 'no'} (DT's lower bound "
        f"{dt.mean_ci[0]:.2f}, BC's upper {bc.mean_ci[1]:.2f}); DT mean {dt.mean:.2f} "
        f"{'>=' if dt.mean >= mean else '<'} the data's mean {mean:.2f}"
    )


def report(rows: list[Row]) -> str:
    """Markdown: per game a table of dataset x method, mean over seeds [95% CI]."""
    lines = [
        "# Decision Transformers from pixels (MinAtar)",
        "",
        "Return at the target fixed before training (the expert data's mean episode return): "
        "mean over seeds [bootstrap 95% CI]; sweep columns: mean over seeds at that fraction of "
        "the target. Data mean / best: whole episodes of the dataset.",
    ]
    for game in dict.fromkeys(r.task for r in rows):
        mine = [r for r in rows if r.task == game]
        fractions = sorted({s["fraction"] for r in mine for s in r.sweep})
        lines += ["", f"## {game} ({GAMES.get(game, game)}), target {mine[0].target:.2f}", ""]
        sweep_head = " | ".join(f"{f:g}x" for f in fractions)
        lines.append(
            "| data | data mean | data best | method | seeds | steps | at target [95% CI] | "
            f"{sweep_head} |"
        )
        lines.append("|" + " --- |" * (7 + len(fractions)))
        for dataset in [d for d in DATASETS if any(r.dataset == d for r in mine)]:
            for steps in sorted({r.train_steps for r in mine if r.dataset == dataset}):
                for method in METHODS:
                    cell = [
                        r
                        for r in mine
                        if (r.dataset, r.train_steps, r.method) == (dataset, steps, method)
                    ]
                    if cell:
                        lines.append(_table_row(cell, fractions))
        scored = sorted({r.episodes for r in mine})
        swept = sorted({r.sweep_episodes or r.episodes for r in mine})
        lines += [
            "",
            f"Evaluation episodes per run: {'/'.join(map(str, scored))} at the target, "
            f"{'/'.join(map(str, swept))} at each other fraction.",
        ]
        mixed = [r for r in mine if r.dataset == "medium-expert"]
        for steps in sorted({r.train_steps for r in mixed}):
            verdict = _verdict([r for r in mixed if r.train_steps == steps])
            if verdict:
                lines += ["", f"medium-expert, {steps} steps: {verdict}."]
    return "\n".join(lines) + "\n"


def _table_row(cell: list[Row], fractions: list[float]) -> str:
    """One (dataset, steps, method) line of the report: runs trained for different numbers of
    steps are never pooled, since more steps change the score (pixels.md)."""
    first = cell[0]
    sweep = [
        np.mean([s["mean"] for r in cell for s in r.sweep if s["fraction"] == f]) for f in fractions
    ]
    return (
        f"| {first.dataset} | {first.dataset_mean:.2f} | {first.dataset_best:.2f} | "
        f"{METHOD_NAMES[first.method]} | {len(cell)} | {first.train_steps} | "
        f"{_ci([r.score for r in cell])} | " + " | ".join(f"{v:.2f}" for v in sweep) + " |"
    )


def write_report(rows: list[Row], path: Path) -> None:
    text = report(rows)
    print(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path}")


# ------------------------------------------------------------------ command line
def _pairs(items: Sequence[str], flag: str) -> dict[str, str]:
    """``GAME=VALUE`` items as a dict, games checked."""
    pairs = {}
    for item in items:
        game, sep, value = item.partition("=")
        if not sep or game not in GAMES:
            raise SystemExit(f"{flag} {item!r}: expected GAME=VALUE with GAME one of {list(GAMES)}")
        pairs[game] = value
    return pairs


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    add = parser.add_argument
    add("--ppo-run", action="append", default=[], help="GAME=RUN_DIR of a trained PPO run")
    add("--medium-step", action="append", default=[], help="GAME=STEP: the medium checkpoint")
    add("--games", nargs="+", choices=list(GAMES), help="default: those given --ppo-run")
    add("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    add("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    add("--seeds", type=int, default=5)
    add(
        "--only-seed",
        type=int,
        action="append",
        help="run only these of the --seeds seeds (repeatable): one process per seed",
    )
    add("--transitions", type=int, default=100_000, help="per recorded dataset")
    add("--random-fraction", type=float, default=0.1, help="e-noise of the recordings")
    add("--num-envs", type=int, default=8, help="env slots of the recordings")
    add("--steps", type=int, default=5000, help="gradient steps per run")
    add("--context", type=int, default=30, help="K")
    add("--layers", type=int, default=3)
    add("--width", type=int, default=64)
    add("--heads", type=int, default=4)
    add("--batch", type=int, default=32)
    add("--lr", type=float, default=3e-4)
    add("--warmup", type=int, default=500)
    add("--dropout", type=float, default=0.1)
    add("--mdt-segments", type=int, default=2, help="windows per memory-DT sample")
    add("--dt-set", action="append", default=[], help="KEY=VALUE for every run (repeatable)")
    add("--episodes", type=int, default=20, help="evaluation episodes per target")
    add("--eval-device", default="cpu", help="where the DTs act in evaluation: auto, cpu or cuda")
    add(
        "--target-episodes",
        type=int,
        default=None,
        help="evaluation episodes at the target itself (default: --episodes)",
    )
    add("--sweep", default="0.25,0.5,0.75,1,1.25", help="fractions of the target to play")
    add("--root", type=Path, default=Path("runs/dt_pixels"), help="data and run directories")
    add("--out", type=Path, default=DEFAULT_OUT, help="result rows (JSONL)")
    add("--report", type=Path, help="markdown report (default: --out with .md)")
    add("--report-only", action="store_true")
    args = parser.parse_args(argv)
    args.sweep = [float(x) for x in args.sweep.split(",") if x.strip()]
    args.ppo_run = {game: Path(path) for game, path in _pairs(args.ppo_run, "--ppo-run").items()}
    args.medium_step = {
        game: int(step) for game, step in _pairs(args.medium_step, "--medium-step").items()
    }
    args.games = args.games or list(args.ppo_run)
    args.report = args.report or args.out.with_suffix(".md")
    args.root = args.root.resolve()  # recordings are written by a process started in the repo
    outside = [s for s in args.only_seed or [] if not 0 <= s < args.seeds]
    if outside:
        raise SystemExit(
            f"--only-seed {outside[0]}: seeds run from 0 to --seeds - 1 ({args.seeds - 1})"
        )
    missing = [g for g in args.games if g not in args.ppo_run]
    if not args.report_only and (missing or not args.games):
        raise SystemExit(f"give --ppo-run GAME=RUN_DIR for {missing or list(GAMES)}")
    return args


def chosen_seeds(args: argparse.Namespace) -> list[int]:
    """The seeds this invocation runs: ``--only-seed`` among the first ``--seeds``."""
    chosen = set(args.only_seed or range(args.seeds))
    return [seed for seed in range(args.seeds) if seed in chosen]


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(1)
    if not args.report_only:
        for game in args.games:
            data = prepare_game(game, args.ppo_run[game], args)
            for dataset in args.datasets:
                for seed in chosen_seeds(args):
                    for method in args.methods:
                        row = measure(game, dataset, method, seed, args, data)
                        if row is None:
                            continue
                        args.out.parent.mkdir(parents=True, exist_ok=True)
                        with args.out.open("a") as handle:
                            handle.write(json.dumps(asdict(row)) + "\n")
                        print(
                            f"  score {row.score:.2f} at target {row.target:.2f} "
                            f"({row.seconds:.0f} s)",
                            flush=True,
                        )
    write_report(read_rows(args.out), args.report)


if __name__ == "__main__":
    main()
