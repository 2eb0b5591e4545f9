"""Fixed-seed PPO, DT and ODT runs of 5-8k steps give the recorded metrics and checkpoint
tensors: bit for bit on the kind of CPU they were recorded on, within float rounding on others.

The record (``data/fixed_seed_runs.json``) holds, per algorithm, every ``metrics.jsonl`` row
(timing columns left out), a digest of every tensor of the final checkpoint and its norm. A
change meant to leave training alone (moving modules, renaming, refactoring) must keep them;
one meant to change it re-records them on purpose, and says so in its commit::

    .venv/bin/python -m tests.reliability.test_fixed_seed_runs --record

Float arithmetic repeats exactly only for one torch build on one kind of CPU: torch picks its
kernels by the instruction set (AVX2, AVX-512), and math libraries may take other paths on other
vendors' chips (on an AVX2 AMD machine the runs recorded on an earlier machine differed in the
seventh digit). So the record names the CPU it was made
on (:func:`cpu_kind`); on that kind of CPU the test compares bits, on any other it compares
the rows and the tensors' norms to a relative 1e-4, far below what a changed update moves.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

RECORD = Path(__file__).parent / "data" / "fixed_seed_runs.json"
TINY_CORE = [
    "model.core.n_layers=1",
    "model.core.d_model=16",
    "model.core.n_heads=2",
    "model.core.d_ff=32",
    "model.core.memory_length=8",
]
TINY_DT = [
    "dt.context=4",
    "dt.batch_size=8",
    "dt.log_every=50",
    "dt.warmup_steps=10",
    "dt.core.n_layers=1",
    "dt.core.d_model=16",
    "dt.core.d_ff=32",
    "dt.core.dropout=0.0",
]
COMMON = ["run.device=cpu", "run.progress=false", "run.seed=3", "eval.episodes=0"]


def overrides(algo: str, data: Path) -> list[str]:
    """The settings of each algorithm's fixed-seed run (T-Maze, corridor 4, tiny models)."""
    env = ["env.id=rlformer/TMaze-v0", "env.kwargs.length=4", *COMMON]
    if algo == "ppo":
        extra = ["rollout.envs_per_worker=4", "rollout.fragment_length=32", "ppo.num_minibatches=2"]
        return [*env, *TINY_CORE, *extra, "ppo.total_steps=8192"]
    offline = [f"dt.dataset={data}", *TINY_DT]
    if algo == "dt":
        return ["algo=dt", *env, *offline, "dt.train_steps=5000"]
    return [
        *("algo=odt", *env, *offline, "dt.target_returns=[1]"),
        *("odt.pretrain_steps=200", "odt.online_steps=5000", "odt.updates_per_iteration=4"),
    ]


def walks(folder: Path) -> Path:
    """Passive T-Maze walks (corridor 4), the offline data of the DT and ODT runs."""
    from rlformer.data.d4rl_format import write_d4rl
    from rlformer.data.synthetic import tmaze_walks

    path = folder / "walks.hdf5"
    write_d4rl(path, tmaze_walks(4, 40, seed=0, p_correct=0.75), {"env_id": "rlformer/TMaze-v0"})
    return path


def _digest(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu().contiguous().reshape(-1)
        raw = tensor.view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
        return hashlib.sha256(raw + str(tuple(value.shape)).encode()).hexdigest()[:16]
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def _tensors(value: Any, path: str = "") -> Iterator[tuple[str, torch.Tensor]]:
    if isinstance(value, torch.Tensor):
        yield path, value
    elif isinstance(value, dict):
        for key in sorted(value, key=str):
            yield from _tensors(value[key], f"{path}/{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _tensors(item, f"{path}/{i}")


def cpu_kind() -> str:
    """The instruction set torch's kernels use here and the CPU's vendor: what decides how
    the same float arithmetic rounds."""
    vendor = "unknown vendor"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        vendor = next(
            (
                line.split(":", 1)[1].strip()
                for line in cpuinfo.read_text().splitlines()
                if line.startswith("vendor_id")
            ),
            vendor,
        )
    return f"{torch.backends.cpu.get_cpu_capability()} {vendor} torch {torch.__version__}"


def fingerprint(algo: str, folder: Path) -> dict[str, Any]:
    """Train the algorithm's fixed-seed run under ``folder``; its metric rows, and a digest
    and the norm of each of its final checkpoint's tensors."""
    import rlformer_envs  # noqa: F401

    from rlformer.config import load_config
    from rlformer.runs.directory import load_checkpoint
    from rlformer.runs.training import train

    torch.set_num_threads(1)
    root = folder / algo
    cfg = load_config(None, [*overrides(algo, walks(folder)), f"run.root={root}"])
    run_dir = train(cfg).run_dir
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rows = [{k: v for k, v in row.items() if not k.startswith("time/")} for row in rows]
    tensors = dict(_tensors(load_checkpoint(run_dir)))
    return {
        "metric_rows": rows,
        "tensors": {name: _digest(tensor) for name, tensor in tensors.items()},
        "tensor_norms": {name: float(t.double().norm()) for name, t in tensors.items()},
    }


def _close(got: Any, want: Any) -> bool:
    """Equal, or floats within the tolerance that another CPU's rounding needs."""
    if isinstance(got, float | int) and isinstance(want, float | int):
        return math.isclose(got, want, rel_tol=1e-4, abs_tol=1e-6)
    return bool(got == want)


def _first_differing_row(
    rows: list[dict[str, Any]], want: list[dict[str, Any]], exact: bool
) -> int | None:
    for i, (row, wanted) in enumerate(zip(rows, want, strict=False)):
        same = (
            row == wanted
            if exact
            else row.keys() == wanted.keys() and all(_close(row[k], wanted[k]) for k in wanted)
        )
        if not same:
            return i
    return None if len(rows) == len(want) else min(len(rows), len(want))


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "dt", "odt"])
def test_a_fixed_seed_run_gives_the_recorded_metrics_and_tensors(algo: str, tmp_path: Path) -> None:
    record = json.loads(RECORD.read_text())
    expected, exact = record["runs"][algo], record["cpu"] == cpu_kind()
    how = (
        "bit for bit" if exact else f"within 1e-4 (recorded on {record['cpu']}, here {cpu_kind()})"
    )
    got = fingerprint(algo, tmp_path)
    rows, want = got["metric_rows"], expected["metric_rows"]
    first = _first_differing_row(rows, want, exact)
    assert first is None, (
        f"metrics.jsonl differs {how} from the record from row {first} of {len(want)} "
        f"(now {rows[first] if first < len(rows) else None}, recorded "
        f"{want[first] if first < len(want) else None})"
    )
    assert got["tensors"].keys() == expected["tensors"].keys(), (
        f"checkpoint tensors added/removed: "
        f"{sorted(got['tensors'].keys() ^ expected['tensors'].keys())[:8]}"
    )
    if exact:
        changed = sorted(
            k for k in expected["tensors"] if got["tensors"][k] != expected["tensors"][k]
        )
    else:
        norms, wanted = got["tensor_norms"], expected["tensor_norms"]
        changed = sorted(k for k in wanted if not _close(norms[k], wanted[k]))
    assert not changed, f"checkpoint tensors differ {how}: {changed[:8]}"


def main() -> None:
    parser = argparse.ArgumentParser(description="Re-record the fixed-seed runs' digests.")
    parser.add_argument("--record", action="store_true", required=True)
    parser.add_argument("--algos", nargs="*", default=["ppo", "dt", "odt"])
    args = parser.parse_args()
    record = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    if record.get("cpu") != cpu_kind():  # a record holds the runs of one kind of CPU
        if set(args.algos) != {"ppo", "dt", "odt"}:
            parser.error(f"the record is of another CPU ({record.get('cpu')}): record all runs")
        record = {"cpu": cpu_kind(), "runs": {}}
    with tempfile.TemporaryDirectory() as folder:
        for algo in args.algos:
            record["runs"][algo] = fingerprint(algo, Path(folder))
            rows = record["runs"][algo]["metric_rows"]
            print(f"{algo}: {len(rows)} rows, last {rows[-1]}")
    RECORD.parent.mkdir(exist_ok=True)
    RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
