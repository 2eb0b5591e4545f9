"""Memory-RL suite: rlformer GTrXL and LSTM/GRU torsos vs sb3-contrib RecurrentPPO vs SB3 PPO.

Every agent gets the same env-step budget on the same env (same imports and wrappers); each
(task, agent, seed) trains in this process, one after another, then plays ``--episodes``
episodes, every agent with greedy actions unless the task's config evaluates sampled ones
(``eval.deterministic: false``, as the MiniGrid and LunarLander presets do). Results are
appended to ``--out`` (JSONL) as they finish, so a killed suite continues where it stopped: a
(task, agent, seed, budget, overrides) with a row is skipped when the row's recorded settings
are the run's (:func:`same_settings`; see :func:`row_budget` for rows that name no budget), and
a half-finished rlformer run with the same settings is resumed from its last checkpoint (see
:func:`run_rlformer`); suite processes started side by side share the runs (:func:`claim`).
At the end (or with ``--report-only``) it prints per task, budget and agent: final score mean
and IQM with bootstrap 95% CIs over seeds, the maximum mean episodic return during training
(:func:`mmer`), env steps/s including updates and the throughput ratio to RecurrentPPO, and
draws one learning-curve PNG per task and budget.

    .venv/bin/python benchmarks/memory_suite.py --tasks cartpole-novel --seeds 3
    .venv/bin/python benchmarks/memory_suite.py --quick                   # smoke run
    .venv/bin/python benchmarks/memory_suite.py --report-only          # tables + PNGs again
    .venv/bin/python benchmarks/memory_suite.py --agents gtrxl_async   # GTrXL + async sampling

POPGym returns are on POPGym's own normalised scale ([-1, 1] per episode).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import re
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlformer.config import TrainConfig, load_config, load_saved_config
from rlformer.evaluation.runner import run_policy_episodes
from rlformer.evaluation.statistics import ScoreSummary, summarize_scores
from rlformer.policies.registry import load_policy
from rlformer.policies.sb3 import SB3Policy
from rlformer.rollout.env_factory import env_from_config
from rlformer.runs.algorithm import FINAL_EVAL_SEED_OFFSET
from rlformer.runs.checkpoints import CheckpointError, atomic_write_bytes
from rlformer.runs.directory import RunDirError, RunLock, read_metrics
from rlformer.runs.training import TrainResult, train

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def _code_version() -> str | None:
    """The checkout's commit (``-dirty`` with uncommitted changes to tracked files), if any."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=CONFIGS.parent, capture_output=True, text=True, timeout=10
        )
        if done.returncode != 0:
            raise OSError(done.stderr)
        return done.stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{commit}-dirty" if dirty else commit


CODE_VERSION = _code_version()
AGENTS = ("gtrxl", "gtrxl_async", "lstm", "gru", "mlp", "recurrent_ppo", "ppo_mlp")
# rlformer agents: their torso and the settings that make them that agent. gtrxl_async is GTrXL
# with its rollout worker in a Ray actor sampling while the learner updates (a second core).
RLFORMER_AGENTS: dict[str, tuple[str, ...]] = {
    "gtrxl": ("model.torso=gtrxl",),
    "gtrxl_async": ("model.torso=gtrxl", "rollout.backend=ray", "rollout.async_sampling=true"),
    "lstm": ("model.torso=lstm",),
    "gru": ("model.torso=gru",),
    # the memoryless floor: the same preset, PPO and budget, so the gap to it is memory alone
    "mlp": ("model.torso=mlp",),
}
# What the suite runs unless --agents names others (gtrxl_async needs Ray and a second core;
# the rlformer MLP floor is asked for where memory's gain is in question).
DEFAULT_AGENTS = tuple(agent for agent in AGENTS if agent not in ("gtrxl_async", "mlp"))


@dataclass
class Task:
    """A benchmark task: its rlformer config, budget and extra settings for the rlformer run."""

    config: str
    steps: int
    overrides: list[str] = field(default_factory=list)


TASKS: dict[str, Task] = {
    "cartpole-novel": Task(
        "ppo_gtrxl_cartpole_novel.yaml",
        100_000,
    ),
    "pendulum-novel": Task("ppo_gtrxl_pendulum_novel.yaml", 100_000),
    "lunarlander-novel": Task("ppo_gtrxl_lunarlander_novel.yaml", 1_000_000),
    **{
        name.replace("_", "-"): Task(f"memory/popgym_{name}.yaml", 200_000)
        for name in (
            "repeat_previous",
            "repeat_first",
            "count_recall",
            "autoencode",
            "position_only_cartpole",
            "position_only_pendulum",
            "higher_lower",
            "minesweeper",
            "battleship",
            "concentration",
        )
    },
    "minigrid-memory-s11": Task("memory/minigrid_memory_s11.yaml", 1_000_000),
    # No config of its own: the position-only pendulum's, on the noisy observations.
    "noisy-position-only-pendulum": Task(
        "memory/popgym_position_only_pendulum.yaml",
        200_000,
        ["env.id=popgym-NoisyPositionOnlyPendulumEasy-v0"],
    ),
}


def _linear(start: float) -> Any:
    """The zoo's ``lin_X`` schedule: X decayed linearly to 0 over training."""
    return lambda progress_remaining: progress_remaining * start


def _zoo_cartpole_novel() -> dict[str, Any]:
    """rl-baselines3-zoo's RecurrentPPO entry for CartPoleNoVel-v1 (its model card)."""
    from torch import nn

    return {
        "n_envs": 8,
        "n_steps": 32,
        "batch_size": 256,
        "gae_lambda": 0.8,
        "gamma": 0.98,
        "n_epochs": 20,
        "ent_coef": 0.0,
        "learning_rate": _linear(1e-3),
        "clip_range": _linear(0.2),
        "normalize_obs": True,
        "policy_kwargs": {
            "ortho_init": False,
            "activation_fn": nn.ReLU,
            "lstm_hidden_size": 64,
            "enable_critic_lstm": True,
            "net_arch": {"pi": [64], "vf": [64]},
        },
    }


def _zoo_pendulum_novel() -> dict[str, Any]:
    """rl-baselines3-zoo's ppo_lstm entry for PendulumNoVel-v1 (gSDE exploration, 100k steps)."""
    return {
        "n_envs": 4,
        "n_steps": 1024,
        "batch_size": 128,  # the zoo leaves RecurrentPPO's default
        "gae_lambda": 0.95,
        "gamma": 0.9,
        "n_epochs": 10,
        "ent_coef": 0.0,
        "learning_rate": 1e-3,
        "clip_range": 0.2,
        "use_sde": True,
        "sde_sample_freq": 4,
        "policy_kwargs": {},  # the zoo keeps MlpLstmPolicy's defaults (LSTM 256, critic LSTM)
    }


def _zoo_lunarlander_novel() -> dict[str, Any]:
    """rl-baselines3-zoo's ppo_lstm entry for LunarLanderNoVel-v2 (1M steps)."""
    return {
        "n_envs": 16,
        "n_steps": 1024,
        "batch_size": 64,
        "gae_lambda": 0.98,
        "gamma": 0.999,
        "n_epochs": 4,
        "ent_coef": 0.01,
        "learning_rate": 3e-4,  # the zoo leaves RecurrentPPO's default
        "policy_kwargs": {},  # and MlpLstmPolicy's defaults (LSTM 256, critic LSTM)
    }


# sb3-contrib RecurrentPPO settings from rl-baselines3-zoo where the zoo has the task; elsewhere
# the rlformer config's rollout shape, learning rate, epochs and discounting.
ZOO = {
    "cartpole-novel": _zoo_cartpole_novel,
    "pendulum-novel": _zoo_pendulum_novel,
    "lunarlander-novel": _zoo_lunarlander_novel,
}


@dataclass
class Result:
    task: str
    agent: str
    seed: int
    env_steps: int
    seconds: float
    score: float  # mean return of the final evaluation (greedy unless the config samples)
    success_rate: float | None
    curve: list[tuple[int, float]]  # (env steps, mean return of recent episodes)
    # The code it ran on (commit, "-dirty" with uncommitted changes): the same seed trains
    # differently after a change that shifts the random streams. None on rows from before.
    commit: str | None = field(default_factory=lambda: CODE_VERSION)
    overrides: list[str] = field(default_factory=list)  # --set variants of the rlformer agents
    # How an SB3 agent used the machine, when not SB3's defaults (DummyVecEnv) and 1 thread.
    sb3_setup: dict[str, Any] = field(default_factory=dict)
    # The env-step budget asked for (env_steps rounds it up to whole rollouts); None on rows
    # from before the suite recorded it: row_budget() says what they count as.
    budget: int | None = None
    # Continued from a checkpoint of a killed run: `seconds` then covers this process's part
    # alone, and `timed_steps` says how many env steps that part trained.
    resumed: bool = False
    timed_steps: int | None = None  # env steps `seconds` covers; None: all of env_steps
    mmer: float | None = None  # max of the curve (see mmer()); filled in from it when None
    # The final evaluation's episodes played again with the other kind of action (sampled
    # where `score` is greedy, greedy where it samples); None on rows from before, SB3 rows.
    score_other_mode: float | None = None
    # What the rlformer run trained with (see settings()); None on SB3 rows and rows from before.
    settings: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.mmer is None:
            self.mmer = mmer(self.curve)

    @property
    def steps_per_s(self) -> float:
        steps = self.env_steps if self.timed_steps is None else self.timed_steps
        return steps / self.seconds


def mmer(curve: Sequence[Sequence[float]]) -> float | None:
    """Maximum mean episodic return during training, POPGym's headline metric: the highest
    point of the learning curve, None for a curve without points.

    A point is the mean return of the last 100 finished training episodes (sampled actions):
    rlformer's ``rollout/return_mean`` after each iteration, SB3's ``ep_info_buffer`` (100
    episodes) at the end of each rollout. That follows POPGym's definition (the maximum over
    training of the mean episodic return), not necessarily its averaging window (its RLlib
    runs log their own means).
    """
    return max((float(point[1]) for point in curve), default=None)


def row_budget(row: Result) -> int | None:
    """The budget a row counts as in the skip key and the report's groups.

    A row without one (written before the suite recorded it) counts as its task's default
    budget when its env steps are that budget rounded up to whole rollouts (every agent trains
    whole rollouts, and none of the suite's rollouts is a quarter of a task's default budget).
    Otherwise (a ``--steps`` or ``--quick`` run, or a task the suite no longer has) the budget
    is unknown, None: the row matches no request, so that run trains again, and the report
    shows such rows of a task together, as one group.
    """
    if row.budget is not None:
        return row.budget
    task = TASKS.get(row.task)
    if task is not None and task.steps <= row.env_steps < 1.25 * task.steps:
        return task.steps
    return None


def variant(overrides: Sequence[str]) -> tuple[str, ...]:
    """The ``--set`` overrides that make a run differ from the suite's default one.

    ``run.device=cpu`` (the default ``--device``, which rows from before ``--device`` do not
    list) is left out, so those rows and new CPU rows are the same variant.
    """
    return tuple(item for item in overrides if item != "run.device=cpu")


def run_key(
    task: str, agent: str, seed: int, budget: int | None, overrides: Sequence[str]
) -> tuple[Any, ...]:
    """What makes two runs the same measurement: a row with this key means the run is done."""
    return (task, agent, seed, budget, variant(overrides))


def row_key(row: Result) -> tuple[Any, ...]:
    return run_key(row.task, row.agent, row.seed, row_budget(row), row.overrides)


UNSCORED_SETTINGS = frozenset(
    {
        "run.name",
        "run.root",
        "run.seed",
        "run.device",
        "run.torch_threads",
        "run.checkpoint_every",
        "run.keep_checkpoints",
        "run.progress",
        "eval.episodes",
        "eval.every",
        "eval.every_episodes",
        "ppo.total_steps",
    }
)
"""Config keys left out of :func:`settings`: they name, place, pace or checkpoint a run, or are
in the skip key already (seed, device, budget)."""


def settings(cfg: TrainConfig) -> dict[str, Any]:
    """An rlformer run's resolved config as dotted keys, without :data:`UNSCORED_SETTINGS`.

    Rows record it so that a change to a preset or to a default (which no ``--set`` override
    shows) makes the suite train its runs again instead of counting the old rows as done.
    """
    flat: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and value:
            for key, item in value.items():
                walk(f"{prefix}.{key}" if prefix else key, item)
        else:
            flat[prefix] = value

    walk("", cfg.model_dump(mode="json"))
    return {key: value for key, value in flat.items() if key not in UNSCORED_SETTINGS}


def same_settings(recorded: dict[str, Any] | None, planned: dict[str, Any]) -> bool:
    """Whether a run with ``recorded`` settings is the ``planned`` one: every key both have is
    equal. A key only the planned run has is new since then; new keys come in at the value that
    keeps the old behaviour, and a run that sets another has it in its overrides, which are in
    the skip key. A row without settings (an SB3 row, or one from before rows recorded them)
    counts as the same."""
    if recorded is None:
        return True
    return all(planned[key] == value for key, value in recorded.items() if key in planned)


def run_name(task: str, agent: str, seed: int, budget: int, overrides: Sequence[str]) -> str:
    """The rlformer run's name (its directory is NAME-TIMESTAMP under ``--root``), the same in
    every process, so a killed suite finds the run to resume; the overrides go in as a hash."""
    return f"{task}-{agent}-seed{seed}-{budget}-{variant_digest(overrides)}"


def variant_digest(overrides: Sequence[str]) -> str:
    """Eight hex digits naming a variant's overrides (:func:`variant`) in file names."""
    return _digest(list(variant(overrides)))


def _digest(value: Any) -> str:
    """Eight hex digits of a JSON-able value, the same in every process."""
    return hashlib.sha1(json.dumps(value).encode()).hexdigest()[:8]


CLAIMS = ".claims"


@contextmanager
def claim(root: Path, name: str) -> Iterator[bool]:
    """Whether this process may train run ``name`` now; held until the block ends.

    Suite processes started side by side (one per core) share the runs instead of training one
    twice: each takes an flock on ``ROOT/.claims/NAME.lock`` for the run it trains, and skips a
    run another process holds, or whose directory another process is training (the run's own
    lock, which every ``rlformer train`` holds). The kernel drops a dead process's locks, so a
    killed suite leaves nothing claimed.
    """
    claims = root / CLAIMS
    claims.mkdir(parents=True, exist_ok=True)
    lock = RunLock(claims, f"{name}.lock")
    try:
        lock.acquire()
    except RunDirError:
        yield False
        return
    try:
        previous = resumable_run(root, name)
        yield previous is None or not RunLock.held(previous)
    finally:
        lock.release()


def resumable_run(root: Path, name: str) -> Path | None:
    """The run directory of ``name`` under ``root`` with the most training checkpointed, if any
    has a checkpoint (one killed before its first checkpoint has nothing to resume).

    A run that finished (its final evaluation wrote ``eval.json``) is left alone: it has a row
    in some ``--out``, and a re-measurement into another ``--out`` trains afresh.
    """
    pattern = re.compile(rf"{re.escape(name)}-\d{{8}}-\d{{6}}(-\d+)?")
    found: list[tuple[int, str, Path]] = []
    for path in root.glob(f"{name}-*") if root.is_dir() else []:
        if not (path.is_dir() and pattern.fullmatch(path.name)) or (path / "eval.json").exists():
            continue
        steps = [
            int(match.group(1))
            for ckpt in (path / "checkpoints").glob("ckpt_*.pt")
            if (match := re.fullmatch(r"ckpt_(\d+)\.pt", ckpt.name))
        ]
        if steps:
            found.append((max(steps), path.name, path))
    return max(found)[2] if found else None


CHECKPOINT_STEPS = 200_000
"""Env steps between the checkpoints of a suite run: what a killed run loses at most. At POPGym
sizes (16 envs x 64 steps per iteration) an rlformer agent trains 2,400-5,500 env steps/s on
one core (0.19-0.43 s per iteration; GTrXL measured 0.41 s with two other jobs on the two
cores), so 195 iterations are 37-84 s of work; a checkpoint costs about 0.03 s. Elsewhere it is
at most 100 s at 2,000 steps/s, the slowest rlformer agent of the stored rows."""


def checkpoint_every(cfg: TrainConfig) -> int:
    """``run.checkpoint_every`` in iterations of ``cfg``'s rollout shape for CHECKPOINT_STEPS."""
    rollout = cfg.rollout
    per_iteration = rollout.num_workers * rollout.envs_per_worker * rollout.fragment_length
    return max(1, CHECKPOINT_STEPS // per_iteration)


def task_config(task: Task, steps: int, seed: int, root: Path, *extra: str) -> TrainConfig:
    """The task's config for one run; checkpoints every CHECKPOINT_STEPS env steps unless
    ``extra`` sets ``run.checkpoint_every``."""
    base = [
        *task.overrides,
        f"ppo.total_steps={steps}",
        f"run.seed={seed}",
        f"run.root={root}",
        "run.progress=false",
    ]
    shape = load_config(CONFIGS / task.config, [*base, *extra])  # extra may change the rollout
    cadence = f"run.checkpoint_every={checkpoint_every(shape)}"
    return load_config(CONFIGS / task.config, [*base, cadence, *extra])


class TrainingLoopClock:
    """Wall-clock of the training loop alone: first iteration's start to last iteration's end.

    It matches what the SB3 agents' clock covers (``model.learn``: rollouts, updates, logging),
    leaving out what neither side's clock should count: imports, env and model construction,
    and the final evaluation.
    """

    def __init__(self) -> None:
        self.first: float | None = None
        self.last = 0.0
        self.ticks = 0  # iterations this process trained

    def tick(self, iteration: int, metrics: dict[str, float]) -> None:
        now = time.perf_counter()
        self.ticks += 1
        if self.first is None:  # the first iteration ran before its callback
            self.first = now - metrics["time/iteration_s"]
        self.last = now

    @property
    def seconds(self) -> float:
        assert self.first is not None, "no iteration ran"
        return self.last - self.first


def training_curve(run_dir: Path) -> list[tuple[int, float]]:
    """(env steps, mean return of recent episodes) from a run's metrics."""
    return [
        (int(row["step"]), float(row["rollout/return_mean"]))
        for row in read_metrics(run_dir)
        if "rollout/return_mean" in row
    ]


def rlformer_config(
    name: str,
    agent: str,
    steps: int,
    seed: int,
    episodes: int,
    root: Path,
    overrides: Sequence[str] = (),
) -> TrainConfig:
    """The config of one rlformer run of the suite, named by :func:`run_name`."""
    return task_config(
        TASKS[name],
        steps,
        seed,
        root,
        *RLFORMER_AGENTS[agent],
        f"eval.episodes={episodes}",
        "eval.every=0",  # the clock times training alone; the final weights are scored
        f"run.name={run_name(name, agent, seed, steps, overrides)}",
        *overrides,
    )


def run_rlformer(
    name: str,
    agent: str,
    steps: int,
    seed: int,
    episodes: int,
    root: Path,
    overrides: Sequence[str] = (),
) -> Result:
    """Train one rlformer agent, or finish the run a killed suite left under ``root``.

    A run directory of this run's name (:func:`run_name`) with a checkpoint, whose saved config
    has this run's :func:`settings` (a preset changed since is trained afresh), is continued
    from its newest readable checkpoint with the config saved in it (as
    ``rlformer.runs.training.resume`` does, plus the clock's callback); the metrics past that
    checkpoint are dropped, so the curve reads like an uninterrupted run's. Its row says
    ``resumed: true``, and its steps/s count this process alone: ``seconds`` is
    :class:`TrainingLoopClock`'s time of the iterations trained here, ``timed_steps`` their env
    steps. metrics.jsonl has each earlier iteration's ``time/iteration_s``, but not the logging
    and checkpoint writes between iterations that the clock counts, so it is not added in. Only
    a run killed after its last checkpoint trains nothing here; its ``seconds`` is then the sum
    of every iteration's ``time/iteration_s`` from metrics.jsonl, ``timed_steps`` all its env
    steps. The row's ``commit`` is the checkout of the process that finished the run.
    """
    cfg = rlformer_config(name, agent, steps, seed, episodes, root, overrides)
    clock = TrainingLoopClock()
    result = None
    previous = resumable_run(root, cfg.run.name)
    if previous is not None:
        saved = load_saved_config(previous / "config.yaml", [f"eval.episodes={episodes}"])
        if not same_settings(settings(saved), settings(cfg)):
            print(f"{previous}: trained with other settings; training afresh", flush=True)
            previous = None
    if previous is not None:
        try:
            result = train(saved, resume_dir=previous, on_iteration=clock.tick)
        except CheckpointError as err:  # no checkpoint reads: nothing to continue
            print(f"{previous}: {err}; training afresh", flush=True)
            clock, previous = TrainingLoopClock(), None
    if result is None:
        result = train(cfg, on_iteration=clock.tick)
    assert result.evaluation is not None
    seconds, timed_steps = _timing(clock, result, resumed=previous is not None)
    other_mode = other_mode_score(result.run_dir, episodes)
    return Result(
        name,
        agent,
        seed,
        result.env_steps,
        seconds,
        result.evaluation["return_mean"],
        result.evaluation.get("success_rate"),
        training_curve(result.run_dir),
        overrides=list(overrides),
        budget=steps,
        resumed=previous is not None,
        timed_steps=timed_steps,
        score_other_mode=other_mode,
        settings=settings(cfg),
    )


def other_mode_score(run_dir: Path, episodes: int) -> float:
    """The final weights' mean return on the final evaluation's episodes with the other kind
    of action than the config evaluates with.

    Greedy play of a policy that has not learned the task can sit below random play where
    repeating one action is punished (Concentration's same two cards, Battleship's same
    square), while POPGym's published MMER comes from sampled training episodes: rows carry
    both, so a score "at chance" can be read either way.
    """
    policy = load_policy(str(run_dir))
    cfg = load_saved_config(run_dir / "config.yaml")
    results = run_policy_episodes(
        policy,
        cfg.env,
        episodes,
        cfg.eval.num_envs,
        seed=cfg.run.seed + FINAL_EVAL_SEED_OFFSET,
        deterministic=not cfg.eval.deterministic,
    )
    return float(results.summary()["return_mean"])


def _timing(
    clock: TrainingLoopClock, result: TrainResult, resumed: bool
) -> tuple[float, int | None]:
    """(seconds, env steps they cover; None for all of them): see :func:`run_rlformer`."""
    if not resumed:
        return clock.seconds, None
    if clock.ticks == 0:  # resumed at its last checkpoint
        rows = read_metrics(result.run_dir)
        return sum(row.get("time/iteration_s", 0.0) for row in rows), result.env_steps
    # PPO trains the same env steps every iteration.
    return clock.seconds, result.env_steps * clock.ticks // result.iterations


@dataclass(frozen=True)
class SB3Setup:
    """How the SB3 agents use the machine: torch threads, and whether the envs step in the
    learner's process (SB3's default ``DummyVecEnv``) or one process each (``SubprocVecEnv``,
    what SB3's docs suggest for using more cores)."""

    threads: int = 1
    subprocess_envs: bool = False

    def describe(self) -> dict[str, Any]:
        """Empty for the defaults, so rows from before this option read the same."""
        return {} if self == SB3Setup() else asdict(self)


def _sb3_env(
    cfg: TrainConfig,
    n_envs: int,
    seed: int,
    normalize_obs: bool,
    normalize_reward: bool,
    subprocess_envs: bool = False,
) -> Any:
    """SB3 vector env of the same env (imports, wrappers); Tuple observations flattened.

    Normalisation is SB3's ``VecNormalize``; episode returns still come out raw (``Monitor``
    sits inside it), so scores compare with rlformer's.
    """
    import gymnasium as gym
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecNormalize

    def make() -> gym.Env:
        env = env_from_config(cfg.env)
        if isinstance(env.observation_space, gym.spaces.Tuple):
            env = gym.wrappers.FlattenObservation(env)  # what an SB3 user has to do
        return env

    vec_env_cls = SubprocVecEnv if subprocess_envs else DummyVecEnv
    venv = make_vec_env(make, n_envs=n_envs, seed=seed, vec_env_cls=vec_env_cls)
    if not (normalize_obs or normalize_reward):
        return venv
    return VecNormalize(venv, norm_obs=normalize_obs, norm_reward=normalize_reward)


def run_sb3(
    name: str,
    agent: str,
    steps: int,
    seed: int,
    episodes: int,
    root: Path,
    device: str = "cpu",
    setup: SB3Setup = SB3Setup(),
) -> Result:
    """Train and score one SB3 agent, continuing a killed run from its checkpoint.

    Every CHECKPOINT_STEPS env steps the run saves what SB3's ``learn`` needs to go on (see
    :class:`SB3Checkpoint`) under ``ROOT/RUN_NAME``; a suite that finds one with the same SB3
    settings continues from it (``resumed: true``, steps/s of this process's part), and the
    finished run deletes it. What a checkpoint cannot hold: the episodes in progress and the
    LSTM states restart from env resets, and the unfinished rollout is sampled again, so a
    resumed run trains on slightly different data than an uninterrupted one would.
    """
    from sb3_contrib import RecurrentPPO
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback

    cfg = task_config(TASKS[name], steps, seed, root)
    zoo = ZOO[name]() if agent == "recurrent_ppo" and name in ZOO else {}
    n_envs = zoo.pop("n_envs", cfg.rollout.envs_per_worker)
    # A zoo entry brings its own normalisation; otherwise SB3 gets the rlformer config's.
    if zoo:
        normalize_obs, normalize_reward = zoo.pop("normalize_obs", False), False
    else:
        normalize_obs, normalize_reward = cfg.model.normalize_obs, cfg.model.normalize_reward
    default_kwargs = {"lstm_hidden_size": cfg.model.recurrent_hidden, "enable_critic_lstm": True}
    policy_kwargs = zoo.pop("policy_kwargs", default_kwargs)
    settings = {
        "n_steps": cfg.rollout.fragment_length,
        "batch_size": n_envs * cfg.rollout.fragment_length // cfg.ppo.num_minibatches,
        "learning_rate": cfg.ppo.learning_rate,
        "n_epochs": cfg.ppo.update_epochs,
        "gamma": cfg.ppo.gamma,
        "gae_lambda": cfg.ppo.gae_lambda,
        "ent_coef": cfg.ppo.ent_coef,
        # The zoo's entries keep SB3's default (normalised advantages); otherwise the config's.
        "normalize_advantage": cfg.ppo.norm_adv if not zoo else True,
        **zoo,
    }
    store = SB3Checkpoint(
        root / sb3_run_name(name, agent, seed, steps, device, setup),
        {
            "agent": agent,
            "n_envs": n_envs,
            "policy_kwargs": policy_kwargs,
            "normalize_obs": normalize_obs,
            "normalize_reward": normalize_reward,
            "env": cfg.env.model_dump(mode="json"),
            **settings,
        },
    )
    saved = store.load()
    done = 0 if saved is None else int(saved["num_timesteps"])
    # A resumed run's envs and random streams start from other seeds than the part it has
    # already trained (SB3 seeds the envs again from the model's seed); its weights are loaded.
    venv = _sb3_env(
        cfg, n_envs, seed + done, normalize_obs, normalize_reward, setup.subprocess_envs
    )
    kwargs = {"seed": seed + done, "device": device, **settings}
    if agent == "recurrent_ppo":
        model = RecurrentPPO("MlpLstmPolicy", venv, policy_kwargs=policy_kwargs, **kwargs)
    else:
        model = PPO("MlpPolicy", venv, **kwargs)
    curve: list[tuple[int, float]] = []
    if saved is not None:
        curve = store.restore(model, saved)
        print(f"resuming {store.folder} at {done}/{steps} env steps", flush=True)

    class Curve(BaseCallback):
        def _on_rollout_start(self) -> None:
            # After the update on the rollout that ended at num_timesteps: SB3 calls
            # _on_rollout_end before that update, and a run resumed from there would skip it.
            if self.num_timesteps // CHECKPOINT_STEPS > store.saved_at // CHECKPOINT_STEPS:
                store.save(self.model, curve)

        def _on_rollout_end(self) -> None:
            returns = [info["r"] for info in self.model.ep_info_buffer]
            if returns:
                curve.append((self.num_timesteps, float(np.mean(returns))))

        def _on_step(self) -> bool:
            return True

    torch.set_num_threads(setup.threads)
    started = time.perf_counter()
    try:
        if steps > done:
            model.learn(
                total_timesteps=steps - done, callback=Curve(), reset_num_timesteps=saved is None
            )
    finally:
        torch.set_num_threads(1)
    seconds = time.perf_counter() - started
    probe = env_from_config(cfg.env)  # the unflattened space the evaluation envs return
    policy = sb3_eval_policy(model, venv, probe.observation_space)
    probe.close()
    results = run_policy_episodes(
        policy,
        cfg.env,
        episodes,
        cfg.eval.num_envs,
        seed + FINAL_EVAL_SEED_OFFSET,
        cfg.eval.deterministic,
    )
    score = float(np.mean(results.returns))
    venv.close()  # ends SubprocVecEnv's processes
    store.remove()
    return Result(
        name,
        agent,
        seed,
        model.num_timesteps,
        seconds,
        score,
        results.success_rate,
        curve,
        sb3_setup=setup.describe(),
        budget=steps,
        resumed=saved is not None,
        timed_steps=None if saved is None else model.num_timesteps - done,
    )


def sb3_run_name(
    task: str, agent: str, seed: int, budget: int, device: str, setup: SB3Setup
) -> str:
    """The folder of an SB3 run's checkpoint under ``--root``, and the name it is claimed by:
    :func:`run_name`'s, plus the device and machine use where they are not the defaults, so a
    variant measured into its own ``--out`` never continues or blocks the default's run."""
    name = run_name(task, agent, seed, budget, [])
    if device == "cpu" and not setup.describe():
        return name
    return f"{name}-{_digest([device, setup.describe()])}"


def _describe_setting(value: Any) -> str:
    """A JSON-able stand-in for an SB3 setting that is an object, the same in every process:
    a class by its name, a schedule by its values at the start and the end of training."""
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    if callable(value):
        return f"schedule {value(1.0)} to {value(0.0)}"
    raise TypeError(f"no stable description of SB3 setting {value!r}")


class SB3Checkpoint:
    """An SB3 run's state between ``learn`` calls, in ``FOLDER/sb3_checkpoint.pt``.

    It holds the policy's and the optimiser's tensors, the env steps done, the learning curve
    so far and ``VecNormalize``'s running statistics, as plain tensors and numbers that
    ``torch.load(weights_only=True)`` reads without running code (SB3's own ``save`` pickles
    objects). A checkpoint whose SB3 settings differ from the run's is ignored: the run trains
    afresh. Written atomically, so a kill mid-write leaves the previous one.
    """

    FILE = "sb3_checkpoint.pt"

    def __init__(self, folder: Path, settings: dict[str, Any]) -> None:
        self.folder = folder
        self.settings = json.loads(json.dumps(settings, default=_describe_setting))
        self.saved_at = 0  # env steps of the newest checkpoint this process knows of

    def load(self) -> dict[str, Any] | None:
        path = self.folder / self.FILE
        if not path.is_file():
            return None
        state = torch.load(path, map_location="cpu", weights_only=True)
        if state.get("settings") != self.settings:
            print(f"{path}: trained with other settings; training afresh", flush=True)
            return None
        self.saved_at = int(state["num_timesteps"])
        return state

    def save(self, model: Any, curve: list[tuple[int, float]]) -> None:
        from stable_baselines3.common.vec_env import VecNormalize

        state: dict[str, Any] = {
            "settings": self.settings,
            "num_timesteps": int(model.num_timesteps),
            "curve": [[int(step), float(value)] for step, value in curve],
            "policy": model.policy.state_dict(),
            "optimizer": model.policy.optimizer.state_dict(),
        }
        env = model.get_vec_normalize_env()
        if isinstance(env, VecNormalize):
            for name in ("obs_rms", "ret_rms"):
                if name not in vars(env):  # kept only for what it normalises
                    continue
                rms = vars(env)[name]
                state[name] = {
                    "mean": torch.as_tensor(rms.mean),
                    "var": torch.as_tensor(rms.var),
                    "count": float(rms.count),
                }
        buffer = io.BytesIO()
        torch.save(state, buffer)
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.folder / self.FILE, buffer.getvalue())
        self.saved_at = state["num_timesteps"]

    def restore(self, model: Any, state: dict[str, Any]) -> list[tuple[int, float]]:
        """Loads ``state`` into a freshly built ``model``; the curve so far."""
        from stable_baselines3.common.vec_env import VecNormalize

        model.policy.load_state_dict(state["policy"])
        model.policy.optimizer.load_state_dict(state["optimizer"])
        model.num_timesteps = int(state["num_timesteps"])
        env = model.get_vec_normalize_env()
        if isinstance(env, VecNormalize):
            for name in ("obs_rms", "ret_rms"):
                if name not in state:
                    continue
                rms, saved = vars(env)[name], state[name]
                rms.mean, rms.var = saved["mean"].numpy(), saved["var"].numpy()
                rms.count = saved["count"]
        return [(int(step), float(value)) for step, value in state["curve"]]

    def remove(self) -> None:
        (self.folder / self.FILE).unlink(missing_ok=True)


def sb3_eval_policy(model: Any, venv: Any, space: Any) -> SB3Policy:
    """An SB3 model playing rlformer's evaluation episodes, greedily or sampling as the config's
    ``eval.deterministic`` says (the rlformer agents follow it too).

    Every agent is scored on the same episodes (same seeds, hence the same decks, boards and
    start states): on HigherLower the deck alone moves the best memoryless score by 0.015, as
    much as the gaps being compared. Observations get what SB3 saw in training: Tuple spaces
    flattened, then ``VecNormalize``'s frozen statistics.
    """
    import gymnasium as gym
    from stable_baselines3.common.vec_env import VecNormalize

    normalize = venv if isinstance(venv, VecNormalize) else None

    def preprocess(obs: Any) -> Any:
        if isinstance(space, gym.spaces.Tuple):
            rows = len(obs[0])
            obs = np.stack(
                [
                    gym.spaces.flatten(space, tuple(leaf[slot] for leaf in obs))
                    for slot in range(rows)
                ]
            )
        return obs if normalize is None else normalize.normalize_obs(obs)

    return SB3Policy(model, "sb3", preprocess, observation_space=space)


def _done(out: Path) -> list[Result]:
    if not out.exists():
        return []
    lines = [line for line in out.read_text().splitlines() if line.strip()]
    rows = []
    for number, line in enumerate(lines):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if number < len(lines) - 1:
                raise
            # The last line of a file another suite process is appending to right now.
    return [Result(**{"commit": None, **row}) for row in rows]  # older rows name no commit


@dataclass
class AgentRow:
    """One agent's results on one task, summarised for a report line."""

    agent: str
    results: list[Result]  # by seed
    scores: ScoreSummary  # over seeds, bootstrap CIs
    steps_per_s: float
    ratio: str  # steps/s against the reference agent's, "-" where it did not run
    mmer: float | None = None  # mean over seeds of mmer(), None if a seed has no curve


def agent_rows(rows: list[Result], agents: Sequence[str], reference: str) -> list[AgentRow]:
    """``rows`` (one task) grouped by agent, in ``agents``' order, with the throughput ratio to
    ``reference``."""
    reference_speed = [r.steps_per_s for r in rows if r.agent == reference]
    summary: list[AgentRow] = []
    for agent in agents:
        mine = sorted((r for r in rows if r.agent == agent), key=lambda r: r.seed)
        if not mine:
            continue
        speed = float(np.mean([r.steps_per_s for r in mine]))
        ratio = f"{speed / np.mean(reference_speed):6.2f}x" if reference_speed else "      -"
        scores = summarize_scores([r.score for r in mine], seed=0)
        peaks = [r.mmer for r in mine]
        peak = None if None in peaks else float(np.mean(peaks))
        summary.append(AgentRow(agent, mine, scores, speed, ratio, peak))
    return summary


def report(results: list[Result], plots: Path | None) -> None:
    """Per task and budget: one row per agent with score mean / IQM (95% CIs), MMER (mean over
    seeds of the maximum mean episodic return during training) and throughput."""
    groups = dict.fromkeys((r.task, row_budget(r), variant(r.overrides)) for r in results)
    for name, budget, changed in groups:
        rows = [
            r
            for r in results
            if (r.task, row_budget(r), variant(r.overrides)) == (name, budget, changed)
        ]
        several = sum(task == name for task, _, _ in groups) > 1
        title = _title(name, budget) if several else name
        print(f"\n{title}" + (f" with --set {' --set '.join(changed)}" if changed else ""))
        print(
            f"  {'agent':14s} {'seeds':>5s} {'mean [95% CI]':>26s} {'IQM [95% CI]':>26s} "
            f"{'MMER':>7s} {'other':>7s} {'success':>7s} {'steps/s':>8s} {'vs RPPO':>7s}"
        )
        for row in agent_rows(rows, AGENTS, "recurrent_ppo"):
            s = row.scores
            # Where the env reports is_success (MiniGrid through its preset's wrapper).
            rates = [r.success_rate for r in row.results]
            success = "-" if None in rates else f"{100 * np.mean(rates):.1f}%"
            peak = "-" if row.mmer is None else f"{row.mmer:.3f}"
            # "other": the mean over seeds of the evaluation with the other kind of action
            others = [r.score_other_mode for r in row.results]
            other = "-" if None in others else f"{np.mean(others):.3f}"
            print(
                f"  {row.agent:14s} {len(row.results):5d} "
                f"{s.mean:8.3f} [{s.mean_ci[0]:7.3f}, {s.mean_ci[1]:7.3f}] "
                f"{s.iqm:8.3f} [{s.iqm_ci[0]:7.3f}, {s.iqm_ci[1]:7.3f}] {peak:>7s} {other:>7s} "
                f"{success:>7s} {row.steps_per_s:8.0f} {row.ratio}"
            )
        if plots is not None:
            png = plot_name(name, budget)
            if changed:  # each variant its own PNG
                png = f"{Path(png).stem}-{variant_digest(changed)}.png"
            _plot(_title(name, budget), rows, plots / png)


def plot_name(task: str, budget: int | None) -> str:
    """The PNG of one task and budget: ``TASK.png`` for the task's default budget, else
    ``TASK-BUDGET.png`` (``TASK-unrecorded.png`` for rows without one), whichever budgets a
    report shows, so that a ``--steps`` report never draws over the default budget's curves."""
    known = TASKS.get(task)
    if known is not None and budget == known.steps:
        return f"{task}.png"
    return f"{task}-{'unrecorded' if budget is None else budget}.png"


def _title(name: str, budget: int | None) -> str:
    return f"{name} ({'budget not recorded' if budget is None else f'{budget:,} steps'})"


def _plot(name: str, rows: list[Result], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for agent in AGENTS:
        curves = [r.curve for r in rows if r.agent == agent and r.curve]
        if not curves:
            continue
        grid = np.linspace(0, max(c[-1][0] for c in curves), 50)
        values = np.array([np.interp(grid, *zip(*c, strict=True)) for c in curves])
        ax.plot(
            grid,
            values.mean(0),
            label=f"{agent} ({len(curves)} seed{'s' if len(curves) > 1 else ''})",
        )
        ax.fill_between(grid, values.min(0), values.max(0), alpha=0.2)
    ax.set(title=name, xlabel="env steps", ylabel="mean episode return (recent episodes)")
    ax.legend(fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def _train_one(
    name: str,
    agent: str,
    steps: int,
    seed: int,
    args: argparse.Namespace,
    overrides: Sequence[str],
    sb3_setup: SB3Setup,
) -> Result:
    """One suite run: an SB3 agent, or an rlformer one (resumed where a killed run left it)."""
    if agent in ("recurrent_ppo", "ppo_mlp"):
        return run_sb3(name, agent, steps, seed, args.episodes, args.root, args.device, sb3_setup)
    return run_rlformer(name, agent, steps, seed, args.episodes, args.root, overrides)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--agents", nargs="+", default=list(DEFAULT_AGENTS), choices=list(AGENTS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help="Override every task's budget; rows count as done for their own budget only, and "
        "the report shows this budget's rows (and rows of unknown budget).",
    )
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="2k steps, 1 seed, 5 episodes.")
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/memory_suite/results.jsonl")
    )
    parser.add_argument(
        "--plots",
        type=Path,
        default=None,
        help="Folder of the learning-curve PNGs (default: --out's folder, so a variant's --out "
        "does not redraw benchmarks/results/memory_suite from its own rows).",
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=Path("runs/memory_suite"),
        help="Folder of the rlformer run directories; a killed run found here is resumed.",
    )
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Config override for the rlformer agents (repeatable), to measure a variant; "
        "rows record it and a row counts as done only for the same overrides (the SB3 agents "
        "ignore them).",
    )
    parser.add_argument(
        "--device",
        default="cpu",
        choices=["cpu", "cuda"],
        help="Learner device of every agent (rlformer's run.device, SB3's device); rlformer's "
        "rollout workers act on CPU either way. Give a GPU run its own --out.",
    )
    parser.add_argument(
        "--sb3-threads",
        type=int,
        default=1,
        help="torch threads of the SB3 agents (default 1, as every agent; rlformer's learner "
        "and workers use one each). Give a variant its own --out.",
    )
    parser.add_argument(
        "--sb3-subprocess-envs",
        action="store_true",
        help="step the SB3 agents' envs in SubprocVecEnv processes instead of in-process.",
    )
    args = parser.parse_args()
    sb3_setup = SB3Setup(args.sb3_threads, args.sb3_subprocess_envs)
    if args.quick:
        args.steps, args.seeds, args.episodes = 2048, 1, 5
    torch.set_num_threads(1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    plots = args.plots or args.out.parent
    finished = _done(args.out)
    rlformer_overrides = [f"run.device={args.device}", *args.overrides]
    if not args.report_only:
        recorded: dict[tuple[Any, ...], list[dict[str, Any] | None]] = {}
        for row in finished:
            recorded.setdefault(row_key(row), []).append(row.settings)
        for name in args.tasks:
            steps = args.steps or TASKS[name].steps
            for seed in range(args.seeds):
                for agent in args.agents:
                    sb3 = agent in ("recurrent_ppo", "ppo_mlp")
                    overrides = [] if sb3 else rlformer_overrides
                    planned: dict[str, Any] = {}
                    if not sb3:
                        cfg = rlformer_config(
                            name, agent, steps, seed, args.episodes, args.root, overrides
                        )
                        planned = settings(cfg)
                    key = run_key(name, agent, seed, steps, overrides)
                    if any(same_settings(done, planned) for done in recorded.get(key, [])):
                        continue
                    claimed_as = (
                        sb3_run_name(name, agent, seed, steps, args.device, sb3_setup)
                        if sb3
                        else run_name(name, agent, seed, steps, overrides)
                    )
                    with claim(args.root, claimed_as) as mine:
                        if not mine:
                            print(
                                f"{name} {agent} seed {seed}: another process is training "
                                "it; skipped",
                                flush=True,
                            )
                            continue
                        # Another process may have finished it since this one read the rows.
                        late = [r.settings for r in _done(args.out) if row_key(r) == key]
                        if any(same_settings(done, planned) for done in late):
                            continue
                        result = _train_one(name, agent, steps, seed, args, overrides, sb3_setup)
                        with args.out.open("a") as handle:
                            handle.write(json.dumps(asdict(result)) + "\n")
                    print(
                        f"{name} {agent} seed {seed}: score {result.score:.3f}, "
                        f"MMER {result.mmer if result.mmer is None else round(result.mmer, 3)}, "
                        f"{result.steps_per_s:.0f} steps/s"
                        + (" (resumed)" if result.resumed else ""),
                        flush=True,
                    )
    finished = _done(args.out)  # with the rows of suites running beside this one
    shown = [
        r
        for r in finished
        if r.task in args.tasks and (args.steps is None or row_budget(r) in (None, args.steps))
    ]
    report(shown, plots)


if __name__ == "__main__":
    main()
