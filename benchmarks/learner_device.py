"""The default from the env id alone with its PPO learner on each device, the same command.

Each task is trained by ``rlformer train`` with only the env id (and, for MinAtar, the
family's ``env.imports`` and the published full action set), once per device, one after the
other; rollouts act on the CPU either way. Medians over the run's iterations of env steps/s,
update seconds (iteration minus collection) and collection seconds, read from ``metrics.jsonl``.
Runs from an uninstalled checkout too (a GPU machine), through the GPU check's environment::

    python3 benchmarks/learner_device.py --steps 60000 --devices cuda cpu --out ROWS.jsonl
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from gpu_check import python_env, speed_figures  # noqa: E402

TASKS = {
    "PositionOnlyPendulumEasy": ["env.id=popgym-PositionOnlyPendulumEasy-v0"],
    "MiniGrid-MemoryS11": ["env.id=MiniGrid-MemoryS11-v0"],
    "MinAtar-Breakout": [
        "env.id=MinAtar/Breakout-v1",
        "env.imports=[minatar.gym:register_envs]",
        "env.kwargs.use_minimal_action_set=false",
    ],
}


def measure(task: str, device: str, steps: int, scratch: Path) -> dict[str, object]:
    """One training run's speed figures (or its error)."""
    root = scratch / f"{task}_{device}"
    keys = [
        *TASKS[task],
        *(f"ppo.total_steps={steps}", f"run.device={device}", "eval.episodes=0"),
        *(f"run.root={root}", "run.progress=false"),
    ]
    command = [sys.executable, "-m", "rlformer.cli", "train"]
    command += [part for key in keys for part in ("--set", key)]
    begun = time.monotonic()
    done = subprocess.run(
        command, env=python_env(scratch), capture_output=True, text=True, timeout=1800
    )
    row: dict[str, object] = {"task": task, "device": device, "steps": steps}
    row["wall_s"] = round(time.monotonic() - begun, 1)
    if done.returncode != 0:
        return {**row, "error": (done.stdout + done.stderr)[-1500:]}
    (run_dir,) = root.iterdir()
    return {**row, **speed_figures(run_dir)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60_000)
    parser.add_argument("--devices", nargs="+", default=["cuda", "cpu"])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--out", type=Path, help="append one JSON row per run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="learner_device_") as folder:
        for task in args.tasks:
            for device in args.devices:
                row = measure(task, device, args.steps, Path(folder))
                print(json.dumps(row), flush=True)
                if args.out:
                    with args.out.open("a") as out:
                        out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
