"""The GPU check: what must hold on a CUDA machine, run in one go and written down.

Run it first on any machine with a GPU (about 4 minutes on one H200 with 16 cores)::

    python3 scripts/gpu_check.py     # writes benchmarks/results/gpu_check/gpu_check.{json,md}

Parts, each with its own time limit, each recorded as passed / failed / skipped with its figures:

1. ``cuda_tests``: the tests marked ``gpu`` and the core's tests on their ``cuda`` instances
   (``not ray``: the GPU machines may lack Ray);
2. ``minatar_learner``: MinAtar Breakout PPO (the config's image encoder) for 100k env steps
   with the learner on the GPU, then on the CPU: env steps/s and update seconds, median over
   iterations;
3. ``export_on_cuda``: a policy trained on the GPU, exported to ONNX, acting on real T-Maze
   episodes beside the PyTorch policy on the GPU: actions equal, largest logit difference;
4. ``dt_vs_transformers``: ``benchmarks/dt.py --quick --device cuda`` (needs transformers,
   the ``bench`` extra), its summary lines.

Without a GPU every part that needs one is skipped and the page says it is unverified. The
package does not need to be installed: the repository is put on ``PYTHONPATH``, with
``envs/`` importable as ``rlformer_envs``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "results" / "gpu_check"
DEVICE, MINATAR_STEPS, LIMIT_SCALE = "cuda", 100_000, 1.0
"""``--rehearse`` sets them to the CPU and a short run, to check this script without a GPU. Its
time limits are five times a GPU session's: they only catch a hang, on a CPU that a test suite
may be keeping busy."""


def algorithm_entry_points() -> list[str]:
    """The ``rlformer.algorithms`` lines of pyproject.toml, as ``name = module:attr``."""
    section, lines = False, []
    for line in (REPO / "pyproject.toml").read_text().splitlines():
        if line.startswith("["):
            section = line.strip() == '[project.entry-points."rlformer.algorithms"]'
        elif section and (found := re.match(r'^(\w+)\s*=\s*"([^"]+)"', line)):
            lines.append(f"{found[1]} = {found[2]}")
    return lines


def python_env(scratch: Path) -> dict[str, str]:
    """This environment with the repository (and ``rlformer_envs``) importable.

    The algorithms are found through entry points, which an uninstalled checkout lacks: the shim
    holds a ``dist-info`` naming them, read from pyproject.toml."""
    shim = scratch / "shim"
    shim.mkdir(exist_ok=True)
    if not (shim / "rlformer_envs").exists():
        (shim / "rlformer_envs").symlink_to(REPO / "envs")
    info = shim / "rlformer-0.0.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rlformer\nVersion: 0.0.0\n")
    points = "\n".join(["[rlformer.algorithms]", *algorithm_entry_points()])
    (info / "entry_points.txt").write_text(points + "\n")
    path = [str(REPO), str(shim), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def run(command: list[str], env: dict[str, str], timeout: float) -> tuple[int, str]:
    """Exit status and the combined output (124 when the time limit ran out)."""
    try:
        done = subprocess.run(
            command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as err:
        output = (err.stdout or b"").decode() if isinstance(err.stdout, bytes) else err.stdout
        return 124, (output or "") + f"\n(time limit of {timeout:g} s)"
    return done.returncode, done.stdout + done.stderr


def files_marked_gpu() -> list[str]:
    """The test modules holding tests marked ``gpu``: collecting only these keeps a machine
    without Ray (whose modules import it at collection) from erroring on modules it never runs."""
    return sorted(
        str(path.relative_to(REPO))
        for path in (REPO / "tests").rglob("test_*.py")
        if re.search(r"mark\.gpu\b", path.read_text())
    )


def cuda_tests(env: dict[str, str], timeout: float) -> dict[str, Any]:
    workers = str(min(8, os.cpu_count() or 1))
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", workers]
    base += ["-p", "no:benchmark", "-rs"]  # pytest-benchmark, where installed, warns per worker
    results = {}
    for name, args in {
        "marked gpu": ["-m", "gpu and not ray", *files_marked_gpu()],
        "core on cuda": ["-m", "not ray", "-k", "cuda", "tests/core"],
    }.items():
        status, output = run([*base, *args], env, timeout / 2)
        counts = {
            kind: int(number)
            for number, kind in re.findall(r"(\d+) (passed|failed|skipped|errors?)\b", output)
        }
        results[name] = {"status": status, **counts}
        skips = re.findall(r"^SKIPPED \[\d+\] ([^\n]+)$", output, flags=re.MULTILINE)
        if skips:
            results[name]["skip_reasons"] = sorted(set(skips))
        if status != 0:
            results[name]["output"] = output[-1500:]
    # a part whose tests were all skipped verified nothing
    passed = all(r["status"] == 0 and r.get("passed", 0) > 0 for r in results.values())
    return {"passed": passed, **results}


def _train(env: dict[str, str], root: Path, device: str, steps: int, timeout: float) -> Path:
    command = [
        *(sys.executable, "-m", "rlformer.cli", "train", "configs/minatar/ppo_breakout.yaml"),
        *("--set", f"ppo.total_steps={steps}", "--set", f"run.device={device}"),
        *("--set", "eval.episodes=0", "--set", f"run.root={root}", "--set", "run.progress=false"),
    ]
    status, output = run(command, env, timeout)
    if status != 0:
        raise RuntimeError(f"training on {device} exited {status}: {output[-1500:]}")
    (run_dir,) = root.iterdir()
    return run_dir


def speed_figures(run_dir: Path) -> dict[str, Any]:
    """Medians over a run's iterations (``metrics.jsonl``): env steps/s, update seconds
    (iteration minus collection) and collection seconds; and the iterations counted."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    rows = [r for r in map(json.loads, lines) if "time/collect_s" in r]
    update = [r["time/iteration_s"] - r["time/collect_s"] for r in rows]
    return {
        "env_steps_per_s": round(statistics.median(r["time/env_steps_per_s"] for r in rows)),
        "update_s": round(statistics.median(update), 4),
        "collect_s": round(statistics.median(r["time/collect_s"] for r in rows), 4),
        "iterations": len(rows),
    }


def minatar_learner(env: dict[str, str], scratch: Path, timeout: float) -> dict[str, Any]:
    figures = {}
    for device in (DEVICE, "cpu"):
        root = scratch / f"minatar_{device}_{len(figures)}"
        run_dir = _train(env, root, device, MINATAR_STEPS, timeout / 2)
        speed = speed_figures(run_dir)
        figures[f"{device}_learner" if figures else "gpu_learner"] = {
            key: speed[key] for key in ("env_steps_per_s", "update_s", "iterations")
        }
    gpu, cpu = figures["gpu_learner"], figures["cpu_learner"]
    ratio = gpu["env_steps_per_s"] / cpu["env_steps_per_s"]
    return {"passed": True, **figures, "gpu_over_cpu": round(ratio, 2)}


EXPORT_SNIPPET = """
import json, sys
import numpy as np, torch
import rlformer_envs  # noqa: F401
from rlformer.config import load_config
from rlformer.runs.training import train
from rlformer.policies import load_policy
from rlformer.export.writer import export_policy
from rlformer.export.onnx_policy import ExportedPolicy
from rlformer.rollout.env_factory import vector_env_from_config

root, device = sys.argv[1], sys.argv[2]
cfg = load_config(None, ["env.id=rlformer/TMaze-v0", "env.kwargs.length=5", f"run.device={device}",
                         "ppo.total_steps=4096", "eval.episodes=0", "run.progress=false",
                         f"run.root={root}"])
run_dir = train(cfg).run_dir
torch_policy = load_policy(run_dir, device=device)
export_policy(load_policy(run_dir), f"{root}/export", "onnx")
onnx_policy = ExportedPolicy(f"{root}/export")
envs = vector_env_from_config(torch_policy.info.training_env, 8)
obs, _ = envs.reset(seed=0)
states = [torch_policy.initial_state(8), onnx_policy.initial_state(8)]
start, reward, differ, gap = np.ones(8, bool), None, 0, 0.0
for _ in range(200):
    a = torch_policy.distribution(obs, states[0], start, reward)
    b = onnx_policy.distribution(obs, states[1], start, reward)
    gap = max(gap, max(float(np.abs(x - y).max()) for x, y in zip(a.logits, b.logits)))
    acts = []
    for i, policy in enumerate((torch_policy, onnx_policy)):
        action, states[i] = policy.act(obs, states[i], start, reward)
        acts.append(np.asarray(action))
    differ += int((acts[0] != acts[1]).sum())
    obs, reward, term, trunc, _ = envs.step(acts[0])
    start = term | trunc
print(json.dumps({"steps": 200 * 8, "actions_differing": differ, "max_logit_gap": gap}))
"""


def export_on_cuda(env: dict[str, str], scratch: Path, timeout: float) -> dict[str, Any]:
    command = [sys.executable, "-c", EXPORT_SNIPPET, str(scratch / "export_run"), DEVICE]
    status, output = run(command, env, timeout)
    if status != 0:
        return {"passed": False, "error": output[-1500:]}
    found = [line for line in output.splitlines() if line.startswith('{"steps"')]
    if not found:
        return {"passed": False, "error": output[-1500:]}
    figures = json.loads(found[-1])
    passed = figures["actions_differing"] == 0 and figures["max_logit_gap"] < 1e-3
    return {"passed": passed, **figures}


def dt_vs_transformers(env: dict[str, str], scratch: Path, timeout: float) -> dict[str, Any]:
    probe = run([sys.executable, "-c", "import transformers"], env, 60)
    if probe[0] != 0:
        return {"passed": None, "skipped": "transformers is not installed (the bench extra)"}
    command = [sys.executable, "benchmarks/dt.py", "--quick", "--device", DEVICE]
    status, output = run(command, env, timeout)
    lines = [line for line in output.splitlines() if "x" in line and "/s" in line]
    return {"passed": status == 0, "status": status, "summary": lines[-8:] or output[-800:]}


PARTS: dict[str, tuple[Callable[..., dict[str, Any]], float]] = {
    "cuda_tests": (lambda env, scratch, t: cuda_tests(env, t), 240.0),
    "minatar_learner": (minatar_learner, 150.0),
    "export_on_cuda": (export_on_cuda, 60.0),
    "dt_vs_transformers": (dt_vs_transformers, 60.0),
}


def kept_parts(report_path: Path, rerun: set[str]) -> dict[str, Any]:
    """The parts of an earlier report that this run does not repeat, marked with its commit
    and GPU (a kept part keeps the marks of the run that made it)."""
    if not report_path.exists():
        return {}
    earlier = json.loads(report_path.read_text())
    marks = {"commit": earlier["commit"], "gpu": earlier.get("machine", {}).get("gpu")}
    return {
        name: {**marks, **result} for name, result in earlier["parts"].items() if name not in rerun
    }


def machine(env: dict[str, str]) -> dict[str, Any]:
    probe = (
        "import json, torch; c = torch.cuda.is_available(); print(json.dumps({'torch': "
        "torch.__version__, 'cuda': c, 'gpu': torch.cuda.get_device_name(0) if c else None}))"
    )
    status, output = run([sys.executable, "-c", probe], env, 120)
    facts = json.loads(output.strip().splitlines()[-1]) if status == 0 else {"cuda": False}
    return {**facts, "cpus": os.cpu_count(), "python": sys.version.split()[0]}


def render(report: dict[str, Any]) -> str:
    facts = report["machine"]
    lines = [
        "# GPU check" + (" (rehearsal on the CPU: no GPU figure)" if report["rehearsal"] else ""),
        "",
        "Written by `python3 scripts/gpu_check.py` (see its docstring for the parts); do not",
        "edit by hand. Each part is passed, failed, or unverified (skipped, with the reason).",
        "",
        f"Machine: {facts.get('gpu') or 'no CUDA device'}, torch {facts.get('torch')}, "
        f"Python {facts['python']}, {facts['cpus']} CPUs; commit {report['commit']}, "
        f"{report['date']}, {report['seconds']:.0f} s in all.",
        "",
        "| part | result | figures |",
        "| --- | --- | --- |",
    ]
    for name, result in report["parts"].items():
        verdict = {True: "passed", False: "**failed**", None: "unverified"}[result.get("passed")]
        figures = {k: v for k, v in result.items() if k != "passed"}
        text = json.dumps(figures, sort_keys=True).replace("|", "\\|")
        lines.append(f"| {name} | {verdict} | `{text}` |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="folder of gpu_check.{json,md}")
    parser.add_argument("--parts", nargs="*", default=list(PARTS), choices=list(PARTS))
    parser.add_argument(
        "--rehearse",
        action="store_true",
        help="run the parts on the CPU with short budgets, to check this script (the figures "
        "then say nothing about a GPU)",
    )
    parser.add_argument(
        "--keep-others",
        action="store_true",
        help="keep the parts not named in --parts from the report already in --out, each with "
        "the commit it ran at (a short GPU lease reruns only what failed)",
    )
    args = parser.parse_args()
    if args.rehearse:
        global DEVICE, MINATAR_STEPS, LIMIT_SCALE
        DEVICE, MINATAR_STEPS, LIMIT_SCALE = "cpu", 4096, 5.0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as folder:
        scratch = Path(folder)
        env = python_env(scratch)
        facts = machine(env)
        parts: dict[str, Any] = {}
        for name in args.parts:
            function, limit = PARTS[name]
            if not facts["cuda"] and not args.rehearse:
                parts[name] = {"passed": None, "skipped": "no CUDA device on this machine"}
                continue
            begun = time.monotonic()
            try:
                parts[name] = function(env, scratch, limit * LIMIT_SCALE)
            except Exception as err:  # noqa: BLE001 - a failed part is recorded, the rest run
                parts[name] = {"passed": False, "error": str(err)[-1500:]}
            parts[name]["seconds"] = round(time.monotonic() - begun, 1)
            print(f"{name}: {parts[name]}", flush=True)
    commit = run(["git", "describe", "--always", "--dirty"], os.environ.copy(), 30)[1].strip()
    if args.keep_others:
        merged = {**kept_parts(args.out / "gpu_check.json", set(parts)), **parts}
        parts = {name: merged[name] for name in PARTS if name in merged}
    report = {
        "rehearsal": args.rehearse,
        "machine": facts,
        "commit": commit or "unknown",
        "date": time.strftime("%Y-%m-%d"),
        "seconds": time.monotonic() - started,
        "parts": parts,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_check.json").write_text(json.dumps(report, indent=1) + "\n")
    (args.out / "gpu_check.md").write_text(render(report))
    print(render(report))
    failed = [n for n, r in parts.items() if r.get("passed") is False]
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
