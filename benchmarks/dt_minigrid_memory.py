"""Memory beyond the context window on a public task: MiniGrid-MemoryS11 from recorded data.

A GTrXL-PPO teacher learns MiniGrid-MemoryS11-v0 with Dict observations (the one-hot view as
``image`` and the agent's heading as ``direction``; configs/memory/minigrid_memory_s11_dict.yaml).
Its episodes are recorded with ``rlformer collect``: its actions sampled, as the minigrid preset
evaluates it (its success rate is the sampled policy's; a greedy MiniGrid PPO policy can loop
until the time limit), and ``--random-fraction`` of the steps (epsilon, 0.2) a uniformly random
action instead, giving detours and wrong turns whose low returns a return-conditioned model
learns to tell from the teacher's.
On that data three policies are trained and played on the real env, conditioned (the DTs) on a
high return of the data:

* a plain Decision Transformer whose context K is shorter than the distance from the cue (the
  object in the start room) to the decision at the end of the hallway, so it cannot see the cue
  when it chooses: at best chance (50%);
* a memory DT with the same K that carries the core's memory across consecutive K-step
  windows (``dt.memory_segments``), enough windows to hold a whole episode;
* a GRU behaviour-cloning policy over the same per-leaf observation encoder as the DTs, trained
  with cross-entropy on whole episodes (rlformer has no recurrent BC of its own).

The cue-to-decision distance is measured on the recorded episodes: for each episode, the steps
from the last observation that shows the cue (told apart from the two objects at the hallway's
end by its walls: :func:`cue_in_view`) to the episode's last action. The decision itself (the
turn towards one object) is the action before the last, so a plain DT's window at the decision
shows the cue only when K >= that distance. Unless ``--context`` is given, K is one below the
distance's 5th percentile over the successful episodes. The window is not the only way back:
the DT's timestep embedding tells it the step number, and where the teacher takes longer
routes for one cue than for the other, the step number tells the cue. ``--no-clock`` trains
the DTs without it (``dt.timestep_embedding: false``), so that the plain DT has no way back.

Every stage is skipped when its result exists: the teacher run (resumed from its last checkpoint
when killed), the recording (an HDF5 file under ``--root``), and each (model, seed) row in
``--out``; a killed DT run is resumed from its last checkpoint. Rows are appended to ``--out``
(JSONL) as they finish. The report (printed, and written beside ``--out`` as report.md) lists
the teacher, the data, the distance distribution and the success rates.

    .venv/bin/python benchmarks/dt_minigrid_memory.py    # all of it: 1-1.5 h on one core
    .venv/bin/python benchmarks/dt_minigrid_memory.py --teacher RUN_DIR
    .venv/bin/python benchmarks/dt_minigrid_memory.py --report-only
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlformer.algos.dt.loading import dt_encoder
from rlformer.config import (
    EnvConfig,
    TrainConfig,
    build_config,
    load_config,
    load_saved_config,
)
from rlformer.data import load_dataset
from rlformer.data.episodes import Dataset
from rlformer.data.sampling import WindowSampler
from rlformer.evaluation.runner import run_policy_episodes
from rlformer.networks.dt_spaces import StateLayout
from rlformer.networks.encoders import to_torch
from rlformer.networks.spaces import Tree, flatten_obs, tree_map
from rlformer.policies.base import PolicyInfo
from rlformer.rollout.env_factory import env_from_config
from rlformer.runs.algorithm import FINAL_EVAL_SEED_OFFSET
from rlformer.runs.directory import read_metrics
from rlformer.runs.training import train

ROOT = Path(__file__).resolve().parents[1]
TEACHER_CONFIG = ROOT / "configs" / "memory" / "minigrid_memory_s11_dict.yaml"
MODELS = ("plain_dt", "memory_dt", "gru_bc")
MODEL_NAMES = {"plain_dt": "plain DT", "memory_dt": "memory DT", "gru_bc": "GRU BC"}

# MiniGrid's object codes (minigrid.core.constants.OBJECT_TO_IDX), the first 11 one-hot bits of
# each cell of OneHotPartialObsWrapper's view.
_EMPTY, _WALL, _KEY, _BALL = 1, 2, 5, 6
_OBJECT_BITS = 11


# ------------------------------------------------------------------ the cue in the data
def cue_in_view(image: np.ndarray) -> bool:
    """Whether a one-hot MiniGrid-MemoryS11 view ``[7, 7, 20]`` shows the cue.

    The cue and the two objects at the hallway's end are all green keys or balls; they differ
    by their surroundings. The cue sits in the start room's corner: along each axis it has a
    wall on one side and floor on the other. The end objects sit in a one-cell-wide corridor:
    along one axis walls on both sides. An object whose neighbours are out of view or unseen
    counts as neither. (Checked against MiniGrid's own ``agent_sees`` in the tests.)
    """
    cells = np.asarray(image)[..., :_OBJECT_BITS].argmax(-1)
    width, height = cells.shape

    def at(i: int, j: int) -> int:
        return int(cells[i, j]) if 0 <= i < width and 0 <= j < height else -1

    for i, j in zip(*np.nonzero((cells == _KEY) | (cells == _BALL)), strict=True):
        axes = [(at(i - 1, j), at(i + 1, j)), (at(i, j - 1), at(i, j + 1))]
        if any(a == _WALL and b == _WALL for a, b in axes):
            continue  # an end object
        if any({a, b} == {_WALL, _EMPTY} for a, b in axes):
            return True
    return False


def cue_distances(dataset: Dataset) -> dict[str, np.ndarray]:
    """Per finished episode (terminated: an object was reached): its length, whether it
    succeeded, and the steps from the last view of the cue to its last action (-1 when it never
    saw the cue)."""
    lengths, success, distance = [], [], []
    for episode in dataset.episodes:
        if not episode.terminated:
            continue  # a time-out or the recording's cut-off end
        images = episode.observations["image"]
        seen = [t for t in range(len(episode)) if cue_in_view(images[t])]
        lengths.append(len(episode))
        success.append(episode.episode_return > 0)
        distance.append(len(episode) - 1 - seen[-1] if seen else -1)
    return {
        "length": np.asarray(lengths),
        "success": np.asarray(success, dtype=bool),
        "distance": np.asarray(distance),
    }


def quantiles(values: np.ndarray) -> dict[str, float]:
    """min, 5/25/50/75/95th percentiles and max of ``values`` (empty: {})."""
    if values.size == 0:
        return {}
    names = ("min", "p5", "p25", "median", "p75", "p95", "max")
    points = np.quantile(values, [0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0])
    return {name: float(value) for name, value in zip(names, points, strict=True)}


# ------------------------------------------------------------------ run directories
def run_dirs(root: Path, name: str) -> list[Path]:
    """Run directories of ``name`` under ``root`` (``NAME-YYYYmmdd-HHMMSS[-n]``)."""
    pattern = re.compile(rf"{re.escape(name)}-\d{{8}}-\d{{6}}(-\d+)?")
    if not root.is_dir():
        return []
    return sorted(p for p in root.glob(f"{name}-*") if p.is_dir() and pattern.fullmatch(p.name))


def finished_run(root: Path, name: str) -> Path | None:
    """A run of ``name`` whose final evaluation was written (``eval.json``)."""
    done = [p for p in run_dirs(root, name) if (p / "eval.json").exists()]
    return done[-1] if done else None


def resumable_run(root: Path, name: str) -> Path | None:
    """An unfinished run of ``name`` with a checkpoint to continue from."""
    found = [
        p
        for p in run_dirs(root, name)
        if not (p / "eval.json").exists() and any((p / "checkpoints").glob("ckpt_*.pt"))
    ]
    return found[-1] if found else None


def train_or_resume(cfg: TrainConfig, on_iteration: Any = None) -> Path:
    """Train ``cfg``'s run, or continue the one a killed script left; its run directory."""
    root, name = Path(cfg.run.root), cfg.run.name
    previous = resumable_run(root, name)
    if previous is not None:
        print(f"resuming {previous}", flush=True)
        saved = load_saved_config(previous / "config.yaml")
        return train(saved, resume_dir=previous, on_iteration=on_iteration).run_dir
    return train(cfg, on_iteration=on_iteration).run_dir


def read_eval(run_dir: Path) -> dict[str, float]:
    return json.loads((run_dir / "eval.json").read_text())


# ------------------------------------------------------------------ rows
def code_version() -> str | None:
    """The checkout's commit, ``-dirty`` with uncommitted changes to tracked files."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
    except OSError:
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def read_rows(out: Path) -> list[dict[str, Any]]:
    if not out.exists():
        return []
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


def append_row(out: Path, row: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as f:
        f.write(json.dumps({**row, "commit": code_version()}) + "\n")


def has_row(rows: list[dict[str, Any]], **key: Any) -> dict[str, Any] | None:
    """The last row whose fields equal ``key``."""
    found = [row for row in rows if all(row.get(k) == v for k, v in key.items())]
    return found[-1] if found else None


# ------------------------------------------------------------------ 1. teacher
def teacher_config(args: argparse.Namespace) -> TrainConfig:
    """The Dict-observation GTrXL-PPO config, checkpointing about every 100k env steps."""
    return load_config(
        TEACHER_CONFIG,
        [
            f"ppo.total_steps={args.teacher_steps}",
            f"run.seed={args.teacher_seed}",
            f"run.root={args.root}",
            f"run.name=teacher-{args.teacher_steps}-seed{args.teacher_seed}",
            "run.progress=false",
            "run.checkpoint_every=50",  # iterations of 16 x 128 steps
            f"eval.episodes={args.episodes}",
        ],
    )


def teacher_speed(run_dir: Path) -> tuple[int, float]:
    """Env steps and env steps/s of a PPO run, from its metrics (rollouts and updates)."""
    rows = [row for row in read_metrics(run_dir) if "time/iteration_s" in row]
    seconds = sum(float(row["time/iteration_s"]) for row in rows)
    steps = int(rows[-1]["step"]) if rows else 0
    return steps, steps / seconds if seconds else float("nan")


def teacher(args: argparse.Namespace, rows: list[dict[str, Any]]) -> Path:
    """The teacher's run directory: ``--teacher``, a finished run under ``--root``, or one
    trained (or resumed) now. Appends its row the first time."""
    if args.teacher is not None:
        run_dir = Path(args.teacher)
    else:
        cfg = teacher_config(args)
        run_dir = finished_run(Path(cfg.run.root), cfg.run.name) or train_or_resume(cfg)
    if not has_row(rows, kind="teacher", run_dir=str(run_dir)):
        evaluation = read_eval(run_dir) if (run_dir / "eval.json").exists() else {}
        steps, speed = teacher_speed(run_dir)
        row = {
            "kind": "teacher",
            "run_dir": str(run_dir),
            "env_steps": steps,
            "env_steps_per_s": speed,
            "success_rate": evaluation.get("success_rate"),
            "return_mean": evaluation.get("return_mean"),
            "eval_sampled": not load_saved_config(run_dir / "config.yaml").eval.deterministic,
        }
        append_row(args.out, row)
        rows.append(row)
    return run_dir


# ------------------------------------------------------------------ 2. data
def data_path(args: argparse.Namespace, teacher_dir: Path) -> Path:
    acting = "greedy" if args.greedy_teacher else "sampled"
    name = (
        f"{teacher_dir.name}-{args.transitions}-random{args.random_fraction:g}-{acting}"
        f"-seed{args.data_seed}.hdf5"
    )
    return args.root / "data" / name


def rlformer_cli() -> list[str]:
    """How to run the ``rlformer`` command of this interpreter's environment."""
    script = Path(sys.executable).with_name("rlformer")
    if script.exists():
        return [str(script)]
    found = shutil.which("rlformer")
    return [found] if found else [sys.executable, "-c", "from rlformer.cli import main; main()"]


def record(args: argparse.Namespace, teacher_dir: Path) -> Path:
    """Record the teacher's episodes with ``rlformer collect`` (skipped if the file exists)."""
    path = data_path(args, teacher_dir)
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.stem + ".partial.hdf5")
    command = [
        *rlformer_cli(),
        "collect",
        "--policy",
        str(teacher_dir),
        "--steps",
        str(args.transitions),
        "--out",
        str(partial),
        "--seed",
        str(args.data_seed),
        "--random-fraction",
        str(args.random_fraction),
        "--num-envs",
        str(args.record_envs),
        *([] if args.greedy_teacher else ["--stochastic"]),
    ]
    print("$ " + " ".join(command), flush=True)
    subprocess.run(command, check=True)
    partial.rename(path)
    return path


def describe_data(
    args: argparse.Namespace, path: Path, teacher_dir: Path, rows: list[dict[str, Any]]
) -> dict[str, Any]:
    """The data row (sizes, returns, cue distances, the K and windows chosen): read from
    ``--out`` when there, else measured and appended."""
    found = has_row(rows, kind="data", file=path.name)
    if found is not None:
        return found
    dataset = load_dataset(str(path))
    measured = cue_distances(dataset)
    returns = dataset.returns
    success = measured["success"]
    seen = success & (measured["distance"] >= 0)
    distance = measured["distance"][seen]
    row = {
        "kind": "data",
        "file": path.name,
        "teacher": teacher_dir.name,
        "transitions": dataset.num_transitions,
        "episodes": dataset.num_episodes,
        "random_fraction": args.random_fraction,
        "teacher_acting": "greedy" if args.greedy_teacher else "sampled",
        "record_envs": args.record_envs,
        "finished_episodes": int(success.size),
        "success_share": float(success.mean()) if success.size else float("nan"),
        "return_mean": float(returns.mean()),
        "return_q90": float(np.quantile(returns, 0.9)),
        "return_max": float(returns.max()),
        "successes_without_cue": int((success & (measured["distance"] < 0)).sum()),
        "cue_distance": quantiles(distance),
        "cue_distance_counts": {str(d): int((distance == d).sum()) for d in np.unique(distance)},
        "episode_length": quantiles(measured["length"]),
    }
    append_row(args.out, row)
    rows.append(row)
    return row


def choose_context(args: argparse.Namespace, data: dict[str, Any]) -> int:
    """``--context``, or one below the 5th percentile of the cue-to-decision distance."""
    if args.context:
        return args.context
    p5 = data["cue_distance"].get("p5")
    if p5 is None:
        raise SystemExit("no successful episode saw the cue: cannot choose K; give --context")
    return max(1, math.floor(p5) - 1)


def choose_segments(args: argparse.Namespace, data: dict[str, Any], context: int) -> int:
    """``--segments``, or enough K-step windows to hold 1.5 times the 95th-percentile length of
    the data's finished episodes (at least 2: the cue and the decision lie in different
    windows). Evaluation episodes of a DT that dawdles run longer than the teacher's."""
    if args.segments:
        return args.segments
    p95 = data["episode_length"].get("p95", context)
    return max(2, math.ceil(1.5 * p95 / context))


def cue_in_decision_window(data: dict[str, Any], context: int) -> float:
    """Share of successful episodes that saw the cue whose K steps up to the decision (the
    action before the last) show it: distance <= K."""
    counts = {int(d): n for d, n in data["cue_distance_counts"].items()}
    total = sum(counts.values())
    return sum(n for d, n in counts.items() if d <= context) / total if total else float("nan")


def target_return(args: argparse.Namespace, data: dict[str, Any]) -> float:
    """``--target``, or the data's 90th-percentile episode return (rounded to 3 places)."""
    return args.target if args.target is not None else round(data["return_q90"], 3)


# ------------------------------------------------------------------ 3a. Decision Transformers
class LoopClock:
    """Seconds per gradient step between the first and the last logged iteration."""

    def __init__(self, steps_per_iteration: int) -> None:
        self.per = steps_per_iteration
        self.stamps: list[float] = []

    def tick(self, iteration: int, metrics: dict[str, float]) -> None:
        self.stamps.append(time.perf_counter())

    def seconds_per_step(self) -> float | None:
        if len(self.stamps) < 2:
            return None
        return (self.stamps[-1] - self.stamps[0]) / (self.per * (len(self.stamps) - 1))


def dt_config(
    args: argparse.Namespace,
    env: EnvConfig,
    data: Path,
    model: str,
    seed: int,
    context: int,
    segments: int,
    target: float,
) -> TrainConfig:
    """One DT run: the teacher's env (as recorded), memory covering ``segments`` windows for
    the memory DT, one window for the plain DT."""
    windows = segments if model == "memory_dt" else 1
    raw = {
        "algo": "dt",
        "preset": None,
        "env": env.model_dump(mode="json"),
        "dt": {
            "dataset": str(data),
            "context": context,
            "return_scale": 1.0,  # MiniGrid returns are in [0, 1]
            "batch_size": args.batch,
            "learning_rate": args.lr,
            "warmup_steps": min(args.warmup, args.steps // 2),
            "train_steps": args.steps,
            "log_every": args.log_every,
            "memory_segments": segments if model == "memory_dt" else 0,
            "core": {
                "n_layers": args.layers,
                "d_model": args.d_model,
                "n_heads": args.heads,
                "d_ff": 2 * args.d_model,
                "dropout": 0.0,
                "memory_length": 3 * context * windows,  # 3 tokens per step
            },
            "target_returns": [target],
        },
        "eval": {"episodes": args.episodes, "deterministic": not args.sample_actions},
        "run": {
            "root": str(args.root / "dt" / data.stem),  # one folder per recording
            "seed": seed,
            "progress": False,
            "checkpoint_every": max(1, 1000 // args.log_every),
        },
    }
    if args.no_clock:  # only when set: runs with the clock keep the names they had
        raw["dt"]["timestep_embedding"] = False
    digest = settings_digest(args, raw, model)
    raw["run"]["name"] = f"{model}-K{context}-w{windows}-seed{seed}-{digest}"
    return build_config(raw)


def settings_digest(args: argparse.Namespace, raw: dict[str, Any], model: str) -> str:
    """A short hash of what a run learns and is scored with (not where its data lies): a run
    with other settings gets another name, so a finished run is reused only as it was."""
    settings = {
        "dt": {key: value for key, value in raw["dt"].items() if key != "dataset"},
        "eval": raw["eval"],
        "gru_hidden": args.gru_hidden if model == "gru_bc" else None,
    }
    return hashlib.sha1(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:8]


def run_dt(
    args: argparse.Namespace, cfg: TrainConfig, target: float
) -> tuple[dict[str, float], float | None, float]:
    """Train (or finish) one DT run; its final evaluation, s/step and wall seconds."""
    clock = LoopClock(args.log_every)
    start = time.perf_counter()
    run_dir = finished_run(Path(cfg.run.root), cfg.run.name) or train_or_resume(cfg, clock.tick)
    evaluation = read_eval(run_dir)
    prefix = f"target_{target:g}/"
    picked = {k[len(prefix) :]: v for k, v in evaluation.items() if k.startswith(prefix)}
    return picked, clock.seconds_per_step(), time.perf_counter() - start


# ------------------------------------------------------------------ 3b. GRU behaviour cloning
class GRUBehaviourCloning(nn.Module):
    """Per-leaf observation encoder (the DT's) -> linear + ReLU -> GRU -> action logits."""

    def __init__(self, encoder: nn.Module, hidden: int, actions: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.inp = nn.Sequential(nn.Linear(encoder.out_dim, hidden), nn.ReLU())
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.head = nn.Linear(hidden, actions)
        self.hidden = hidden

    def forward(self, obs: Tree, h: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """``obs`` leaves ``[B, T, ...]`` -> logits ``[B, T, actions]`` and the GRU state."""
        out, h = self.gru(self.inp(self.encoder(obs)), h)
        return self.head(out), h


class EpisodeBatches:
    """Whole episodes, padded to the longest of each batch, with the observations the DT's
    :class:`~rlformer.data.sampling.WindowSampler` keeps (the same standardisation: the image
    leaf by the data's mean and std, the heading as an index)."""

    def __init__(self, dataset: Dataset, layout: StateLayout) -> None:
        self.layout = layout
        self.steps = WindowSampler(dataset, 1, 1.0, discrete_actions=True, layout=layout)
        self.mean, self.std = self.steps.state_mean, self.steps.state_std

    def sample(
        self, size: int, rng: np.random.Generator
    ) -> tuple[Tree, torch.Tensor, torch.Tensor]:
        """Observations ``[B, T, ...]``, actions ``[B, T]`` and the mask of real steps; the
        padding repeats each episode's last step (the GRU is causal, the loss masks it)."""
        data = self.steps
        episode = rng.integers(len(data.lengths), size=size)
        lengths = data.lengths[episode]
        steps = np.arange(int(lengths.max()))[None, :]
        index = data.offsets[episode][:, None] + np.minimum(steps, lengths[:, None] - 1)
        obs = tree_map(lambda leaf: torch.as_tensor(leaf[index]), data.states)
        mask = torch.as_tensor(steps < lengths[:, None])
        return obs, torch.as_tensor(data.actions[index]), mask


class GRUPolicy:
    """The trained GRU as an rlformer :class:`~rlformer.policies.base.Policy`, so that it plays
    the DTs' evaluation episodes (same seeds) through the same runner."""

    def __init__(
        self,
        net: GRUBehaviourCloning,
        batches: EpisodeBatches,
        observation_space: gym.Space,
        action_space: gym.Space,
    ) -> None:
        self.net, self.batches = net.eval(), batches
        self.observation_space, self.action_space = observation_space, action_space
        self.info = PolicyInfo("gru_bc", "gru_bc")

    def initial_state(self, n: int, target_return: float | None = None) -> torch.Tensor:
        return torch.zeros(1, n, self.net.hidden)

    @torch.no_grad()
    def act(
        self,
        obs: Any,
        state: torch.Tensor,
        episode_start: np.ndarray,
        reward: np.ndarray | None = None,
        action_mask: np.ndarray | None = None,
        deterministic: bool = True,
        generator: torch.Generator | None = None,
    ) -> tuple[np.ndarray, torch.Tensor]:
        layout, b = self.batches.layout, self.batches
        inputs = layout.standardize(
            layout.inputs(flatten_obs(self.observation_space, obs)), b.mean, b.std
        )
        keep = torch.as_tensor(~np.asarray(episode_start), dtype=torch.float32)
        state = state * keep[None, :, None]
        steps = {path: value[:, None] for path, value in to_torch(inputs).items()}
        logits, state = self.net(steps, state)
        logits = logits[:, 0]
        if action_mask is not None:
            logits = logits.masked_fill(~torch.as_tensor(action_mask, dtype=torch.bool), -1e9)
        if deterministic:
            actions = logits.argmax(-1)
        else:
            probs = torch.softmax(logits, -1)
            actions = torch.multinomial(probs, 1, generator=generator)[:, 0]
        return actions.numpy(), state


def run_gru(
    args: argparse.Namespace, env: EnvConfig, data: Path, cfg: TrainConfig, seed: int
) -> tuple[dict[str, float], float, float]:
    """Train the GRU on whole episodes (cross-entropy on every recorded action) and play the
    DTs' evaluation episodes; the evaluation, s/step and wall seconds."""
    start = time.perf_counter()
    probe = env_from_config(env)
    observation_space, action_space = probe.observation_space, probe.action_space
    probe.close()
    layout = StateLayout(observation_space)
    batches = EpisodeBatches(load_dataset(str(data)), layout)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    net = GRUBehaviourCloning(dt_encoder(cfg, layout), args.gru_hidden, int(action_space.n))
    optimiser = torch.optim.AdamW(net.parameters(), lr=args.lr, weight_decay=1e-4)
    train_start = time.perf_counter()
    for step in range(args.steps):
        obs, actions, mask = batches.sample(args.batch, rng)
        logits, _ = net(obs, None)
        loss = nn.functional.cross_entropy(logits[mask], actions[mask])
        optimiser.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        optimiser.step()
        if (step + 1) % args.log_every == 0:
            print(f"gru_bc seed {seed}: step {step + 1} loss {loss.item():.4f}", flush=True)
    per_step = (time.perf_counter() - train_start) / args.steps
    policy = GRUPolicy(net, batches, observation_space, action_space)
    results = run_policy_episodes(
        policy,
        env,
        args.episodes,
        num_envs=args.episodes,
        seed=seed + FINAL_EVAL_SEED_OFFSET,  # the DTs' final evaluation episodes
        deterministic=not args.sample_actions,
    )
    returns = np.asarray(results.returns)
    evaluation = {"success_rate": float((returns > 0).mean()), "return_mean": float(returns.mean())}
    return evaluation, per_step, time.perf_counter() - start


# ------------------------------------------------------------------ 3. all policies
def train_policies(
    args: argparse.Namespace,
    rows: list[dict[str, Any]],
    teacher_dir: Path,
    data: Path,
    described: dict[str, Any],
) -> None:
    env = load_saved_config(teacher_dir / "config.yaml").env
    context = choose_context(args, described)
    segments = choose_segments(args, described, context)
    target = target_return(args, described)
    print(
        f"K = {context} steps, memory DT over {segments} windows ({segments * context} steps); "
        f"target return {target:g}",
        flush=True,
    )
    for model in args.models:
        for seed in range(args.seeds):
            cfg = dt_config(args, env, data, model, seed, context, segments, target)
            key = {"kind": "policy", "data": data.name, "run": cfg.run.name}
            if has_row(rows, **key):
                continue
            if model == "gru_bc":
                evaluation, per_step, seconds = run_gru(args, env, data, cfg, seed)
            else:
                evaluation, per_step, seconds = run_dt(args, cfg, target)
            row = {
                **key,
                "model": model,
                "seed": seed,
                "context": context,
                "segments": segments if model == "memory_dt" else 0,
                "train_steps": args.steps,
                "batch": args.batch,
                "lr": args.lr,
                "target": target,
                "episodes": args.episodes,
                "sampled": args.sample_actions,
                "success_rate": evaluation.get("success_rate"),
                "return_mean": evaluation.get("return_mean"),
                "s_per_step": per_step,
                "seconds": seconds,
                "network": (
                    f"GRU {args.gru_hidden}"
                    if model == "gru_bc"
                    else f"{args.layers} layers, d_model {args.d_model}, {args.heads} heads"
                    + (", no clock" if args.no_clock else "")
                ),
            }
            print(
                f"{MODEL_NAMES[model]} seed {seed}: success "
                f"{100 * (row['success_rate'] or 0):.0f}%, {seconds:.0f} s",
                flush=True,
            )
            append_row(args.out, row)
            rows.append(row)


# ------------------------------------------------------------------ 4. report
def _pct(value: float | None) -> str:
    return "-" if value is None or value != value else f"{100 * value:.0f}%"


def report(rows: list[dict[str, Any]]) -> str:
    """Markdown: the teachers, the data and one table of success rates per data file."""
    lines = [
        "# MiniGrid-MemoryS11 (Dict observations) from recorded data",
        "",
        "Written by benchmarks/dt_minigrid_memory.py. Success: the share of evaluation "
        "episodes (per seed, the same env seeds for every model) that end with a positive "
        "reward; the DTs are conditioned on the target return. K: the DT's context in steps, "
        "with the share of the data's successful episodes whose K steps up to the decision (the "
        "action before the last) show the cue. Windows: the K-step windows a memory DT's memory "
        "holds. s/step: seconds per gradient step.",
        "",
    ]
    for row in (r for r in rows if r["kind"] == "teacher"):
        lines.append(
            f"- teacher `{Path(row['run_dir']).name}`: GTrXL-PPO, {row['env_steps']:,} env steps "
            f"({row['env_steps_per_s']:.0f} steps/s), success {_pct(row['success_rate'])} "
            f"({'sampled' if row.get('eval_sampled') else 'greedy'} actions)"
        )
    for data in (r for r in rows if r["kind"] == "data"):
        dist, length = data["cue_distance"], data["episode_length"]
        lines += [
            "",
            f"## {data['file']}",
            "",
            f"{data['transitions']:,} transitions, {data['episodes']:,} episodes from the "
            f"{data['teacher_acting']} teacher with {100 * data['random_fraction']:g}% random "
            f"actions; {_pct(data['success_share'])} of the finished episodes succeed; "
            f"returns: mean {data['return_mean']:.3f}, 90th percentile {data['return_q90']:.3f}, "
            f"max {data['return_max']:.3f}.",
            "",
            "Steps from the last view of the cue to the last action (successful episodes that "
            f"saw it; {data['successes_without_cue']} succeeded without seeing it): "
            + ", ".join(f"{k} {v:g}" for k, v in dist.items())
            + "; counts "
            + ", ".join(f"{d}: {n}" for d, n in data["cue_distance_counts"].items())
            + ". Episode lengths: "
            + ", ".join(f"{k} {v:g}" for k, v in length.items())
            + ".",
            "",
            "| model | network | K | windows | target | seeds | success per seed | mean success "
            "| return | s/step |",
            "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |",
        ]
        lines += _policy_lines([r for r in rows if r.get("data") == data["file"]], data)
    return "\n".join(lines) + "\n"


def _policy_lines(rows: list[dict[str, Any]], data: dict[str, Any]) -> list[str]:
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        key = (
            MODELS.index(row["model"]),
            row["context"],
            row["segments"],
            row["train_steps"],
            row["target"],
            row["episodes"],
            row["network"],
            row.get("batch"),
            row.get("lr"),
            row.get("sampled"),
        )
        groups.setdefault(key, []).append(row)
    lines = []
    for _key, members in sorted(groups.items(), key=lambda item: item[0]):
        members.sort(key=lambda r: r["seed"])
        first = members[0]
        success = [r["success_rate"] for r in members]
        per_step = [r["s_per_step"] for r in members if r["s_per_step"] is not None]
        windows = first["segments"] or 1
        inside = cue_in_decision_window(data, first["context"])
        k_cell = f"{first['context']} (cue in view at the decision: {_pct(inside)})"
        lines.append(
            f"| {MODEL_NAMES[first['model']]} | {first['network']} | "
            f"{k_cell if first['model'] != 'gru_bc' else '-'} | "
            f"{windows if first['model'] != 'gru_bc' else '-'} | {first['target']:g} | "
            f"{len(members)} | {', '.join(_pct(s) for s in success)} | "
            f"**{_pct(float(np.mean(success)))}** | "
            f"{np.mean([r['return_mean'] for r in members]):.3f} | "
            f"{np.mean(per_step) if per_step else float('nan'):.3f} |"
        )
    return lines


def write_report(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    text = report(rows)
    print(text)
    path = args.out.with_name("report.md")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path}")


# ------------------------------------------------------------------ main
def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add(
        "--out",
        type=Path,
        default=Path("benchmarks/results/dt_minigrid/results.jsonl"),
        help="result rows",
    )
    add("--root", type=Path, default=Path("runs/dt_minigrid"), help="run dirs and data")
    add("--report-only", action="store_true", help="print and write the report, train nothing")
    add("--teacher", help="a trained teacher's run directory (skips training one)")
    add("--teacher-steps", type=int, default=1_000_000, help="teacher env steps")
    add("--teacher-seed", type=int, default=0)
    add("--transitions", type=int, default=100_000, help="transitions to record")
    add("--random-fraction", type=float, default=0.2, help="share of random actions (epsilon)")
    add("--greedy-teacher", action="store_true", help="record the teacher's greedy actions")
    add("--record-envs", type=int, default=32, help="envs the teacher records in step")
    add("--data-seed", type=int, default=0)
    add("--context", type=int, default=0, help="K (0: below the measured cue distance)")
    add("--segments", type=int, default=0, help="memory DT windows (0: hold the episodes)")
    add("--target", type=float, help="target return (default: the data's 90th percentile)")
    add("--models", nargs="+", choices=MODELS, default=list(MODELS))
    add("--steps", type=int, default=5000, help="gradient steps per model")
    add("--batch", type=int, default=64, help="windows (DT) or episodes (GRU) per step")
    add("--lr", type=float, default=1e-3)
    add("--warmup", type=int, default=200, help="DT learning-rate warm-up steps")
    add("--log-every", type=int, default=250)
    add("--layers", type=int, default=2, help="DT layers")
    add("--d-model", type=int, default=64, help="DT width")
    add("--heads", type=int, default=1, help="DT attention heads")
    add("--gru-hidden", type=int, default=128)
    add("--seeds", type=int, default=3)
    add("--episodes", type=int, default=100, help="evaluation episodes per seed")
    add("--sample-actions", action="store_true", help="evaluate DT/GRU with sampled actions")
    add(
        "--no-clock",
        action="store_true",
        help="DTs without the timestep embedding (dt.timestep_embedding=false), so that the "
        "step number cannot tell a plain DT what lies before its window",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(1)
    rows = read_rows(args.out)
    if not args.report_only:
        teacher_dir = teacher(args, rows)
        data = record(args, teacher_dir)
        described = describe_data(args, data, teacher_dir, rows)
        train_policies(args, rows, teacher_dir, data, described)
    write_report(args, rows)


if __name__ == "__main__":
    main()
