"""The sweep report: statistics over seeds checked against values computed by hand."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlformer.evaluation.statistics import bootstrap_ci, interquartile_mean
from rlformer.sweep.report import load_sweep_results, summarize

# variant -> final eval/success_rate per seed
SCORES = {"gate=gru": [1.0, 2.0, 3.0, 10.0], "gate=input": [0.0, 0.2, 1.0, None]}


def _fake_sweep(root: Path) -> Path:
    """A sweep folder as the runner leaves it: sweep.json and one run directory per trial."""
    trials = []
    for variant, scores in SCORES.items():
        for seed, score in enumerate(scores):
            name = f"{variant}__seed{seed}"
            folder = root / "trials" / name
            trials.append(
                {
                    "name": name,
                    "task": "tmaze",
                    "variant": variant,
                    "values": {},
                    "seed": seed,
                    "config": {"run": {"root": str(folder)}},
                }
            )
            if score is None:
                continue  # never started
            run = folder / "run-20260101-000000"
            run.mkdir(parents=True)
            rows = [{"step": 64 * (i + 1), "rollout/success_rate": 0.1 * i} for i in range(3)]
            rows.append({"step": 192, "eval/success_rate": score})
            (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            (folder / "done.json").write_text("{}")
    index = {
        "name": "fake",
        "metric": "rollout/success_rate",
        "mode": "max",
        "score": "eval/success_rate",
        "trials": trials,
    }
    (root / "sweep.json").write_text(json.dumps(index))
    return root


def test_statistics_over_seeds_match_hand_computed_values(tmp_path: Path) -> None:
    results = load_sweep_results(_fake_sweep(tmp_path))
    gru, inp = summarize(results)
    # 4 seeds: mean = 16 / 4; IQM drops one score at each end -> mean(2, 3).
    assert (gru.seeds, gru.missing) == (4, 0)
    assert gru.mean == pytest.approx(4.0)
    assert gru.iqm == pytest.approx(2.5)
    assert gru.std == pytest.approx(np.sqrt(((1 - 4) ** 2 + 4 + 1 + 36) / 4))
    # 3 seeds (one never ran): mean = 1.2 / 3; IQM keeps [0.75, 2.25] of the sorted scores:
    # weights 0.25, 1, 0.25 -> (0.25 * 0 + 1 * 0.2 + 0.25 * 1) / 1.5 = 0.3.
    assert (inp.seeds, inp.missing) == (3, 1)
    assert inp.mean == pytest.approx(0.4)
    assert inp.iqm == pytest.approx(0.3)
    assert inp.scores == [0.0, 0.2, 1.0]
    # CIs are the evaluation module's percentile bootstrap over seeds (same draws, seed 0) ...
    assert gru.mean_ci == bootstrap_ci([1.0, 2.0, 3.0, 10.0], np.mean, seed=0)
    assert inp.iqm_ci == bootstrap_ci([0.0, 0.2, 1.0], interquartile_mean, seed=0)
    # ... which lie within the observed range and around the statistic.
    assert 1.0 <= gru.mean_ci[0] <= 4.0 <= gru.mean_ci[1] <= 10.0
    # Learning curves come from the per-iteration metric.
    assert results.trials[0].curve == [(64, 0.0), (128, 0.1), (192, 0.2)]


def test_report_cli_writes_table_json_csv_and_png(tmp_path: Path) -> None:
    root = _fake_sweep(tmp_path / "sweep")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlformer.cli",
            "sweep",
            "report",
            str(root),
            "--json",
            str(tmp_path / "r.json"),
            "--csv",
            str(tmp_path / "r.csv"),
            "--plot",
            str(tmp_path / "r.png"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "| tmaze | gate=gru | 4 | 4.000 |" in out.stdout
    assert "| tmaze | gate=input | 3 (+1 missing) | 0.400 |" in out.stdout
    data = json.loads((tmp_path / "r.json").read_text())
    assert [r["iqm"] for r in data["rows"]] == pytest.approx([2.5, 0.3])
    assert [t["score"] for t in data["trials"]][-1] is None
    with open(tmp_path / "r.csv") as f:
        rows = list(csv.DictReader(f))
    assert float(rows[1]["mean"]) == pytest.approx(0.4) and rows[1]["scores"] == "0.0 0.2 1.0"
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"


def test_report_on_a_folder_that_is_no_sweep_is_one_error_line(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rlformer.cli", "sweep", "report", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert out.stderr.strip() == f"error: {tmp_path}: not a sweep folder (no sweep.json)"
