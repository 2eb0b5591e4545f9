"""The MinAtar PPO benchmark (benchmarks/minatar_ppo.py): which run directory of a (game, seed,
budget) it reads, resumes or leaves alone, and the whole loop at a tiny budget on real MinAtar
Breakout: trained, found finished again (nothing retrained), resumed after a kill, reported."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from rlformer.runs.directory import RunLock

REPO = Path(__file__).parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import minatar_ppo  # noqa: E402


def _fake_run(
    root: Path,
    name: str,
    total_steps: int,
    checkpoints: tuple[int, ...] = (),
    finished=False,
    sets: tuple[str, ...] = (),
) -> Path:
    """A run directory with what the plan reads: the saved config (the game's config file with
    the budget and ``sets``), checkpoint files, eval.json."""
    run_dir = root / name
    (run_dir / "checkpoints").mkdir(parents=True)
    game = name.split("_")[1]
    cfg = minatar_ppo.configured(game, [f"ppo.total_steps={total_steps}", *sets])
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    for step in checkpoints:
        (run_dir / "checkpoints" / f"ckpt_{step:09d}.pt").write_bytes(b"")
    if finished:
        (run_dir / "eval.json").write_text('{"episodes": 1, "return_mean": 0, "return_std": 0}')
    return run_dir


def test_plan_reads_a_finished_run_resumes_the_furthest_and_ignores_other_budgets(
    tmp_path: Path,
) -> None:
    plan = minatar_ppo.plan
    assert plan(tmp_path / "absent", "breakout", 0, 1000) == minatar_ppo.Plan("start")
    # A killed run before its first checkpoint: nothing to resume, a new run starts.
    _fake_run(tmp_path, "ppo_breakout_seed0-20260101-000000", 1000)
    assert plan(tmp_path, "breakout", 0, 1000).action == "start"
    further = _fake_run(tmp_path, "ppo_breakout_seed0-20260101-000001", 1000, (100, 400))
    _fake_run(tmp_path, "ppo_breakout_seed0-20260101-000002", 1000, (200,))
    assert plan(tmp_path, "breakout", 0, 1000) == minatar_ppo.Plan("resume", further)
    # Another budget, another seed, a renamed directory: not this run.
    _fake_run(tmp_path, "ppo_breakout_seed0-20260101-000003", 2000, (2000,), finished=True)
    _fake_run(tmp_path, "ppo_breakout_seed1-20260101-000000", 1000, (1000,), finished=True)
    _fake_run(tmp_path, "ppo_breakout_seed0-20260101-000004.empty", 1000, (1000,), finished=True)
    assert plan(tmp_path, "breakout", 0, 1000) == minatar_ppo.Plan("resume", further)
    assert plan(tmp_path, "breakout", 0, 2000).action == "row"
    # --report-only trains nothing: an unfinished run is named, not resumed.
    assert plan(tmp_path, "breakout", 0, 1000, train=False) == minatar_ppo.Plan(
        "unfinished", further.parent / "ppo_breakout_seed0-20260101-000002"
    )
    finished = _fake_run(tmp_path, "ppo_breakout_seed0-20260101-000005", 1000, (1000,), True)
    assert plan(tmp_path, "breakout", 0, 1000) == minatar_ppo.Plan("row", finished)


def test_runs_of_other_settings_are_other_measurements(tmp_path: Path) -> None:
    """A run trained with another learning rate is not the config's run, and ``--set`` finds
    it; a key added to the schema since a run started (absent from its saved config) still
    matches at its default; a saved config this rlformer cannot read is no run of either."""
    plan, lr = minatar_ppo.plan, ("ppo.learning_rate=0.00025",)
    other = _fake_run(tmp_path, "ppo_breakout_seed0-20260101-000000", 1000, (1000,), True, lr)
    assert plan(tmp_path, "breakout", 0, 1000) == minatar_ppo.Plan("start")
    assert plan(tmp_path, "breakout", 0, 1000, sets=lr) == minatar_ppo.Plan("row", other)
    assert minatar_ppo.settings_digest(
        minatar_ppo.configured("breakout", lr)
    ) != minatar_ppo.settings_digest(minatar_ppo.configured("breakout"))

    same = _fake_run(tmp_path, "ppo_breakout_seed0-20260101-000001", 1000, (500,))
    saved = yaml.safe_load((same / "config.yaml").read_text())
    del saved["rollout"]["compile_act"]  # as written before that key existed (default: off)
    (same / "config.yaml").write_text(yaml.safe_dump(saved))
    assert plan(tmp_path, "breakout", 0, 1000) == minatar_ppo.Plan("resume", same)
    saved["ppo"]["no_such_key"] = 1
    (same / "config.yaml").write_text(yaml.safe_dump(saved))
    assert plan(tmp_path, "breakout", 0, 1000) == minatar_ppo.Plan("start")


def test_a_run_another_process_holds_is_left_to_it(tmp_path: Path) -> None:
    run_dir = _fake_run(tmp_path, "ppo_seaquest_seed2-20260101-000000", 1000, (100,))
    with RunLock(run_dir):  # as `rlformer train` holds it while training
        assert minatar_ppo.plan(tmp_path, "seaquest", 2, 1000) == minatar_ppo.Plan("busy", run_dir)
    assert minatar_ppo.plan(tmp_path, "seaquest", 2, 1000).action == "resume"


def test_new_runs_keep_every_checkpoint(tmp_path: Path) -> None:
    assert minatar_ppo.keep_checkpoints("breakout", 5_000_000) == minatar_ppo.KEEP_CHECKPOINTS
    # 100 iterations of 8 x 128 steps between checkpoints: 20M steps (19,532 iterations) write
    # 195 on the way and the final one.
    assert minatar_ppo.keep_checkpoints("seaquest", 20_000_000) == 196
    arguments = minatar_ppo.start_arguments("seaquest", 2, 4096, tmp_path)
    assert arguments[0] == str(REPO / "configs" / "minatar" / "ppo_seaquest.yaml")
    assert arguments[1::2] == ["--set"] * 6
    assert arguments[2::2] == [
        "run.seed=2",
        f"run.root={tmp_path}",
        "run.name=ppo_seaquest_seed2",
        "run.progress=false",
        "run.keep_checkpoints=60",
        "ppo.total_steps=4096",
    ]


@pytest.mark.slow
def test_trains_skips_what_finished_resumes_a_killed_run_and_reports(tmp_path: Path) -> None:
    pytest.importorskip("minatar")
    root, out = tmp_path / "runs", tmp_path / "docs" / "results.jsonl"
    argv = ["--steps", "4096", "--seeds", "1", "--games", "breakout", "--root", str(root)]
    argv += ["--out", str(out)]
    minatar_ppo.main(argv)
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    (run_dir,) = root.iterdir()
    assert run_dir.name.startswith("ppo_breakout_seed0-") and row["run_dir"] == str(run_dir)
    assert (row["game"], row["seed"], row["steps"], row["env_steps"]) == ("breakout", 0, 4096, 4096)
    assert row["source"] == "trained" and row["eval_episodes"] == 100
    evaluation = json.loads((run_dir / "eval.json").read_text())
    assert row["eval_return_mean"] == evaluation["return_mean"]
    assert row["train_return_mean"] is not None and row["seconds"] > 0
    assert row["steps_per_s"] == pytest.approx(4096 / row["seconds"])
    report = out.with_suffix(".md").read_text()
    assert "| rlformer PPO (ours) | 4,096 |" in report
    assert "| DQN (published: MinAtar README) | 5,000,000 | ≈ 10 |" in report
    assert "| PPO (published: Pgx PPO example) | 19,922,944 | - | ≈ 50 |" in report
    png = out.parent / "ppo_breakout_4096steps.png"
    assert png.read_bytes().startswith(b"\x89PNG")

    # Again: the row is there, so nothing trains; no new run directory, eval.json untouched.
    stamp = (run_dir / "eval.json").stat().st_mtime_ns
    minatar_ppo.main(argv)
    assert len(out.read_text().splitlines()) == 1 and list(root.iterdir()) == [run_dir]
    assert (run_dir / "eval.json").stat().st_mtime_ns == stamp

    # Report only, from the rows alone: the same report.
    out.with_suffix(".md").unlink()
    minatar_ppo.main(["--report-only", *argv])
    assert out.with_suffix(".md").read_text() == report

    # Rows lost: a finished run under --root becomes a row without training ("found").
    out.unlink()
    minatar_ppo.main(["--report-only", *argv])
    (found,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert found["source"] == "found" and found["eval_return_mean"] == row["eval_return_mean"]
    assert (run_dir / "eval.json").stat().st_mtime_ns == stamp

    # Killed after its last checkpoint, before the final evaluation: resumed in place.
    out.unlink()
    (run_dir / "eval.json").unlink()
    minatar_ppo.main(["--report-only", *argv])  # reports it unfinished, trains nothing
    assert not out.exists() and not (run_dir / "eval.json").exists()
    minatar_ppo.main(argv)
    (resumed,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert resumed["source"] == "resumed" and resumed["run_dir"] == str(run_dir)
    assert list(root.iterdir()) == [run_dir] and (run_dir / "eval.json").is_file()
    assert resumed["eval_return_mean"] == row["eval_return_mean"]  # same seeds, same weights

    # A variant (--set): trained beside the config's run, its own row, section and PNG.
    variant = [*argv, "--set", "ppo.learning_rate=0.00025"]
    minatar_ppo.main(variant)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2 and rows[1]["ppo"]["learning_rate"] == 0.00025
    assert rows[1]["settings_digest"] != rows[0]["settings_digest"]
    assert len(list(root.iterdir())) == 2
    report = out.with_suffix(".md").read_text()
    assert "4,096 steps\n" in report
    assert "4,096 steps, with `ppo.learning_rate=0.00025`\n" in report
    assert (out.parent / f"ppo_breakout_4096steps_{rows[1]['settings_digest']}.png").is_file()
    minatar_ppo.main(variant)  # found: nothing trains again
    assert len(out.read_text().splitlines()) == 2 and len(list(root.iterdir())) == 2
