"""Interrupt many training runs at random moments and check that nothing is lost.

Each trial starts ``rlformer train`` (tiny GTrXL-PPO on T-Maze), waits a random time, sends
SIGINT, SIGTERM or SIGKILL, resumes the run with ``--resume`` (repeating until it finishes),
and compares final weights and metrics with one uninterrupted run of the same config:

    .venv/bin/python benchmarks/interrupt_campaign.py --trials 12 --seed 0

Printed: trials per signal, interruptions sent, resumes, runs identical to the uninterrupted
one, metric rows lost. Figures go to docs/guides/runs.md.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import torch

from rlformer.runs.checkpoints import load_checkpoint

TINY = [
    "env.id=rlformer/TMaze-v0",
    "env.kwargs.length=3",
    "rollout.envs_per_worker=4",
    "rollout.fragment_length=16",
    "model.core.n_layers=1",
    "model.core.d_model=16",
    "model.core.n_heads=2",
    "model.core.d_ff=32",
    "model.core.memory_length=8",
    "ppo.num_minibatches=2",
    "ppo.update_epochs=2",
    "ppo.total_steps=3840",
    "run.checkpoint_every=5",
    "eval.episodes=0",
    "run.progress=false",
]
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGKILL]


def _train(*args: str) -> list[str]:
    return [sys.executable, "-m", "rlformer.cli", "train", *args]


def _sets(root: Path) -> list[str]:
    return [a for item in [*TINY, f"run.root={root}"] for a in ("--set", item)]


def _rows(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rows]


def _same(a: Path, b: Path) -> bool:
    wa, wb = load_checkpoint(a)["model"], load_checkpoint(b)["model"]
    weights = all(torch.equal(wa[k], wb[k]) for k in wa)
    return weights and _rows(a) == _rows(b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="rlformer-interrupts-"))
    started = time.monotonic()
    subprocess.run(_train(*_sets(work / "straight")), check=True, capture_output=True)
    (reference,) = (work / "straight").iterdir()
    sent: Counter[str] = Counter()
    identical = resumes = rows_lost = 0
    for trial in range(args.trials):
        root = work / f"trial{trial}"
        sig = SIGNALS[trial % len(SIGNALS)]
        proc = subprocess.Popen(
            _train(*_sets(root)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        while proc.poll() is None and not list(root.glob("*/metrics.jsonl")):
            time.sleep(0.05)  # start-up (imports, env, model) takes seconds
        time.sleep(rng.uniform(0.0, 6.0))  # the run takes ~6 s more on an idle machine
        if proc.poll() is None:
            proc.send_signal(sig)
            sent[sig.name] += 1
        proc.wait()
        (run_dir,) = root.iterdir()
        while not (run_dir / "checkpoints" / "latest").exists() or (
            load_checkpoint(run_dir)["iteration"] < 60
        ):
            if not (run_dir / "checkpoints" / "latest").exists():  # killed before checkpoint 1
                subprocess.run(["rm", "-rf", str(run_dir)], check=True)
                subprocess.run(_train(*_sets(root)), check=True, capture_output=True)
                (run_dir,) = root.iterdir()
                continue
            subprocess.run(_train("--resume", str(run_dir)), check=True, capture_output=True)
            resumes += 1
        identical += _same(reference, run_dir)
        rows_lost += max(0, len(_rows(reference)) - len(_rows(run_dir)))
        print(f"trial {trial}: {sig.name}, identical={_same(reference, run_dir)}", flush=True)
    print(
        f"trials {args.trials}; signals sent {dict(sent)}; resumes {resumes}; "
        f"identical to the uninterrupted run {identical}/{args.trials}; metric rows lost "
        f"{rows_lost}; {time.monotonic() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
