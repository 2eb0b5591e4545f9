"""BenchMARL's MAPPO on a PettingZoo MPE task, as the peer run of the multi-agent benchmark.

Runs inside the peer venv that benchmarks/peers/setup_benchmarl.sh builds (not the project's venv):

    /work/peers/benchmarl-venv/bin/python benchmarks/peers/benchmarl_mappo.py \
        --task simple_spread --frames 1000000 --seed 0 \
        --out benchmarks/results/multiagent/benchmarl.jsonl

Everything comes from the configs BenchMARL ships (algorithm ``mappo``, task
``pettingzoo/<task>``, experiment ``base_experiment``, model ``layers/mlp`` for actor and
critic, as ``benchmarl/run.py`` composes them by default), except:

* ``max_n_frames`` (--frames) and the seed (--seed);
* ``sampling_device``/``train_device``/``buffer_device`` = cpu (already the shipped values);
* evaluation: BenchMARL's periodic evaluation keeps its shipped interval (120,000 frames),
  episode count and deterministic actions, but without rendering videos (``render=False``)
  and logging to CSV only (no wandb); after training the final policy is evaluated on 100
  episodes, episode i starting from the PettingZoo env's ``reset(seed=i)`` for i = 0..99,
  with deterministic actions;
* --actions: BenchMARL's shipped ``prefer_continuous_actions: True`` makes MPE tasks run with
  continuous actions (the default here too); ``--actions discrete`` sets it to False, to match
  a learner that uses the tasks' Discrete(5) actions.

BenchMARL ships GRU and LSTM layer configs (--model gru|lstm swaps the actor's layers/mlp
for one of them) but no recurrent setting for these tasks: its default, and the one the
benchmark uses, is the MLP.

One frame is one step of one environment with all its agents, as BenchMARL counts them
(an iteration collects 6,000 frames from 10 environments stepped in series, then makes
45 passes of 15 minibatches of 400 frames). A budget that is not a multiple of 6,000 is
rounded up to whole iterations; the row records the frames run.

The run uses one torch thread (--threads). torchrl raises the count again when BenchMARL
closes a batched env during setup, which on a shared 2-core machine made each optimiser
step some 20 times slower; the count is set back once the experiment is set up.

The PettingZoo MPE tasks: torchrl's PettingZooEnv finds them under ``pettingzoo.mpe``, which
PettingZoo 1.25+ replaced by a stub that raises ImportError (the tasks moved into the ``mpe2``
package). When that stub is found, ``pettingzoo.mpe`` is aliased to ``mpe2`` before BenchMARL
builds the task; with PettingZoo 1.24.x its own ``pettingzoo.mpe`` is used. For
simple_spread_v3 and simple_speaker_listener_v4 the two give identical observations, rewards
and episode ends for the same seed and actions.

--run-dir makes a training run resumable: BenchMARL checkpoints into it every
--checkpoint-every frames (its own ``checkpoint_interval``; the newest two are kept) and the
training curve is appended to ``curve.jsonl`` there as it grows. Started again with the same
--run-dir, the run restores its newest checkpoint (BenchMARL's ``restore_file``: losses,
optimisers, collector, frame count) and goes on to --frames. A resumed run is not
bit-identical to one left alone (the envs start fresh episodes); its ``seconds`` and steps per
second count only the last start.

--throughput measures training speed (collection and optimisation, no evaluation) with one
process and one torch thread, writing one row with the frames per second.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

import torch


def _threads_from_argv(argv) -> int:
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
    return 1


# Before torchrl is imported: it records the thread count at import, and its batched envs
# raise the count back to that value when one of them is closed (BenchMARL closes one while
# setting up), so the count is set here and again once the experiment is set up.
THREADS = _threads_from_argv(sys.argv)
torch.set_num_threads(THREADS)

from benchmarl.experiment.callback import Callback  # noqa: E402

TASKS = {"simple_spread": "SIMPLE_SPREAD", "simple_speaker_listener": "SIMPLE_SPEAKER_LISTENER"}
EVAL_EPISODES = 100


def use_mpe_source() -> str:
    """Makes ``pettingzoo.mpe`` importable; returns which package provides it."""
    try:
        import pettingzoo.mpe.all_modules  # noqa: F401

        return "pettingzoo.mpe"
    except ImportError:
        pass
    import mpe2
    import mpe2.all_modules
    import pettingzoo

    for name in list(sys.modules):
        if name == "pettingzoo.mpe" or name.startswith("pettingzoo.mpe."):
            del sys.modules[name]
    sys.modules["pettingzoo.mpe"] = mpe2
    sys.modules["pettingzoo.mpe.all_modules"] = mpe2.all_modules
    pettingzoo.mpe = mpe2
    return "mpe2"


def version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def logged_timers(save_folder: str) -> dict:
    """Sums of BenchMARL's per-iteration timers (seconds) from its CSV logs."""
    out = {}
    for name in ("collection_time", "training_time", "evaluation_time"):
        total = 0.0
        for f in Path(save_folder).rglob(f"timers_{name}.csv"):
            total += sum(float(line.split(",")[1]) for line in f.read_text().split())
        out[name] = round(total, 1)
    return out


def build_experiment(args, save_folder: str, callbacks):
    from benchmarl.algorithms import MappoConfig
    from benchmarl.environments import PettingZooTask
    from benchmarl.experiment import Experiment, ExperimentConfig
    from benchmarl.models import model_config_registry

    task = getattr(PettingZooTask, TASKS[args.task]).get_from_yaml()
    algorithm = MappoConfig.get_from_yaml()
    model = model_config_registry[args.model].get_from_yaml()
    critic_model = model_config_registry["mlp"].get_from_yaml()

    config = ExperimentConfig.get_from_yaml()
    config.max_n_frames = args.frames
    config.max_n_iters = None
    config.sampling_device = "cpu"
    config.train_device = "cpu"
    config.buffer_device = "cpu"
    config.prefer_continuous_actions = args.actions == "continuous"
    config.render = False
    config.loggers = ["csv"]
    config.save_folder = save_folder
    config.checkpoint_interval = 0
    config.checkpoint_at_end = False
    if args.run_dir is not None:
        config.checkpoint_interval = args.checkpoint_every
        config.keep_checkpoints_num = 2
        config.restore_file = newest_checkpoint(Path(save_folder))
    if args.throughput:
        config.evaluation = False
    return Experiment(
        task=task,
        algorithm_config=algorithm,
        model_config=model,
        critic_model_config=critic_model,
        seed=args.seed,
        config=config,
        callbacks=callbacks,
    ), task


def newest_checkpoint(run_dir: Path) -> str | None:
    """The checkpoint with the most frames that BenchMARL wrote under ``run_dir``, if any."""
    found = list(run_dir.glob("*/checkpoints/checkpoint_*.pt"))
    if not found:
        return None
    return str(max(found, key=lambda f: int(f.stem.rsplit("_", 1)[1])))


class Curve(Callback):
    """Keeps the numbers BenchMARL logs: the mean training episode return of each iteration
    and the mean return of its periodic evaluations, with frames and time."""

    def __init__(self, saved: Path | None = None):
        super().__init__()
        self.start = time.perf_counter()
        self.saved = saved  # curve.jsonl of a resumable run: earlier points, appended to
        self.points = []
        self.evals = []
        if saved is not None and saved.exists():
            for line in saved.read_text().splitlines():
                point = json.loads(line)
                (self.evals if point.pop("eval", False) else self.points).append(point)

    def _keep(self, point: dict, is_eval: bool = False) -> None:
        if self.saved is not None:
            with self.saved.open("a") as f:
                f.write(json.dumps({**point, "eval": True} if is_eval else point) + "\n")

    def on_setup(self):
        torch.set_num_threads(THREADS)

    def on_batch_collected(self, batch):
        e = self.experiment
        if torch.get_num_threads() != THREADS:
            torch.set_num_threads(THREADS)
        self.points.append(
            {
                "frames": int(e.total_frames),
                "episode_reward_mean": float(e.mean_return),
                "seconds": round(time.perf_counter() - self.start, 2),
            }
        )
        self._keep(self.points[-1])
        n = len(self.points)
        if n == 1 or n % 10 == 0:
            print(
                f"frames {e.total_frames} return {e.mean_return:.3f} "
                f"t {self.points[-1]['seconds']:.0f}s",
                flush=True,
            )

    def on_evaluation_end(self, rollouts):
        e = self.experiment
        per_group = []
        for group in e.group_map:
            # BenchMARL's logger has cut the rollouts at their first done; an episode's return
            # is the time sum of reward, averaged over the group's agents
            per_group.append(
                torch.stack([td.get(("next", group, "reward")).sum(0).mean() for td in rollouts])
            )
        value = torch.stack(per_group).mean(0).mean().item()
        self.evals.append(
            {"frames": int(e.total_frames), "episode_reward_mean": value, "episodes": len(rollouts)}
        )
        self._keep(self.evals[-1], is_eval=True)
        print(f"eval frames {e.total_frames} return {value:.3f}", flush=True)


def evaluate(experiment, task, episodes: int) -> dict:
    """Final policy on PettingZoo reset(seed=i), i = 0..episodes-1, deterministic actions."""
    from torchrl.envs import Compose, TransformedEnv
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    env = task.get_env_fun(
        num_envs=1,
        continuous_actions=experiment.continuous_actions,
        seed=0,
        device="cpu",
    )()
    env = TransformedEnv(env, Compose(*task.get_env_transforms(env)))
    if experiment.model_config.is_rnn:
        from benchmarl.experiment.experiment import _add_rnn_transforms

        env = _add_rnn_transforms(lambda: env, experiment.group_map, experiment.model_config)()
    max_steps = task.max_steps(env)
    per_agent_returns = []  # [episode][agent]
    lengths = []
    with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
        for i in range(episodes):
            td = env.reset(seed=i)
            roll = env.rollout(
                max_steps=max_steps,
                policy=experiment.policy,
                auto_reset=False,
                tensordict=td,
                break_when_any_done=True,
            )
            returns = []
            for group in experiment.group_map:
                returns += roll.get(("next", group, "reward")).sum(0).reshape(-1).tolist()
            per_agent_returns.append(returns)
            lengths.append(roll.batch_size[0])
    env.close()
    n_agents = len(per_agent_returns[0])
    team = [sum(r) for r in per_agent_returns]
    agent_mean = [sum(r) / n_agents for r in per_agent_returns]

    def stats(xs):
        m = sum(xs) / len(xs)
        sd = (sum((x - m) ** 2 for x in xs) / len(xs)) ** 0.5
        return m, sd

    am, asd = stats(agent_mean)
    tm, tsd = stats(team)
    return {
        "eval_episodes": episodes,
        "eval_env_seeds": f"0..{episodes - 1}",
        "eval_n_agents": n_agents,
        "eval_agent_names": [a for g in experiment.group_map.values() for a in g],
        "eval_per_agent_mean_return": am,
        "eval_per_agent_mean_return_std": asd,
        "eval_team_sum_return": tm,
        "eval_team_sum_return_std": tsd,
        "eval_episode_length_mean": sum(lengths) / len(lengths),
        "eval_per_agent_returns": [[round(x, 4) for x in r] for r in per_agent_returns],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", choices=sorted(TASKS), default="simple_spread")
    p.add_argument("--frames", type=int, default=1_000_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--actions", choices=["continuous", "discrete"], default="continuous")
    p.add_argument(
        "--model",
        choices=["mlp", "gru", "lstm"],
        default="mlp",
        help="actor model: BenchMARL's layers/<model> config (critic stays layers/mlp)",
    )
    p.add_argument("--out", required=True, help="JSONL file, one row appended")
    p.add_argument(
        "--save-dir",
        default="/work/peers/benchmarl-runs",
        help="where BenchMARL writes its CSV logs",
    )
    p.add_argument(
        "--run-dir",
        default=None,
        help="a resumable run: checkpoints and the curve here, restored when started again",
    )
    p.add_argument(
        "--checkpoint-every",
        type=int,
        default=60_000,
        help="frames between checkpoints of a --run-dir run (a multiple of 6,000)",
    )
    p.add_argument("--eval-episodes", type=int, default=EVAL_EPISODES)
    p.add_argument(
        "--throughput",
        action="store_true",
        help="time training only (no evaluation); --frames defaults to 30,000",
    )
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    if args.throughput and "--frames" not in sys.argv:
        args.frames = 30_000

    torch.set_num_threads(args.threads)
    mpe_source = use_mpe_source()

    import benchmarl
    import pettingzoo
    import tensordict
    import torchrl

    if args.run_dir is not None:
        os.makedirs(args.run_dir, exist_ok=True)
        save_folder = args.run_dir
        curve = Curve(Path(args.run_dir) / "curve.jsonl")
    else:
        os.makedirs(args.save_dir, exist_ok=True)
        save_folder = tempfile.mkdtemp(
            prefix=f"{args.task}_{args.actions}_{args.model}_seed{args.seed}_", dir=args.save_dir
        )
        curve = Curve()
    experiment, task = build_experiment(args, save_folder, [curve])
    restored = experiment.config.restore_file
    frames_before = int(experiment.total_frames)  # those of a restored checkpoint
    if restored is not None:
        print(f"resuming from {restored} at {frames_before} frames", flush=True)
    print(
        f"BenchMARL MAPPO {args.task} seed {args.seed} frames {args.frames} "
        f"actions {args.actions} model {args.model}; logs in {save_folder}",
        flush=True,
    )
    start, cpu_start = time.perf_counter(), time.process_time()
    experiment.run()
    seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - cpu_start
    torch.set_num_threads(args.threads)
    frames = int(experiment.total_frames)

    env_kwargs = dict(task.config)
    obs_shapes = {
        g: list(experiment.observation_spec[g, "observation"].shape) for g in experiment.group_map
    }
    state_shape = (
        list(experiment.state_spec["state"].shape) if experiment.state_spec is not None else None
    )
    row = {
        "peer": "benchmarl",
        "algorithm": "mappo",
        "mode": "throughput" if args.throughput else "train",
        "task": args.task,
        "pettingzoo_task": env_kwargs.get("task"),
        "env_kwargs": env_kwargs,
        "actions": "continuous" if experiment.continuous_actions else "discrete",
        "model": args.model,
        "critic_model": "mlp",
        "group_map": {g: list(a) for g, a in experiment.group_map.items()},
        "obs_shapes": obs_shapes,
        "state_shape": state_shape,
        "seed": args.seed,
        "frames": frames,
        "frames_per_batch": experiment.config.on_policy_collected_frames_per_batch,
        "n_envs": experiment.config.on_policy_n_envs_per_worker,
        "seconds": round(seconds, 1),
        "steps_per_s": round((frames - frames_before) / seconds, 1),
        "cpu_seconds": round(cpu_seconds, 1),
        "cpu_steps_per_s": round((frames - frames_before) / cpu_seconds, 1),
        "load_average": os.getloadavg(),
        "benchmarl_timers": logged_timers(save_folder),
        "torch_threads": torch.get_num_threads(),
        "processes": 1,
        "final_train_episode_reward_mean": curve.points[-1]["episode_reward_mean"]
        if curve.points
        else None,
        "curve_metric": "BenchMARL collection/reward/episode_reward_mean: mean over agents "
        "(and groups) of the training episodes' returns ended in each 6,000-frame batch",
        "curve": curve.points,
        "benchmarl_eval_curve": curve.evals,
    }
    if not args.throughput and args.eval_episodes > 0:
        t0 = time.perf_counter()
        row.update(evaluate(experiment, task, args.eval_episodes))
        row["eval_seconds"] = round(time.perf_counter() - t0, 1)
    row["versions"] = {
        "benchmarl": benchmarl.__version__,
        "torchrl": torchrl.__version__,
        "tensordict": tensordict.__version__,
        "torch": torch.__version__,
        "pettingzoo": pettingzoo.__version__,
        "mpe2": version("mpe2"),
        "python": sys.version.split()[0],
    }
    row["mpe_source"] = mpe_source
    row["benchmarl_logs"] = save_folder
    row["resumed_from"] = restored
    row["command"] = " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv])
    row["date"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "a") as f:
        f.write(json.dumps(row) + "\n")
    summary = {k: row[k] for k in ("task", "seed", "frames", "actions", "seconds", "steps_per_s")}
    for k in ("eval_per_agent_mean_return", "eval_team_sum_return"):
        if k in row:
            summary[k] = round(row[k], 3)
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
