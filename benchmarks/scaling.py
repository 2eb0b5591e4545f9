"""A scaling model of PPO training throughput, fitted on component benchmarks and checked
against whole runs it was not fitted on.

Run (the figures mean something only on an idle machine):
    .venv/bin/python benchmarks/scaling.py --out benchmarks/results/scaling
    .venv/bin/python benchmarks/scaling.py --quick --out /tmp/scaling-quick   # smoke test

1. Component benchmarks, each timed on its own (median of repeats):
   - act: one rollout worker (the class Ray actors run, here in-process) sampling a fragment of
     ``E`` envs x ``L`` steps: seconds per env step, at each model size;
   - learn: :class:`PPOLearner` turning a fragment into sequences (``begin``, per sample) and
     one minibatch gradient step on ``r`` env rows (fitted ``a + b r``), at each model size;
   - fragment transfer: an actor returning a stored fragment to the driver (``ray.get``) at
     three sizes, fitted ``alpha + bytes x beta``;
   - weight broadcast: one ``ray.put`` of the weights and 1, 2 or 4 actors reading the reference,
     at each model size, fitted ``alpha + (W - 1) x delta + bytes x beta``;
   - all-reduce: 2 learner processes in a gloo group (the group rlformer's learners use),
     seconds per all-reduce at four sizes, fitted ``alpha + bytes x beta``, and the round trip
     of one Ray call to both (what every minibatch of a learner group pays).
2. The model: the default loop is synchronous (collect, then update), so an iteration is the
   *sum* of its phases, not their maximum (a maximum would describe rollout.async_sampling):

       T(W, N) = rollout + broadcast(W) + W transfers + update(N)
       rollout   = E L act x max(1, W / cores)              workers in parallel, a core each
       update(1) = begin S + K M (a + b R / M) + finish      in the driver
       update(N) = begin S + K M (a + b R / (M N) + call + 4 all-reduce(params)) + finish
                   + fragment to the learners + weights back   (N > 1: Ray actors)

   with ``S = W E L`` samples, ``R = W E`` env rows, ``K`` epochs of ``M`` minibatches. Only the
   minibatch compute divides by ``N``: every replica builds the whole sequence batch, and each
   minibatch adds one Ray call and four all-reduces (advantage moments, summed and maximum
   metrics, gradients). Throughput is ``S / T``.
3. Validation: whole short training runs (``rlformer train`` in a subprocess, the CLI a user
   runs) with W = 1, 2 rollout workers and N = 1, 2 learners on this machine; measured env
   steps/s is the median of the runs' per-iteration ``time/env_steps_per_s`` after the first
   iteration. The prediction takes this machine's core count and assumes it idle. Predicted
   against measured, with the error, goes to ``validation.csv`` and
   ``predicted_vs_measured.png``.
4. Projections: where the model's throughput stops growing on a 16-core node and on a few
   such nodes (fragments from other nodes crossing a network of ``--network-gbps``, an
   assumption the machine here cannot measure).

Everything goes to ``--out``: ``scaling.json`` (benchmarks, fits, validation, projections),
``validation.csv`` and ``predicted_vs_measured.png``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlformer.algos.ppo.algorithm import build_model
from rlformer.algos.ppo.learner import PPOLearner
from rlformer.config import TrainConfig, load_config
from rlformer.learners.learner_group import GroupMember, LearnerGroup
from rlformer.rollout.fragment import Fragment
from rlformer.rollout.worker_spec import ppo_worker_spec

GROWTH_FLOOR = 0.05
"""Throughput "stops growing" where one more worker adds less than this fraction."""


@dataclass(frozen=True)
class Setup:
    """What is benchmarked, validated and projected."""

    env_id: str
    envs: int  # E, envs per rollout worker
    length: int  # L, fragment length
    minibatches: int  # M
    epochs: int  # K
    sizes: tuple[int, ...]  # model widths (d_model) benchmarked
    width: int  # the width the validation runs use
    repeats: int
    iterations: int  # per validation run
    workers: tuple[int, ...] = (1, 2)
    learners: tuple[int, ...] = (1, 2)
    reduce_sizes: tuple[int, ...] = (1_000, 10_000, 100_000, 1_000_000)
    learn_rows: tuple[int, ...] = (1, 2, 4, 8, 16, 32)  # rows per minibatch step benchmarked
    readers: tuple[int, ...] = (1, 2, 4)  # actors reading one weight broadcast

    def overrides(self, width: int) -> list[str]:
        """The run config of one model width (no Ray settings)."""
        return [
            f"env.id={self.env_id}",
            f"rollout.envs_per_worker={self.envs}",
            f"rollout.fragment_length={self.length}",
            "model.core.n_layers=2",
            f"model.core.d_model={width}",
            f"model.core.n_heads={max(1, width // 16)}",
            f"model.core.d_ff={2 * width}",
            f"model.core.memory_length={self.length}",
            f"ppo.num_minibatches={self.minibatches}",
            f"ppo.update_epochs={self.epochs}",
        ]


FULL = Setup("CartPole-v1", 8, 128, 4, 4, (32, 64, 128), 64, 7, 8)
QUICK = Setup(
    "CartPole-v1",
    envs=4,
    length=16,
    minibatches=2,
    epochs=1,
    sizes=(16, 32),
    width=16,
    repeats=2,
    iterations=3,
    reduce_sizes=(1_000, 100_000),
    learn_rows=(1, 2, 4),
    readers=(1, 2),
)


def _median_time(action: Callable[[], Any], repeats: int) -> float:
    """Median seconds of ``action`` over ``repeats`` calls, after one warm-up call."""
    action()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _fit(rows: list[list[float]], seconds: list[float]) -> list[float]:
    """Least-squares coefficients of ``seconds`` on the columns of ``rows``, clipped at 0 (a
    negative cost is noise)."""
    coef, *_ = np.linalg.lstsq(np.asarray(rows, float), np.asarray(seconds, float), rcond=None)
    return [max(float(c), 0.0) for c in coef]


def _nbytes(value: Any) -> int:
    return len(pickle.dumps(value, protocol=5))


def _config(setup: Setup, width: int, *extra: str) -> TrainConfig:
    return load_config(None, [*setup.overrides(width), *extra])


# ------------------------------------------------------------------ component benchmarks


def bench_act(setup: Setup, width: int) -> tuple[float, Fragment, dict[str, torch.Tensor]]:
    """Seconds per env step of one worker; one of its fragments; the model's weights."""
    cfg = _config(setup, width)
    torch.manual_seed(0)
    weights = build_model(cfg).state_dict()
    worker = ppo_worker_spec(cfg).build(0)
    worker.set_weights(weights, 0)
    fragment = worker.sample()
    seconds = _median_time(worker.sample, setup.repeats)
    worker.close()
    return seconds / (setup.envs * setup.length), fragment, weights


def bench_learn(setup: Setup, width: int, fragment: Fragment) -> dict[str, float]:
    """A learner's ``begin`` per sample, its minibatch step fitted ``a + b rows``, ``finish``."""
    cfg = _config(setup, width)
    copies = -(-max(setup.learn_rows) // setup.envs)
    wide = Fragment.concat([fragment] * copies)
    rows = setup.envs * copies
    torch.manual_seed(0)
    learner = PPOLearner(build_model(cfg), cfg.ppo, torch.device("cpu"), 10**6)
    begin = _median_time(lambda: learner.begin(wide), setup.repeats)
    batch, _, ent_coef = learner.begin(wide)
    counts = list(setup.learn_rows)
    seconds = []
    for count in counts:
        share = torch.arange(count)
        seconds.append(
            _median_time(
                lambda s=share: learner.step(batch, s, len(s), "bench", ent_coef),
                setup.repeats,
            )
        )
    fixed, per_row = _fit([[1.0, c] for c in counts], seconds)
    finish = _median_time(lambda: learner.finish(wide), setup.repeats)
    return {
        "begin_s_per_sample": begin / (rows * setup.length),
        "step_fixed_s": fixed,
        "step_s_per_row": per_row,
        "step_s_per_sample": per_row / setup.length,
        "finish_s": finish,
        "param_bytes": sum(p.numel() * p.element_size() for p in learner.model.parameters()),
        "step_points": list(zip(counts, seconds, strict=True)),
    }


class _Holder:
    """A Ray actor that returns what it holds, or takes a reference's value and drops it."""

    def __init__(self) -> None:
        self.value: Any = None

    def hold(self, value: Any) -> None:
        self.value = value

    def give(self) -> Any:
        return self.value

    def take(self, weights: dict[str, torch.Tensor]) -> int:
        return len(weights)


def bench_transfer(ray: Any, setup: Setup, fragment: Fragment) -> dict[str, Any]:
    """Fragment transfer (actor to driver) at three sizes, fitted ``alpha + bytes beta``."""
    holder = ray.remote(num_cpus=0)(_Holder).remote()
    points = []
    for copies in (1, 2, 4):
        value = Fragment.concat([fragment] * copies)
        ray.get(holder.hold.remote(value), timeout=120)
        seconds = _median_time(lambda: ray.get(holder.give.remote(), timeout=120), setup.repeats)
        points.append((_nbytes(value), seconds))
    ray.kill(holder)
    fixed, per_byte = _fit([[1.0, b] for b, _ in points], [s for _, s in points])
    return {"points": points, "fixed_s": fixed, "s_per_byte": per_byte}


def bench_broadcast(ray: Any, setup: Setup, weights: dict[int, dict]) -> dict[str, Any]:
    """One ``ray.put`` of the weights read by W actors, fitted over sizes and W."""
    actors = [ray.remote(num_cpus=0)(_Holder).remote() for _ in range(max(setup.readers))]
    points = []
    for state in weights.values():
        for count in setup.readers:

            def broadcast(state: dict = state, count: int = count) -> None:
                ref = ray.put({k: v.detach().cpu() for k, v in state.items()})
                ray.get([actor.take.remote(ref) for actor in actors[:count]], timeout=120)

            points.append((count, _nbytes(state), _median_time(broadcast, setup.repeats)))
    for actor in actors:
        ray.kill(actor)
    fixed, per_worker, per_byte = _fit(
        [[1.0, w - 1, b] for w, b, _ in points], [s for *_, s in points]
    )
    return {
        "points": points,
        "fixed_s": fixed,
        "s_per_extra_worker": per_worker,
        "s_per_byte": per_byte,
    }


class _Reducer(GroupMember):
    """A learner-group member that times all-reduces of float32 tensors."""

    def all_reduce_s(self, numel: int, repeats: int) -> float:
        value = torch.ones(numel)
        torch.distributed.all_reduce(value)  # warm-up
        started = time.perf_counter()
        for _ in range(repeats):
            torch.distributed.all_reduce(value)
        return (time.perf_counter() - started) / repeats

    def noop(self) -> None:
        return None


def bench_all_reduce(setup: Setup) -> dict[str, Any]:
    """gloo all-reduce between 2 processes, fitted ``alpha + bytes beta``; a Ray call's round
    trip to both."""
    group = LearnerGroup(_Reducer, (), size=2, cpus=0.01, gpus=0, timeout_s=300)
    try:
        points = []
        for numel in setup.reduce_sizes:
            seconds = max(group.call("all_reduce_s", (numel, 5 * setup.repeats)))
            points.append((4 * numel, seconds))
        call = _median_time(lambda: group.call("noop"), 10 * setup.repeats)
    finally:
        group.close()
    fixed, per_byte = _fit([[1.0, b] for b, _ in points], [s for _, s in points])
    return {"points": points, "fixed_s": fixed, "s_per_byte": per_byte, "call_s": call}


def run_benchmarks(setup: Setup) -> dict[str, Any]:
    """Every component benchmark; the numbers the model reads."""
    import ray

    acts, learns, weights, fragments = {}, {}, {}, {}
    for width in setup.sizes:
        acts[width], fragments[width], weights[width] = bench_act(setup, width)
        learns[width] = bench_learn(setup, width, fragments[width])
        print(
            f"width {width}: act {1e6 * acts[width]:.1f} us/env step, learn "
            f"{1e6 * learns[width]['step_s_per_sample']:.1f} us/sample/epoch, "
            f"{learns[width]['param_bytes']:,} parameter bytes",
            flush=True,
        )
    ray.init(
        address="local",
        num_cpus=max(4, os.cpu_count() or 1),
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )
    try:
        transfer = bench_transfer(ray, setup, fragments[setup.width])
        broadcast = bench_broadcast(ray, setup, weights)
        reduce = bench_all_reduce(setup)
    finally:
        ray.shutdown()
    frag = fragments[setup.width]
    return {
        "act_s_per_env_step": acts,
        "learn": learns,
        "fragment_bytes_per_step": _nbytes(frag) / (setup.envs * setup.length),
        "transfer": transfer,
        "broadcast": broadcast,
        "all_reduce": reduce,
    }


# ------------------------------------------------------------------ the model


@dataclass
class Scenario:
    """One configuration to predict: W workers over ``nodes`` nodes of ``cores`` cores, N
    learners (on the driver's node)."""

    workers: int
    learners: int
    width: int
    cores: int
    nodes: int = 1
    network_s_per_byte: float = 0.0
    terms: dict[str, float] = field(default_factory=dict)


def predict(bench: dict[str, Any], setup: Setup, scenario: Scenario) -> float:
    """Env steps per second of one synchronous iteration (its terms fill ``scenario.terms``)."""
    w, n, width = scenario.workers, scenario.learners, scenario.width
    learn = bench["learn"][width]
    samples, rows = w * setup.envs * setup.length, w * setup.envs
    per_node = -(-w // scenario.nodes)
    frag_bytes = bench["fragment_bytes_per_step"] * setup.envs * setup.length
    transfer, bcast, reduce = bench["transfer"], bench["broadcast"], bench["all_reduce"]
    remote = w - per_node if scenario.nodes > 1 else 0
    steps = setup.epochs * setup.minibatches
    share = max(1.0, n / scenario.cores)
    minibatch = learn["step_fixed_s"] + learn["step_s_per_row"] * rows / (setup.minibatches * n)
    terms = {
        "rollout": setup.envs
        * setup.length
        * bench["act_s_per_env_step"][width]
        * max(1.0, per_node / scenario.cores),
        "broadcast": bcast["fixed_s"] + bcast["s_per_byte"] * learn["param_bytes"],
        "broadcast_readers": bcast["s_per_extra_worker"] * (w - 1),
        "transfer": w * (transfer["fixed_s"] + transfer["s_per_byte"] * frag_bytes)
        + remote * frag_bytes * scenario.network_s_per_byte,
        "learn_begin": learn["begin_s_per_sample"] * samples * share,
        "learn_steps": steps * minibatch * share + learn["finish_s"],
        "learner_sync": 0.0,
    }
    if n > 1:
        per_step = reduce["call_s"] + 4 * reduce["fixed_s"]
        per_step += reduce["s_per_byte"] * learn["param_bytes"]
        moves = 2 * transfer["fixed_s"] + transfer["s_per_byte"] * (
            w * frag_bytes + learn["param_bytes"]
        )
        terms["learner_sync"] = steps * per_step + moves + 2 * reduce["call_s"]
    scenario.terms = terms
    return samples / sum(terms.values())


# ------------------------------------------------------------------ validation runs


def measured_run(setup: Setup, workers: int, learners: int, root: Path) -> float:
    """Median env steps/s over a real run's iterations after the first."""
    per_iteration = workers * setup.envs * setup.length
    overrides = [
        *setup.overrides(setup.width),
        "rollout.backend=ray",
        f"rollout.num_workers={workers}",
        "rollout.worker_cpus=1",
        f"learner.num_learners={learners}",
        "learner.cpus_per_learner=1",
        f"ppo.total_steps={setup.iterations * per_iteration}",
        "run.checkpoint_every=1000000",
        "run.progress=false",
        "eval.episodes=0",
        f"run.root={root}",
        f"run.name=w{workers}n{learners}",
    ]
    command = [sys.executable, "-m", "rlformer.cli", "train"]
    for item in overrides:
        command += ["--set", item]
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(
            f"validation run W={workers} N={learners} failed:\n{done.stderr[-3000:]}"
        )
    (run_dir,) = sorted(root.glob(f"w{workers}n{learners}-*"))
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rates = [row["time/env_steps_per_s"] for row in rows if "time/env_steps_per_s" in row]
    return statistics.median(rates[1:] if len(rates) > 1 else rates)


def validate(setup: Setup, bench: dict[str, Any], cores: int) -> list[dict[str, Any]]:
    """Predicted against measured env steps/s for every (W, N) of the setup."""
    results = []
    with tempfile.TemporaryDirectory(prefix="rlformer-scaling-") as root:
        for workers in setup.workers:
            for learners in setup.learners:
                scenario = Scenario(workers, learners, setup.width, cores)
                predicted = predict(bench, setup, scenario)
                measured = measured_run(setup, workers, learners, Path(root))
                row = {
                    "workers": workers,
                    "learners": learners,
                    "predicted_steps_per_s": predicted,
                    "measured_steps_per_s": measured,
                    "error": (predicted - measured) / measured,
                    **{f"term_{k}_s": v for k, v in scenario.terms.items()},
                }
                print(
                    f"W={workers} N={learners}: predicted {predicted:,.0f} measured "
                    f"{measured:,.0f} env steps/s ({100 * row['error']:+.0f}%)",
                    flush=True,
                )
                results.append(row)
    return results


# ------------------------------------------------------------------ projections


GROWING_TERMS = ("broadcast_readers", "transfer", "learn_begin", "learn_steps", "learner_sync")
"""The terms that grow with every worker (the rollout and the weights' one put do not, until
the workers outnumber the cores)."""


def _dominant(terms: dict[str, float]) -> str:
    """The largest term, and how much of the iteration grows with the worker count."""
    total = sum(terms.values())
    name = max(terms, key=terms.__getitem__)
    growing = sum(terms[key] for key in GROWING_TERMS)
    return (
        f"{name} {100 * terms[name] / total:.0f}% of the iteration, "
        f"{100 * growing / total:.0f}% growing with W"
    )


def project(
    bench: dict[str, Any], setup: Setup, cores: int, nodes: int, net_s_per_byte: float
) -> list[dict[str, Any]]:
    """For N = 1, 2, 4 learners: the worker count where one more worker adds under
    ``GROWTH_FLOOR``, the best throughput, and what dominates the iteration there."""
    rows = []
    for learners in (1, 2, 4):
        max_workers = nodes * cores
        rates = []
        for w in range(1, max_workers + 1):
            rates.append(
                predict(
                    bench, setup, Scenario(w, learners, setup.width, cores, nodes, net_s_per_byte)
                )
            )
        stop = next(
            (w for w in range(1, max_workers) if rates[w] < rates[w - 1] * (1 + GROWTH_FLOOR)),
            max_workers,
        )
        best = int(np.argmax(rates)) + 1
        at_stop = Scenario(stop, learners, setup.width, cores, nodes, net_s_per_byte)
        predict(bench, setup, at_stop)
        rows.append(
            {
                "nodes": nodes,
                "cores_per_node": cores,
                "learners": learners,
                "stops_growing_at_workers": stop,
                "steps_per_s_there": rates[stop - 1],
                "best_workers": best,
                "best_steps_per_s": rates[best - 1],
                "dominant_term": _dominant(at_stop.terms),
            }
        )
    return rows


def learner_bound(bench: dict[str, Any], setup: Setup, learners: int) -> float:
    """The throughput no number of workers passes: samples over the update's per-sample cost
    (the rollout's time stays fixed per iteration while the update grows with every worker)."""
    learn = bench["learn"][setup.width]
    per_sample = learn["begin_s_per_sample"] + setup.epochs * learn["step_s_per_sample"] / learners
    return 1.0 / per_sample


# ------------------------------------------------------------------ outputs


def write_outputs(out: Path, report: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "scaling.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    rows = report["validation"]
    with (out / "validation.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: validation.csv holds the points, no PNG written")
        return
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    predicted = [r["predicted_steps_per_s"] for r in rows]
    measured = [r["measured_steps_per_s"] for r in rows]
    ax.scatter(measured, predicted)
    for row, x, y in zip(rows, measured, predicted, strict=True):
        ax.annotate(f"W={row['workers']} N={row['learners']}", (x, y), fontsize=8)
    top = 1.15 * max(predicted + measured)
    ax.plot([0, top], [0, top], linestyle="--", color="grey", linewidth=1)
    ax.set(
        xlim=(0, top),
        ylim=(0, top),
        xlabel="measured env steps/s",
        ylabel="predicted env steps/s",
        title="Scaling model, runs it was not fitted on",
    )
    fig.tight_layout()
    fig.savefig(out / "predicted_vs_measured.png", dpi=120)
    plt.close(fig)


def conclusions(report: dict[str, Any]) -> list[str]:
    """Plain statements of where throughput stops growing, and why, from the projections."""
    lines = [
        "Synchronous PPO: each worker's fragment takes the same time however many workers run "
        "(up to one per core), while the broadcast's readers, the transfers and the update grow "
        "with every worker, so throughput saturates; past the cores, rollouts slow too."
    ]
    for row in report["projections"]:
        lines.append(
            f"{row['nodes']} node(s) x {row['cores_per_node']} cores, N={row['learners']}: "
            f"grows until W={row['stops_growing_at_workers']} "
            f"({row['steps_per_s_there']:,.0f} env steps/s; {row['dominant_term']}); "
            f"best {row['best_steps_per_s']:,.0f} at W={row['best_workers']}"
        )
    for learners, bound in report["learner_bound_steps_per_s"].items():
        lines.append(f"learner bound with N={learners}: {bound:,.0f} env steps/s")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/scaling"))
    parser.add_argument("--cores", type=int, default=16, help="cores per node projected")
    parser.add_argument(
        "--network-gbps",
        type=float,
        default=10.0,
        help="assumed bandwidth between nodes (projections only)",
    )
    parser.add_argument("--skip-validation", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    setup = QUICK if args.quick else FULL
    here = os.cpu_count() or 1
    bench = run_benchmarks(setup)
    validation = [] if args.skip_validation else validate(setup, bench, here)
    net = 8.0 / (args.network_gbps * 1e9)
    projections = [
        row for nodes in (1, 2, 4) for row in project(bench, setup, args.cores, nodes, net)
    ]
    report = {
        "setup": asdict(setup),
        "machine_cores": here,
        "model": "sync: rollout + broadcast(W) + W transfers + update(N); see the docstring",
        "benchmarks": bench,
        "validation": validation,
        "mean_abs_error": (
            float(np.mean([abs(r["error"]) for r in validation])) if validation else None
        ),
        "projections": projections,
        "learner_bound_steps_per_s": {n: learner_bound(bench, setup, n) for n in (1, 2, 4)},
        "network_gbps_assumed": args.network_gbps,
    }
    report["conclusions"] = conclusions(report)
    if validation:
        write_outputs(args.out, report)
    else:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "scaling.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    print("\n".join(report["conclusions"]))
    if report["mean_abs_error"] is not None:
        print(f"mean |error| of the predictions: {100 * report['mean_abs_error']:.0f}%")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
