"""Churn under load: PPO on the Ray backend while rollout workers are SIGKILLed.

Runs ``rlformer.runs.training.train`` in this process with ``rollout.backend=ray`` (a real
local Ray, several workers with fractional ``worker_cpus``, a tiny GTrXL) and kills one rollout
worker process every ``--kill-every`` iterations, at a random moment while that iteration's
fragments are being collected (``--max-delay`` seconds after collection starts; a kill that lands
after the victim's fragment came back is found at the next call, a checkpoint's included).
The restart budget is exactly the number of kills.

Then it checks what must hold however the kills land, prints the figures and exits 1 if a
check failed:

* every fragment batch has the iteration's policy version and the full ``[F, W x E]`` size
  (no half batch);
* env steps trained = iterations x steps per iteration = the last ``metrics.jsonl`` step, with
  one metrics row per iteration;
* the learner's update count (in the final checkpoint) = iterations;
* workers restarted = kills injected.

Usage::

    python benchmarks/churn.py                        # 240 iterations, a kill every 6
    python benchmarks/churn.py --iterations 12 --kill-every 3 --max-delay 0.5 --json  # the test
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch


@dataclass
class ChurnReport:
    """The figures of one churn run (``ok`` when every check held)."""

    iterations: int
    workers: int
    steps_per_iteration: int
    kills_injected: int
    kills_found_in_collect: int  # the victim died before its fragment came back
    restarts_at_checkpoint: int  # the victim died after it: replaced when the state was saved
    restarts: int
    env_steps_expected: int
    env_steps_trained: int
    metrics_rows: int
    metrics_last_step: int
    learner_updates: int
    bad_fragments: int  # wrong policy version or size
    wall_s: float
    ok: bool
    problems: list[str]


class KillingCollector:
    """Wraps the real RayCollector: SIGKILLs a worker during every ``kill_every``-th collect
    and checks every batch it hands to the learner."""

    def __init__(self, inner: Any, kill_every: int, max_delay: float, seed: int) -> None:
        self.inner, self.kill_every, self.max_delay = inner, kill_every, max_delay
        self.rng = random.Random(seed)
        self.calls = self.kills = self.kills_found_in_collect = self.bad_fragments = 0
        self.restarts_at_checkpoint = 0
        self.env_steps = 0
        self.expected_shape = (
            inner.cfg.rollout.fragment_length,
            inner.cfg.rollout.num_workers * inner.cfg.rollout.envs_per_worker,
        )

    def _victim_pid(self, index: int) -> int | None:
        import ray

        try:
            return int(ray.get(self.inner.workers[index].process_id.remote(), timeout=60))
        except ray.exceptions.RayError:
            return None  # already dead (killed after its last fragment): the collector will see

    def collect(self, weights: dict[str, torch.Tensor], version: int) -> Any:
        self.calls += 1
        killer = None
        if self.calls % self.kill_every == 0:
            index = self.rng.randrange(len(self.inner.workers))
            pid = self._victim_pid(index)
            if pid is not None:
                delay = self.rng.uniform(0.0, self.max_delay)
                killer = threading.Timer(delay, os.kill, (pid, signal.SIGKILL))
                killer.start()
                self.kills += 1
        restarts_before = self.inner.restarts
        try:
            fragment = self.inner.collect(weights, version)
        finally:
            if killer is not None:
                killer.join()  # the kill has happened before training goes on
        if killer is not None and self.inner.restarts > restarts_before:
            self.kills_found_in_collect += 1
        if fragment.policy_version != version or fragment.rewards.shape != self.expected_shape:
            self.bad_fragments += 1
        self.env_steps += int(fragment.rewards.size)
        return fragment

    def get_state(self) -> list[dict[str, Any]]:
        restarts_before = self.inner.restarts
        states = self.inner.get_state()
        self.restarts_at_checkpoint += self.inner.restarts - restarts_before
        return states

    def __getattr__(self, name: str) -> Any:  # set_state, close, restarts ...
        return getattr(self.inner, name)


def churn_config(root: Path, iterations: int, kills: int, workers: int, seed: int) -> Any:
    """A tiny GTrXL-PPO run on CartPole with ``workers`` Ray actors sharing the CPUs."""
    from rlformer.config import load_config

    envs, fragment = 2, 16
    return load_config(
        None,
        [
            f"run.root={root}",
            "run.name=churn",
            f"run.seed={seed}",
            "run.progress=false",
            "run.checkpoint_every=5",
            "env.id=CartPole-v1",
            "rollout.backend=ray",
            f"rollout.num_workers={workers}",
            f"rollout.envs_per_worker={envs}",
            f"rollout.fragment_length={fragment}",
            f"rollout.worker_cpus={1 / workers:.4f}",
            f"rollout.max_worker_restarts={kills}",
            "rollout.sample_timeout_s=120",
            "model.core.n_layers=1",
            "model.core.d_model=16",
            "model.core.n_heads=2",
            "model.core.d_ff=32",
            "model.core.memory_length=8",
            "ppo.update_epochs=1",
            "ppo.num_minibatches=2",
            f"ppo.total_steps={iterations * workers * envs * fragment}",
            "eval.episodes=0",
        ],
    )


def run_churn(
    iterations: int,
    kill_every: int,
    workers: int = 4,
    max_delay: float = 0.3,
    seed: int = 0,
    root: Path | None = None,
) -> ChurnReport:
    """Train under churn and check the invariants (see the module docstring)."""
    import rlformer.algos.ppo.algorithm as ppo_algorithm
    import rlformer.runs.training as training
    from rlformer.runs.checkpoints import latest_checkpoint, read_checkpoint_file
    from rlformer.runs.directory import read_metrics

    planned_kills = iterations // kill_every
    cfg = churn_config(
        Path(root or tempfile.mkdtemp(prefix="churn-")), iterations, planned_kills, workers, seed
    )
    wrappers: list[KillingCollector] = []
    real_make_collector = ppo_algorithm.make_collector

    def make_collector(config: Any) -> KillingCollector:
        wrappers.append(KillingCollector(real_make_collector(config), kill_every, max_delay, seed))
        return wrappers[-1]

    ppo_algorithm.make_collector = make_collector
    started = time.perf_counter()
    try:
        result = training.train(cfg)
    finally:
        ppo_algorithm.make_collector = real_make_collector
    wall_s = time.perf_counter() - started
    (collector,) = wrappers

    spi = workers * cfg.rollout.envs_per_worker * cfg.rollout.fragment_length
    rows = [r for r in read_metrics(result.run_dir) if not any(k.startswith("eval/") for k in r)]
    payload = read_checkpoint_file(latest_checkpoint(result.run_dir))
    report = ChurnReport(
        iterations=result.iterations,
        workers=workers,
        steps_per_iteration=spi,
        kills_injected=collector.kills,
        kills_found_in_collect=collector.kills_found_in_collect,
        restarts_at_checkpoint=collector.restarts_at_checkpoint,
        restarts=collector.inner.restarts,
        env_steps_expected=iterations * spi,
        env_steps_trained=collector.env_steps,
        metrics_rows=len(rows),
        metrics_last_step=int(rows[-1]["step"]) if rows else 0,
        learner_updates=int(payload["learner"]["iteration"]),
        bad_fragments=collector.bad_fragments,
        wall_s=round(wall_s, 1),
        ok=False,
        problems=[],
    )
    checks = {
        "iterations run": report.iterations == iterations,
        "kills injected as planned": report.kills_injected == planned_kills,
        "one restart per kill": report.restarts == report.kills_injected,
        "env steps trained": report.env_steps_trained == report.env_steps_expected,
        "one metrics row per iteration": report.metrics_rows == iterations,
        "metrics steps": [int(r["step"]) for r in rows]
        == [spi * (i + 1) for i in range(iterations)],
        "learner updates": report.learner_updates == iterations,
        "no bad fragments": report.bad_fragments == 0,
    }
    report.problems = [name for name, held in checks.items() if not held]
    report.ok = not report.problems
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=240)
    parser.add_argument("--kill-every", type=int, default=6, help="iterations between kills")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--max-delay", type=float, default=0.3, help="kill delay bound (s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--root", type=Path, default=None, help="run root (default: a temp dir)")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON line")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    report = run_churn(
        args.iterations, args.kill_every, args.workers, args.max_delay, args.seed, args.root
    )
    if args.json:
        print(json.dumps(asdict(report)))
    else:
        width = max(len(k) for k in asdict(report))
        for key, value in asdict(report).items():
            print(f"{key:{width}s}  {value}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
