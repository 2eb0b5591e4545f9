"""Online Decision Transformer benchmark: does fine-tuning on its own rollouts beat the controls?

Per task and seed, in one process, one arm after another:

1. ``offline_dt``: a DT trained offline for ``--pretrain-steps`` gradient steps, scored with the
   task's target return. With ``--pretrain-loss odt`` (the default, as in the paper) it is an
   ``algo: odt`` run with ``odt.online_steps=0``: ODT's likelihood-plus-entropy loss on the
   offline data; with ``mse`` an ``algo: dt`` run with the DT's squared error;
2. ``odt``: that DT fine-tuned online for ``--online-steps`` env steps: arm 1's own run resumed
   with online steps (same optimiser, temperature and RNG streams), or, after ``mse``, a new
   ``algo: odt`` run from its checkpoint (``odt.init_from``, a fresh spread head); its
   wall-clock time W is recorded;
3. ``dt_more``: control (a), arm 1 trained on with its own loss for the same wall-clock W on the
   offline data only;
4. ``dt_top``: control (a) on the best ``odt.replay_size`` offline trajectories only (those ODT's
   buffer starts with): what training on filtered data alone gives, without online rollouts;
5. ``ppo``: control (b), rlformer PPO (GTrXL, observation and reward normalisation) from scratch
   with the same ``--online-steps`` env steps.

Every arm ends with the same deterministic evaluation (``--episodes`` episodes, seeds disjoint
from training). Hopper scores are D4RL-normalised (0 = random, 100 = D4RL expert); CartPole has
no D4RL reference, so its scores are raw returns. Rows go to ``--out`` (JSONL) as they finish, so
a killed run continues where it stopped, and ``--extend`` continues an earlier invocation's ODT
runs to a larger ``--online-steps`` (control (a) then gets their whole time). The summary (mean
and IQM with bootstrap 95% CIs over seeds) is printed at the end or with ``--report-only``.

    .venv/bin/python benchmarks/odt.py --task cartpole --dataset data/cartpole_medium.hdf5
    .venv/bin/python benchmarks/odt.py --task hopper --dataset data/hopper/hopper-medium.hdf5
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from rlformer.config import TrainConfig, load_config
from rlformer.data.references import normalized_score
from rlformer.data.trajectory_buffer import TrajectoryBuffer
from rlformer.evaluation.statistics import summarize_scores
from rlformer.runs.algorithm import FINAL_EVAL_SEED_OFFSET
from rlformer.runs.checkpoints import newest_readable_checkpoint
from rlformer.runs.loop import build_algorithm
from rlformer.runs.training import train

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
ARMS = ("offline_dt", "odt", "dt_more", "dt_top", "ppo")


@dataclass(frozen=True)
class Task:
    env_id: str
    dt_config: str
    odt_config: str
    target: float
    ppo_overrides: tuple[str, ...]


TASKS = {
    "hopper": Task(
        "Hopper-v5",
        "dt_hopper.yaml",
        "odt_hopper.yaml",
        3600.0,
        ("rollout.envs_per_worker=8", "rollout.fragment_length=256", "ppo.num_minibatches=8"),
    ),
    "cartpole": Task(
        "CartPole-v1",
        "dt_hopper.yaml",  # the published DT settings; env, data and scale are overridden
        "odt_cartpole.yaml",
        500.0,
        ("rollout.envs_per_worker=8", "rollout.fragment_length=128", "ppo.num_minibatches=4"),
    ),
}


@dataclass
class Row:
    task: str
    seed: int
    arm: str
    episode_return: float
    score: float
    env_steps: int
    gradient_steps: int
    seconds: float


def _common(args: argparse.Namespace, seed: int, name: str) -> list[str]:
    return [
        f"run.seed={seed}",
        f"run.root={args.root}",
        f"run.name={args.task}_{name}_s{seed}",
        "run.progress=false",
        f"eval.episodes={args.episodes}",
    ]


def _dt_settings(args: argparse.Namespace, task: Task) -> list[str]:
    """What every DT-family arm shares: data, scale, warm-up, target, logging, ``--set``."""
    return [
        f"dt.dataset={args.dataset}",
        f"dt.return_scale={args.return_scale}",
        f"dt.warmup_steps={args.warmup}",
        f"dt.target_returns=[{task.target}]",
        "dt.log_every=100",
        *args.dt_set,
    ]


def _dt_config(args: argparse.Namespace, task: Task, seed: int, steps: int) -> TrainConfig:
    return load_config(
        CONFIGS / task.dt_config,
        [
            *_common(args, seed, "pre"),
            f"env.id={task.env_id}",
            f"dt.train_steps={steps}",
            "run.checkpoint_every=1000",
            # The squared-error DT reads no odt.* or rollout.* keys (its config refuses them);
            # those of --set are for the ODT arm.
            *[s for s in _dt_settings(args, task) if not s.startswith(("odt.", "rollout."))],
        ],
    )


def _score(task: Task, episode_return: float) -> float:
    score = normalized_score(episode_return, task.env_id)
    return episode_return if score is None else score


def _row(
    task_name: str, seed: int, arm: str, ret: float, env_steps: int, grads: int, s: float
) -> Row:
    return Row(task_name, seed, arm, ret, _score(TASKS[task_name], ret), env_steps, grads, s)


def _odt_config(
    args: argparse.Namespace, task: Task, seed: int, name: str, extra: list[str]
) -> TrainConfig:
    return load_config(
        CONFIGS / task.odt_config,
        [
            *_common(args, seed, name),
            *([f"odt.updates_per_iteration={args.updates}"] if args.updates else []),
            *_dt_settings(args, task),
            *extra,
        ],
    )


def _pretrained_dir(args: argparse.Namespace, seed: int) -> Path | None:
    """The finished run of arm 1 of an earlier, interrupted invocation."""
    finished = sorted(args.root.glob(f"{args.task}_pre_s{seed}-*/eval.json"))
    return finished[-1].parent if finished else None


def _pretrain_config(args: argparse.Namespace, task: Task, seed: int, steps: int) -> TrainConfig:
    """Arm 1 (and control (a) with more steps): squared-error DT, or ODT's loss offline."""
    if args.pretrain_loss == "mse":
        return _dt_config(args, task, seed, steps)
    return _odt_config(
        args,
        task,
        seed,
        "pre",
        [
            "odt.init_from=null",
            f"odt.pretrain_steps={steps}",
            "odt.online_steps=0",
            "run.checkpoint_every=1000",
        ],
    )


@dataclass(frozen=True)
class EarlierRuns:
    """What ``--extend`` continues for one seed: the earlier ODT run and the seconds it took."""

    odt_dir: Path
    odt_seconds: float


def _extended_runs(
    args: argparse.Namespace, seed: int, done: set[tuple[int, str]], record: Callable[[Row], None]
) -> EarlierRuns:
    """Take one seed's arm 1 and ODT run from an earlier invocation with fewer online steps.

    Arm 1 is copied into ``--root`` (control (a) resumes it) and its row carried over unchanged
    (and added to ``done``); the ODT run is continued to ``--online-steps``, and its seconds count
    the earlier part too, so control (a) gets the whole run's wall-clock time.
    """
    old_root, old_results = args.extend
    rows = [Row(**json.loads(line)) for line in old_results.read_text().splitlines()]
    mine = {r.arm: r for r in rows if r.task == args.task and r.seed == seed}
    old_pre = sorted(old_root.glob(f"{args.task}_pre_s{seed}-*/eval.json"))
    old_odt = sorted(old_root.glob(f"{args.task}_odt_s{seed}-from-*/eval.json"))
    if not (old_pre and old_odt and {"offline_dt", "odt"} <= mine.keys()):
        raise SystemExit(
            f"--extend: no finished arm-1 and ODT runs of seed {seed} in {old_root} "
            f"with rows in {old_results}"
        )
    if (seed, "offline_dt") not in done:
        shutil.copytree(old_pre[-1].parent, args.root / old_pre[-1].parent.name, dirs_exist_ok=True)
        record(mine["offline_dt"])
        done.add((seed, "offline_dt"))
    return EarlierRuns(old_odt[-1].parent, mine["odt"].seconds)


def _offline_control(
    args: argparse.Namespace, task: Task, seed: int, pre_dir: Path, seconds: float, arm: str
) -> Row:
    """Control (a): resume arm 1 and train on offline data only, with the same loss, for the
    wall-clock time ODT took.

    ``dt_more`` samples the whole dataset, as arm 1 did. ``dt_top`` samples only the offline
    trajectories ODT's replay buffer starts with (the best ``odt.replay_size``), so it tells a
    gain from online learning apart from one that training on the best data alone would give.
    """
    cfg = _pretrain_config(args, task, seed, 10**9)
    algo = build_algorithm(cfg)
    path, payload = newest_readable_checkpoint(pre_dir)
    algo.restore(payload, path, trust=False)
    torch.set_rng_state(payload["torch_rng"])
    if arm == "dt_top":
        # The ODT arm's buffer size (an mse arm 1 is an ``algo: dt`` config without odt keys).
        size = _odt_config(args, task, seed, "odt", []).odt.replay_size
        top = TrajectoryBuffer(size, algo.dataset.episodes).episodes
        algo.sampler = algo.sampler_over(top, "best offline trajectories")
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        algo.iterate()
    evaluation = algo.evaluate(cfg.eval.episodes, cfg.run.seed + FINAL_EVAL_SEED_OFFSET)
    key = f"target_{task.target:g}/return_mean"
    return _row(
        args.task,
        seed,
        arm,
        evaluation.metrics[key],
        0,
        algo.learner.step,
        time.perf_counter() - started,
    )


def run_seed(
    args: argparse.Namespace, seed: int, done: set[tuple[int, str]], record: Callable[[Row], None]
) -> None:
    """The four arms of one seed (skipping those already in the results file)."""
    task = TASKS[args.task]
    key = f"target_{task.target:g}/return_mean"
    earlier = _extended_runs(args, seed, done, record) if args.extend else None
    started = time.perf_counter()
    pre_cfg = _pretrain_config(args, task, seed, args.pretrain_steps)
    pre_dir = _pretrained_dir(args, seed)
    if pre_dir is None or (seed, "offline_dt") not in done:
        result = train(pre_cfg)
        pre_dir = result.run_dir
        assert result.evaluation is not None
        seconds = time.perf_counter() - started
        record(
            _row(
                args.task,
                seed,
                "offline_dt",
                result.evaluation[key],
                0,
                args.pretrain_steps,
                seconds,
            )
        )

    odt_seconds = None
    if (seed, "odt") not in done:
        started = time.perf_counter()
        if args.pretrain_loss == "mse":
            # Fine-tune the squared-error DT: a fresh spread head, optimiser and temperature.
            odt_cfg = _odt_config(
                args,
                task,
                seed,
                "odt",
                [f"odt.init_from={pre_dir}", f"odt.online_steps={args.online_steps}"],
            )
            result = train(odt_cfg)
        else:
            # Continue arm 1's own run (optimiser, temperature, RNG) online, in a copy of it;
            # with --extend, continue the earlier invocation's finished ODT run instead.
            source = earlier.odt_dir if earlier else pre_dir
            odt_dir = args.root / (
                source.name if earlier else f"{args.task}_odt_s{seed}-from-{pre_dir.name}"
            )
            shutil.rmtree(odt_dir, ignore_errors=True)
            shutil.copytree(source, odt_dir)
            odt_cfg = _odt_config(
                args,
                task,
                seed,
                "odt",
                [
                    "odt.init_from=null",
                    f"odt.pretrain_steps={args.pretrain_steps}",
                    f"odt.online_steps={args.online_steps}",
                ],
            )
            result = train(odt_cfg, resume_dir=odt_dir)
        odt_seconds = time.perf_counter() - started + (earlier.odt_seconds if earlier else 0.0)
        assert result.evaluation is not None
        grads = newest_readable_checkpoint(result.run_dir)[1]["learner"]["step"]
        record(
            _row(
                args.task, seed, "odt", result.evaluation[key], result.env_steps, grads, odt_seconds
            )
        )
    else:
        odt_seconds = next(r.seconds for r in args.finished if (r.seed, r.arm) == (seed, "odt"))

    for arm in ("dt_more", "dt_top"):
        if (seed, arm) not in done:
            record(_offline_control(args, task, seed, pre_dir, odt_seconds, arm))

    if (seed, "ppo") not in done:
        ppo_cfg = load_config(
            None,
            [
                *_common(args, seed, "ppo"),
                f"env.id={task.env_id}",
                f"ppo.total_steps={args.online_steps}",
                "model.normalize_obs=true",
                "model.normalize_reward=true",
                *task.ppo_overrides,
            ],
        )
        started = time.perf_counter()
        result = train(ppo_cfg)
        assert result.evaluation is not None
        record(
            _row(
                args.task,
                seed,
                "ppo",
                result.evaluation["return_mean"],
                result.env_steps,
                0,
                time.perf_counter() - started,
            )
        )


def report(rows: list[Row]) -> None:
    for task in dict.fromkeys(r.task for r in rows):
        mine = [r for r in rows if r.task == task]
        print(f"\n{task} ({'D4RL-normalised score' if task == 'hopper' else 'return'})")
        print(
            f"  {'arm':10s} {'seeds':>5s} {'mean [95% CI]':>26s} {'IQM [95% CI]':>26s} "
            f"{'env steps':>9s} {'grad steps':>10s} {'seconds':>8s}"
        )
        for arm in ARMS:
            arm_rows = [r for r in mine if r.arm == arm]
            if not arm_rows:
                continue
            s = summarize_scores([r.score for r in arm_rows], seed=0)
            n = len(arm_rows)
            print(
                f"  {arm:10s} {n:5d} {s.mean:8.1f} [{s.mean_ci[0]:7.1f}, {s.mean_ci[1]:7.1f}] "
                f"{s.iqm:8.1f} [{s.iqm_ci[0]:7.1f}, {s.iqm_ci[1]:7.1f}] "
                f"{sum(r.env_steps for r in arm_rows) / n:9.0f} "
                f"{sum(r.gradient_steps for r in arm_rows) / n:10.0f} "
                f"{sum(r.seconds for r in arm_rows) / n:8.0f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=list(TASKS), default="cartpole")
    parser.add_argument("--dataset", type=Path, help="D4RL-layout file of the task")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--only-seeds", type=int, nargs="+", help="run just these seeds (parallel processes)"
    )
    parser.add_argument("--pretrain-steps", type=int, default=2000)
    parser.add_argument("--online-steps", type=int, default=20_000)
    parser.add_argument(
        "--updates", type=int, default=0, help="odt.updates_per_iteration (0: config)"
    )
    parser.add_argument(
        "--pretrain-loss",
        choices=("mse", "odt"),
        default="odt",
        help="arm 1: a squared-error DT fine-tuned with a fresh spread head (mse), or ODT's "
        "own loss offline, continued online by the same run (odt, as the paper does)",
    )
    parser.add_argument(
        "--set",
        dest="dt_set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override for every DT and ODT arm (e.g. dt.act_context=5); repeatable",
    )
    parser.add_argument("--warmup", type=int, default=1000, help="dt.warmup_steps of every run")
    parser.add_argument("--return-scale", type=float, default=1000.0)
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/odt/hopper_medium46_30k.jsonl")
    )
    parser.add_argument("--root", type=Path, default=Path("runs/odt_bench"))
    parser.add_argument(
        "--extend",
        nargs=2,
        type=Path,
        metavar=("ROOT", "RESULTS"),
        help="continue the finished ODT runs of an earlier invocation (its --root and --out) "
        "to --online-steps, instead of starting them again from arm 1",
    )
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    finished = (
        [Row(**json.loads(line)) for line in args.out.read_text().splitlines()]
        if args.out.exists()
        else []
    )
    args.finished = finished
    if not args.report_only:
        if args.dataset is None:
            parser.error("--dataset is required unless --report-only")
        if args.extend and args.pretrain_loss == "mse":
            parser.error("--extend continues ODT runs of --pretrain-loss odt only")

        def record(row: Row) -> None:
            with args.out.open("a") as handle:
                handle.write(json.dumps(asdict(row)) + "\n")
            finished.append(row)
            print(f"{row.task} seed {row.seed} {row.arm}: score {row.score:.1f}", flush=True)

        for seed in args.only_seeds or range(args.seeds):
            done = {(r.seed, r.arm) for r in finished if r.task == args.task}
            run_seed(args, seed, done, record)
    report(finished)


if __name__ == "__main__":
    main()
