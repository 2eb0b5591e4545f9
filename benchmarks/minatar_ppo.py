"""MinAtar PPO: rlformer's PPO with MinAtar's own network on Breakout and Seaquest, several seeds
at the budget of the published MinAtar curves, reported beside those published figures.

Each (game, seed) is one ``rlformer train`` run of ``configs/minatar/ppo_GAME.yaml`` (its header
says why each setting) named ``ppo_GAME_seedS``, under ``--root``:

* a run of that name whose saved config trains ``--steps`` env steps with the same settings
  (the config's env, rollout, model and ppo sections with ``--set`` applied, compared after
  loading, so a key added since at its default still matches) and which finished (it has
  ``eval.json``, the final evaluation) is not trained again;
* one killed before it finished is continued from its newest checkpoint with
  ``rlformer train --resume DIR --trust-checkpoint`` (the config's ``env.imports`` entry names a
  function, which a run directory may call only when trusted); one that another process holds
  (rlformer's run lock) is left to that process;
* otherwise a new run starts. Every checkpoint is kept (``run.keep_checkpoints``): the offline-data
  benchmark ``benchmarks/dt_pixels.py`` picks its medium policy among them.

A run whose saved ``ppo.total_steps`` differs from ``--steps``, or whose settings differ, is
another measurement and is ignored; rows are keyed by (game, seed, budget, settings digest), so
``--set ppo.learning_rate=...`` measures a variant beside the config's rows. When a run has
finished, one JSON row goes to ``--out``: the final evaluation's mean and
std over its episodes (``eval.json``: 100 episodes, sampled actions), the training
``rollout/return_mean`` at the end (the last 100 training episodes, sampled actions: what the
published curves plot), the training loop's seconds (the sum of every iteration's
``time/iteration_s`` in metrics.jsonl, so a resumed run counts each part once, and checkpoint
writes and the final evaluation are left out), env steps/s, and the commit of the checkout that
wrote the row. ``source`` says how the run came to finish: ``trained`` or ``resumed`` here, or
``found`` already finished under ``--root`` (its commit is then the checkout that wrote the row,
not necessarily the one that trained).

The report, per game, budget and settings (titled by the ppo keys that differ from the config
file): mean [bootstrap 95% CI] over seeds of both figures, the
published figures beside them labelled as published with their source (:data:`PUBLISHED`), and a
learning-curve PNG (training return against env steps, one line per seed) next to the rows. It
is printed and written to ``--out`` with ``.md``. ``--report-only`` trains nothing: it adds rows
for runs found finished under ``--root`` (reading them only) and renders the report again.

    .venv/bin/python benchmarks/minatar_ppo.py                  # 2 games x 3 seeds x 5M steps
    .venv/bin/python benchmarks/minatar_ppo.py --games breakout --seeds 1 --steps 100000
    .venv/bin/python benchmarks/minatar_ppo.py --games breakout --set ppo.learning_rate=0.00025
    .venv/bin/python benchmarks/minatar_ppo.py --report-only
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import torch
import yaml
from memory_suite import CODE_VERSION

from rlformer.config import ConfigError, TrainConfigBase, load_config, load_saved_config
from rlformer.evaluation.plots import plot_learning_curves
from rlformer.evaluation.statistics import summarize_scores
from rlformer.runs.directory import RunLock, read_metrics

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "benchmarks" / "results" / "minatar" / "results.jsonl"
DEFAULT_ROOT = Path("runs/minatar")
GAMES = {"breakout": "MinAtar/Breakout-v1", "seaquest": "MinAtar/Seaquest-v1"}
KEEP_CHECKPOINTS = 60
"""Checkpoints kept per run, at least: every one a 5M-step run of the configs writes (48 on the
way, one every 100 iterations of 1,024 steps, and the final one)."""
CURVE_METRIC = "rollout/return_mean"
INTERRUPTED = (128 + signal.SIGINT, 128 + signal.SIGTERM)
"""``rlformer train``'s exit codes after SIGINT or SIGTERM (checkpoint written)."""


def config_path(game: str) -> Path:
    return REPO / "configs" / "minatar" / f"ppo_{game}.yaml"


TRAINING_SECTIONS = ("env", "rollout", "model", "ppo")
"""The config sections whose values make a run another measurement (run.* names and places it)."""


def configured(game: str, sets: Sequence[str] = ()) -> TrainConfigBase:
    """The game's config file with ``--set`` items applied."""
    return load_config(config_path(game), list(sets))


def training_settings(cfg: TrainConfigBase) -> dict[str, dict]:
    """The sections of :data:`TRAINING_SECTIONS`, without the budget (a key of its own)."""
    dumped = cfg.model_dump(mode="json")
    sections = {name: dumped[name] for name in TRAINING_SECTIONS}
    sections["ppo"] = {k: v for k, v in sections["ppo"].items() if k != "total_steps"}
    return sections


def settings_digest(cfg: TrainConfigBase) -> str:
    """Short digest of :func:`training_settings`: runs and rows of other settings differ."""
    text = json.dumps(training_settings(cfg), sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:8]


def run_name(game: str, seed: int) -> str:
    """The run's name; its directory is ``NAME-YYYYmmdd-HHMMSS`` (``-2``... on a clash)."""
    return f"ppo_{game}_seed{seed}"


# ------------------------------------------------------------------ published figures
MINATAR_README = (
    "MinAtar README (Young & Tian 2019), img/learning_curves.gif: moving average of the returns "
    "of 100 training episodes, 30 runs, at 5M frames (one env step per frame), all 6 actions, "
    "sticky actions 0.1, difficulty ramping; read off the plot"
)
PGX_EXAMPLE = (
    "Pgx MinAtar PPO example (examples/minatar-ppo, assets/GAME.png): evaluation return of the "
    "current policy (100 episodes, sampled actions) against wall-clock seconds (JIT + training); "
    "Pgx's JAX port of MinAtar, minimal action set, sticky actions 0.1; number of runs not "
    "stated; read off the plot. Its last point is after the defaults' 38 updates of 4,096 envs "
    "x 128 steps = 19,922,944 steps (the README's command keeps them); no earlier point's step, "
    "so no value at 5M steps, can be derived from a seconds axis"
)
PGX_STEPS = 38 * 4096 * 128


@dataclass(frozen=True)
class Published:
    """One published figure: who, what it measures, and its value at the step it can be read.

    ``value`` is None where it cannot be read at any derivable step; ``at_steps`` is the step
    the value belongs to (None with the value).
    """

    agent: str
    source: str  # a key of SOURCES
    measure: Literal["training", "evaluation"]
    value: float | None
    at_steps: int | None


SOURCES = {"MinAtar README": MINATAR_README, "Pgx PPO example": PGX_EXAMPLE}
PUBLISHED: dict[str, tuple[Published, ...]] = {
    "breakout": (
        Published("DQN", "MinAtar README", "training", 10.0, 5_000_000),
        Published("AC(0.8)", "MinAtar README", "training", 17.5, 5_000_000),
        Published("PPO", "Pgx PPO example", "evaluation", 50.0, PGX_STEPS),
    ),
    "seaquest": (
        Published("DQN", "MinAtar README", "training", 20.0, 5_000_000),
        Published("AC(0.8)", "MinAtar README", "training", 15.0, 5_000_000),
        Published("PPO", "Pgx PPO example", "evaluation", 54.0, PGX_STEPS),
    ),
}
GAME_NOTES = {
    "seaquest": "MinAtar's Seaquest curves were measured on MinAtar 1.0.10 or older, whose "
    "oxygen bar flashed full one step before running out (fixed since).",
}


# ------------------------------------------------------------------ finding runs
@dataclass(frozen=True)
class FoundRun:
    """A run directory of one (game, seed, budget)."""

    path: Path
    finished: bool  # eval.json written
    checkpointed: int  # env steps of its newest checkpoint file, 0 without one


def saved_budget_and_digest(run_dir: Path) -> tuple[int, str] | None:
    """(``ppo.total_steps``, settings digest) of a run's saved config, None where it cannot be
    read (missing, not YAML, not a config of this rlformer)."""
    try:
        saved = load_saved_config(run_dir / "config.yaml")
        return int(saved.ppo.total_steps), settings_digest(saved)
    except (OSError, yaml.YAMLError, ConfigError, AttributeError):
        return None


def checkpointed_steps(run_dir: Path) -> int:
    steps = [
        int(match.group(1))
        for path in (run_dir / "checkpoints").glob("ckpt_*.pt")
        if (match := re.fullmatch(r"ckpt_(\d+)\.pt", path.name))
    ]
    return max(steps, default=0)


def find_runs(root: Path, game: str, seed: int, steps: int, digest: str) -> list[FoundRun]:
    """The run directories under ``root`` named for (game, seed) that train ``steps`` env steps
    with the settings of ``digest``, oldest first (their names end in a timestamp)."""
    name = run_name(game, seed)
    pattern = re.compile(rf"{re.escape(name)}-\d{{8}}-\d{{6}}(-\d+)?")
    found = []
    for path in sorted(root.glob(f"{name}-*")) if root.is_dir() else []:
        if not (path.is_dir() and pattern.fullmatch(path.name)):
            continue
        if saved_budget_and_digest(path) != (steps, digest):
            continue
        found.append(FoundRun(path, (path / "eval.json").is_file(), checkpointed_steps(path)))
    return found


Action = Literal["row", "resume", "start", "busy", "unfinished"]


@dataclass(frozen=True)
class Plan:
    """What to do for one (game, seed, budget) without a row: ``row`` (a finished run to read),
    ``resume``, ``start``, ``busy`` (another process is training it) or ``unfinished``
    (``--report-only``: not finished, not looked at further)."""

    action: Action
    run_dir: Path | None = None


def plan(
    root: Path, game: str, seed: int, steps: int, train: bool = True, sets: Sequence[str] = ()
) -> Plan:
    """The newest finished run is read; else the run with the most checkpointed is continued,
    unless some unfinished one is held by another process; else a new run starts. An unfinished
    directory without a checkpoint (killed before its first) is left as it is."""
    runs = find_runs(root, game, seed, steps, settings_digest(configured(game, sets)))
    finished = [r for r in runs if r.finished]
    if finished:
        return Plan("row", finished[-1].path)
    unfinished = [r for r in runs if not r.finished]
    if not train:
        return Plan("unfinished", unfinished[-1].path) if unfinished else Plan("start")
    busy = [r for r in unfinished if RunLock.held(r.path)]
    if busy:
        return Plan("busy", busy[-1].path)
    resumable = [r for r in unfinished if r.checkpointed > 0]
    if resumable:
        return Plan("resume", max(resumable, key=lambda r: (r.checkpointed, r.path.name)).path)
    return Plan("start")


# ------------------------------------------------------------------ training
def keep_checkpoints(game: str, steps: int) -> int:
    """KEEP_CHECKPOINTS, or more where a larger budget writes more checkpoints than that."""
    cfg = load_config(config_path(game))
    rollout = cfg.rollout
    per_iteration = rollout.num_workers * rollout.envs_per_worker * rollout.fragment_length
    iterations = math.ceil(steps / per_iteration)
    written = iterations // cfg.run.checkpoint_every + 1  # on the way, and the final one
    return max(KEEP_CHECKPOINTS, written)


def start_arguments(
    game: str, seed: int, steps: int, root: Path, sets: Sequence[str] = ()
) -> list[str]:
    """``rlformer train``'s arguments for a new run of (game, seed) at ``steps``, ``--set``
    items last."""
    settings = [
        f"run.seed={seed}",
        f"run.root={root}",
        f"run.name={run_name(game, seed)}",
        "run.progress=false",
        f"run.keep_checkpoints={keep_checkpoints(game, steps)}",
        f"ppo.total_steps={steps}",
        *sets,
    ]
    return [str(config_path(game)), *(item for s in settings for item in ("--set", s))]


def rlformer_train(arguments: Sequence[str]) -> int:
    """Run ``rlformer train ARGUMENTS`` in a child process (this interpreter's rlformer), its
    output to this terminal; the exit code.

    Ctrl-C reaches the child too, which finishes its iteration, writes a checkpoint and exits:
    it is waited for before this process stops, so the run resumes from there.
    """
    print(f"$ rlformer train {shlex.join(arguments)}", flush=True)
    with subprocess.Popen([sys.executable, "-m", "rlformer.cli", "train", *arguments]) as child:
        try:
            return child.wait()
        except KeyboardInterrupt:
            child.wait()
            raise


# ------------------------------------------------------------------ rows
@dataclass
class Row:
    game: str
    seed: int
    steps: int  # the budget: the run's ppo.total_steps
    env_steps: int  # trained: the budget rounded up to whole rollouts
    eval_return_mean: float  # final evaluation (eval.json), over its episodes
    eval_return_std: float
    eval_episodes: int
    train_return_mean: float | None  # rollout/return_mean at the end: last 100 training episodes
    seconds: float  # training loop: the sum of time/iteration_s over the run's iterations
    steps_per_s: float
    commit: str | None
    source: Literal["trained", "resumed", "found"]
    run_dir: str
    settings_digest: str | None = None  # settings_digest() of the run's config
    ppo: dict | None = None  # its ppo section (the report names the keys that differ)


def row_key(game: str, seed: int, steps: int, digest: str | None) -> tuple:
    return (game, seed, steps, digest)


def read_row(game: str, seed: int, steps: int, run_dir: Path, source: str) -> Row:
    """The row of a finished run, from its eval.json and metrics.jsonl."""
    evaluation = json.loads((run_dir / "eval.json").read_text())
    metrics = read_metrics(run_dir)
    saved = load_saved_config(run_dir / "config.yaml")
    trained = [m for m in metrics if "time/iteration_s" in m]
    returns = [m[CURVE_METRIC] for m in metrics if CURVE_METRIC in m]
    env_steps = int(max(m["step"] for m in metrics))
    seconds = float(sum(m["time/iteration_s"] for m in trained))
    return Row(
        game,
        seed,
        steps,
        env_steps,
        float(evaluation["return_mean"]),
        float(evaluation["return_std"]),
        int(evaluation["episodes"]),
        float(returns[-1]) if returns else None,
        seconds,
        env_steps / seconds if seconds > 0 else float("nan"),
        CODE_VERSION,
        source,  # type: ignore[arg-type]
        str(run_dir),
        settings_digest(saved),
        training_settings(saved)["ppo"],
    )


def read_rows(out: Path) -> list[Row]:
    if not out.exists():
        return []
    return [Row(**json.loads(line)) for line in out.read_text().splitlines() if line.strip()]


def append_row(out: Path, row: Row) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as handle:
        handle.write(json.dumps(asdict(row)) + "\n")
    train = "-" if row.train_return_mean is None else f"{row.train_return_mean:.2f}"
    print(
        f"{row.game} seed {row.seed} ({row.source}): training return {train}, evaluation "
        f"{row.eval_return_mean:.2f} +/- {row.eval_return_std:.2f}, {row.env_steps:,} steps "
        f"in {row.seconds:.0f} s ({row.steps_per_s:.0f} steps/s); {row.run_dir}",
        flush=True,
    )


def measure(
    game: str, seed: int, steps: int, root: Path, train: bool, sets: Sequence[str] = ()
) -> tuple[Row | None, str | None]:
    """One (game, seed, budget, settings) without a row: (its row once finished, else None; a
    failure's description, else None). Trains only with ``train``."""
    step = plan(root, game, seed, steps, train, sets)
    label = f"{game} seed {seed} at {steps:,} steps"
    if step.action == "row":
        assert step.run_dir is not None
        return read_row(game, seed, steps, step.run_dir, "found"), None
    if step.action == "unfinished":
        print(f"{label}: {step.run_dir} has not finished; no row", flush=True)
        return None, None
    if not train:
        print(f"{label}: no run under {root}", flush=True)
        return None, None
    if step.action == "busy":
        print(f"{label}: {step.run_dir} is in use by another process; left to it", flush=True)
        return None, None
    if step.action == "resume":
        assert step.run_dir is not None
        code = rlformer_train(["--resume", str(step.run_dir), "--trust-checkpoint"])
        source = "resumed"
    else:
        code = rlformer_train(start_arguments(game, seed, steps, root, sets))
        source = "trained"
    if code in INTERRUPTED:  # stopped by the user: so is the benchmark, resumable as the run
        raise SystemExit(f"{label}: rlformer train was interrupted ({code}); run this again")
    if code != 0:
        return None, f"{label}: rlformer train exited with {code}"
    done = plan(root, game, seed, steps, False, sets)
    if done.action != "row" or done.run_dir is None:
        return None, f"{label}: rlformer train exited 0 but no finished run is under {root}"
    return read_row(game, seed, steps, done.run_dir, source), None


# ------------------------------------------------------------------ report
def _ci(values: Sequence[float]) -> str:
    summary = summarize_scores(list(values), seed=0)
    return f"{summary.mean:.2f} [{summary.mean_ci[0]:.2f}, {summary.mean_ci[1]:.2f}]"


def _steps(steps: int) -> str:
    return f"{steps:,}"


def is_config_file(game: str, digest: str | None) -> bool:
    """Whether rows of ``digest`` trained with the game's config file as it is now."""
    return digest == settings_digest(configured(game))


def plot_path(out: Path, game: str, steps: int, digest: str | None = None) -> Path:
    """The curves' PNG: named by game and budget, and by the settings digest for a variant."""
    tail = "" if digest is None or is_config_file(game, digest) else f"_{digest}"
    return out.parent / f"ppo_{game}_{steps}steps{tail}.png"


def settings_label(game: str, rows: list[Row]) -> str:
    """How the rows' settings differ from the config file: its ppo keys as ``--set`` items (or
    the digest where the difference lies elsewhere); empty for the config file itself."""
    digest, ppo = rows[0].settings_digest, rows[0].ppo
    if digest is None or is_config_file(game, digest):
        return ""
    current = training_settings(configured(game))["ppo"]
    changed = [f"ppo.{k}={v}" for k, v in sorted((ppo or {}).items()) if current.get(k) != v]
    return ", with " + (" ".join(f"`{c}`" for c in changed) if changed else f"settings {digest}")


def game_section(game: str, steps: int, rows: list[Row], plot: Path | None) -> list[str]:
    """One game at one budget and settings: ours (mean [95% CI] over seeds) and the published
    figures."""
    rows = sorted(rows, key=lambda r: r.seed)
    train = [r.train_return_mean for r in rows if r.train_return_mean is not None]
    episodes = sorted({r.eval_episodes for r in rows})
    lines = [
        "",
        f"## {game} ({GAMES[game]}), {steps:,} steps{settings_label(game, rows)}",
        "",
        "| agent | steps | training return, last 100 episodes | final evaluation | seeds / runs |",
        "| --- | --- | --- | --- | --- |",
        f"| rlformer PPO (ours) | {_steps(max(r.env_steps for r in rows))} | "
        f"{_ci(train) if train else '-'} | {_ci([r.eval_return_mean for r in rows])} "
        f"({'/'.join(map(str, episodes))} episodes each) | {len(rows)} "
        f"{'seed' if len(rows) == 1 else 'seeds'} |",
    ]
    for figure in PUBLISHED[game]:
        value = "not derivable" if figure.value is None else f"≈ {figure.value:g}"
        at = "-" if figure.at_steps is None else _steps(figure.at_steps)
        cells = (value, "-") if figure.measure == "training" else ("-", value)
        runs = "30 runs" if figure.source == "MinAtar README" else "not stated"
        lines.append(
            f"| {figure.agent} (published: {figure.source}) | {at} | {cells[0]} | {cells[1]} | "
            f"{runs} |"
        )
    lines += ["", "Per seed:", ""]
    for r in rows:
        train_value = "-" if r.train_return_mean is None else f"{r.train_return_mean:.2f}"
        lines.append(
            f"- seed {r.seed}: training {train_value}, evaluation {r.eval_return_mean:.2f} "
            f"± {r.eval_return_std:.2f}; {r.env_steps:,} steps in {r.seconds:,.0f} s "
            f"({r.steps_per_s:,.0f} env steps/s); commit {r.commit or 'unknown'}, {r.source}; "
            f"`{Path(r.run_dir).name}`"
        )
    if game in GAME_NOTES:
        lines += ["", GAME_NOTES[game]]
    if plot is not None:
        lines += ["", f"![{game} learning curves]({plot.name})"]
    return lines


def draw_curves(rows: list[Row], path: Path) -> Path | None:
    """The learning-curve PNG of one game and budget (one line per seed), drawn from the runs'
    metrics; None, leaving any earlier PNG as it is, when a run directory is not here."""
    run_dirs = [Path(r.run_dir) for r in sorted(rows, key=lambda r: r.seed)]
    missing = [str(d) for d in run_dirs if not (d / "metrics.jsonl").is_file()]
    if missing:
        print(f"{path.name} not drawn: no metrics in {', '.join(missing)}", flush=True)
        return path if path.exists() else None
    return plot_learning_curves(run_dirs, path, [CURVE_METRIC])


def report(rows: list[Row], out: Path) -> str:
    """Markdown: per game and budget, ours against the published figures; PNGs beside ``out``."""
    lines = [
        "# MinAtar PPO",
        "",
        "rlformer PPO with MinAtar's network (`configs/minatar/ppo_GAME.yaml`): mean over seeds "
        "[bootstrap 95% CI over seeds] of the training return at the end (the last 100 training "
        "episodes, sampled actions: what the published curves plot) and of the final "
        "evaluation (eval.json: sampled actions). Env steps/s: the training loop on the "
        "machine that ran it, whatever else ran there.",
        "",
        "Published figures are others' measurements, labelled as published and read off their "
        "plots (≈):",
        "",
        *(f"- **{name}**: {text}." for name, text in SOURCES.items()),
    ]
    groups = sorted(
        {(r.game, r.steps, r.settings_digest or "") for r in rows},
        key=lambda g: (list(GAMES).index(g[0]), g[1], not is_config_file(g[0], g[2]), g[2]),
    )
    for game, steps, digest in groups:
        mine = [
            r for r in rows if (r.game, r.steps, r.settings_digest or "") == (game, steps, digest)
        ]
        plot = draw_curves(mine, plot_path(out, game, steps, digest or None))
        lines += game_section(game, steps, mine, plot)
    return "\n".join(lines) + "\n"


def write_report(rows: list[Row], out: Path) -> None:
    text = report(rows, out)
    print(text)
    out.with_suffix(".md").write_text(text)
    print(f"wrote {out.with_suffix('.md')}", flush=True)


# ------------------------------------------------------------------ command line
def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add = parser.add_argument
    add("--games", nargs="+", choices=list(GAMES), default=list(GAMES))
    add("--seeds", type=int, default=3, help="seeds 0..N-1")
    add("--steps", type=int, default=None, help="env steps per run (default: the config's)")
    add("--root", type=Path, default=DEFAULT_ROOT, help="folder of the run directories")
    add("--out", type=Path, default=DEFAULT_OUT, help="result rows (JSONL); report and PNGs beside")
    add("--report-only", action="store_true", help="train nothing; rows for finished runs only")
    add(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override for every run (repeatable): a variant, keyed apart from the config's",
    )
    return parser.parse_args(argv)


def budget(game: str, steps: int | None, sets: Sequence[str] = ()) -> int:
    return steps if steps is not None else int(configured(game, sets).ppo.total_steps)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(1)
    try:
        digests = {game: settings_digest(configured(game, args.sets)) for game in args.games}
    except ConfigError as err:
        raise SystemExit(f"error: --set: {err}") from None
    rows = read_rows(args.out)
    done = {row_key(r.game, r.seed, r.steps, r.settings_digest) for r in rows}
    failures = []
    for seed in range(args.seeds):  # every game gets seed 0 before any gets seed 1
        for game in args.games:
            steps = budget(game, args.steps, args.sets)
            if row_key(game, seed, steps, digests[game]) in done:
                continue
            row, failure = measure(game, seed, steps, args.root, not args.report_only, args.sets)
            if failure is not None:
                print(failure, flush=True)
                failures.append(failure)
            if row is not None:
                append_row(args.out, row)
                rows.append(row)
    shown = [
        r for r in rows if r.game in args.games and (args.steps is None or r.steps == args.steps)
    ]
    if shown:
        write_report(shown, args.out)
    else:
        print(f"no finished run to report in {args.out}", flush=True)
    if failures:
        raise SystemExit("\n".join(["failed:", *failures]))


if __name__ == "__main__":
    main()
