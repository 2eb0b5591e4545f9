"""The MinAtar pixels benchmark (benchmarks/dt_pixels.py): which checkpoints it records, which
episodes its statistics count, and its whole pipeline at a tiny size on real MinAtar Breakout."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

from rlformer.config import TrainConfig, load_config
from rlformer.data.d4rl_format import read_d4rl, write_d4rl
from rlformer.data.episodes import Dataset, Episode
from rlformer.data.synthetic import tmaze_walks
from rlformer.runs.signals import Interrupted
from rlformer.runs.training import train
from tests.reliability.test_dt_reliability import _config as dt_run_config
from tests.reliability.test_dt_reliability import _signal_at_step as signal_at_step

REPO = Path(__file__).parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import dt_pixels  # noqa: E402


def _fake_run(root: Path, returns: dict[int, float], checkpoints: list[int]) -> Path:
    """A run directory with metrics and (empty) checkpoint files: enough to choose from."""
    run_dir = root / "ppo"
    (run_dir / "checkpoints").mkdir(parents=True)
    rows = [{"step": step, "rollout/return_mean": value} for step, value in returns.items()]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for step in checkpoints:
        (run_dir / "checkpoints" / f"ckpt_{step:09d}.pt").write_bytes(b"")
    (run_dir / "checkpoints" / "latest").write_text(f"ckpt_{checkpoints[-1]:09d}.pt")
    return run_dir


def test_expert_is_the_final_checkpoint_and_medium_the_one_nearest_half_its_return(
    tmp_path: Path,
) -> None:
    returns = {1000: 1.0, 2000: 2.0, 3000: 4.0, 4000: 6.0, 5000: 10.0}
    run_dir = _fake_run(tmp_path, returns, [500, 2000, 3000, 4000, 5000])
    medium, expert = dt_pixels.choose_policies(run_dir, None)
    assert (expert.step, expert.training_return) == (5000, 10.0)
    # 4.0 and 6.0 are both 1.0 from half of 10: the lower one (D4RL: a third to half of expert).
    assert (medium.step, medium.training_return) == (3000, 4.0)
    assert dt_pixels.choose_policies(run_dir, 4000)[0].step == 4000
    with pytest.raises(SystemExit, match="no checkpoint at step 4500"):
        dt_pixels.choose_policies(run_dir, 4500)


def _episode(reward: float, terminated: bool) -> Episode:
    rewards = np.array([0.0, reward], np.float32)
    return Episode(np.zeros((2, 3)), np.zeros(2, np.int64), rewards, terminated, not terminated)


def test_statistics_leave_out_the_episodes_the_recording_cut_off() -> None:
    # Two slots: the last two episodes are each slot's cut-off, unless the env ended them.
    episodes = [
        _episode(5.0, True),
        _episode(9.0, False),
        _episode(3.0, True),
        _episode(1.0, False),
    ]
    recording = Dataset(episodes, "d4rl:x.hdf5", {"num_envs": 2})
    np.testing.assert_array_equal(dt_pixels.whole_episode_returns(recording), [5.0, 9.0, 3.0])
    other = Dataset(episodes[:2], "d4rl:y.hdf5", {"num_envs": 2})  # keeps 5.0 alone
    stats = dt_pixels.data_stats([recording, other])
    assert (stats.mean, stats.best, stats.episodes, stats.transitions) == (5.5, 9.0, 4, 12)


def test_a_recording_is_reused_after_its_ppo_run_moved_but_not_from_another_run(
    tmp_path: Path,
) -> None:
    """The recorded policy path names where the run lay; a renamed parent folder keeps the run
    (its folder and checkpoint names), another run or another setting does not."""
    recorded = "/old/place/ppo_seaquest-20261127/checkpoints/ckpt_000819200.pt"
    data = Dataset([_episode(1.0, True)], "d4rl:x.hdf5", {"policy": recorded, "num_envs": 2})
    args = argparse.Namespace(random_fraction=0.1, num_envs=2, transitions=data.num_transitions)
    data.metadata["random_fraction"] = 0.1
    moved = Path("/new/place/ppo_seaquest-20261127/checkpoints/ckpt_000819200.pt")
    dt_pixels.check_recording(tmp_path / "x.hdf5", data, dt_pixels.Checkpoint(moved, 1, 1.0), args)
    for other in (
        Path("/old/place/ppo_seaquest-20261128/checkpoints/ckpt_000819200.pt"),
        Path("/old/place/ppo_seaquest-20261127/checkpoints/ckpt_000716800.pt"),
    ):
        with pytest.raises(SystemExit, match="recorded otherwise: policy"):
            dt_pixels.check_recording(
                tmp_path / "x.hdf5", data, dt_pixels.Checkpoint(other, 1, 1.0), args
            )
    args.num_envs = 4
    with pytest.raises(SystemExit, match="num_envs 2 \\(wanted 4\\)"):
        dt_pixels.check_recording(
            tmp_path / "x.hdf5", data, dt_pixels.Checkpoint(moved, 1, 1.0), args
        )


def test_a_killed_run_resumes_after_its_root_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's config names the dataset where it lay; a killed run under a moved root resumes
    with the dataset where it lies now and ends at the full length."""
    old, new = tmp_path / "old", tmp_path / "new"
    (old / "data").mkdir(parents=True)
    write_d4rl(
        old / "data" / "walks.hdf5",
        tmaze_walks(4, 40, seed=0, p_correct=0.75),
        {"env_id": "rlformer/TMaze-v0"},
    )

    def config(root: Path) -> TrainConfig:
        return dt_run_config(root / "data" / "walks.hdf5", root / "runs", "run.name=walks")

    signal_at_step(monkeypatch, 7, signal.SIGTERM)
    with pytest.raises(Interrupted):
        train(config(old))
    monkeypatch.undo()
    old.rename(new)
    run_dir, _, resumed = dt_pixels.train_run(config(new))
    assert resumed and run_dir.parent == new / "runs"
    assert dt_pixels.progress(run_dir) == config(new).dt.train_steps


@pytest.mark.slow
def test_the_pipeline_records_trains_evaluates_and_skips_what_is_done(tmp_path: Path) -> None:
    pytest.importorskip("minatar")
    ppo = load_config(
        REPO / "configs" / "minatar" / "ppo_breakout.yaml",
        [
            "ppo.total_steps=2048",
            "ppo.num_minibatches=2",
            "run.checkpoint_every=1",
            "run.progress=false",
            "eval.episodes=0",
            f"run.root={tmp_path / 'ppo'}",
        ],
    )
    ppo_run = train(ppo).run_dir
    out = tmp_path / "rows" / "results.jsonl"
    argv = [
        *("--ppo-run", f"breakout={ppo_run}", "--transitions", "300", "--num-envs", "4"),
        *("--seeds", "1", "--steps", "6", "--context", "4", "--layers", "1", "--width", "16"),
        *("--heads", "1", "--batch", "4", "--warmup", "2", "--episodes", "2"),
        *("--sweep", "0.5,1", "--root", str(tmp_path / "bench"), "--out", str(out)),
    ]
    dt_pixels.main(argv)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {(r["dataset"], r["method"]) for r in rows} == {
        (d, m) for d in dt_pixels.DATASETS for m in dt_pixels.METHODS
    }
    expert = read_d4rl(tmp_path / "bench" / "data" / "breakout-expert.hdf5")
    assert expert.metadata["policy"].endswith("ckpt_000002048.pt")
    assert expert.metadata["random_fraction"] == 0.1 and not expert.metadata["deterministic"]
    mixed = read_d4rl(tmp_path / "bench" / "data" / "breakout-medium-expert.hdf5")
    assert mixed.num_transitions == 600
    assert [p["dataset"] for p in mixed.metadata["parts"]] == ["medium", "expert"]
    for row in rows:
        assert row["target"] == pytest.approx(dt_pixels.data_stats([expert]).mean)
        assert [s["fraction"] for s in row["sweep"]] == [0.5, 1.0]
        assert row["score"] == row["sweep"][1]["mean"]
        if row["method"] == "bc":  # the same episodes whatever the target
            assert row["sweep"][0]["mean"] == row["sweep"][1]["mean"]
    report = out.with_suffix(".md").read_text()
    assert "## breakout" in report and "BC (DT, no returns)" in report
    assert "medium-expert, 6 steps: DT above BC" in report

    runs = set((tmp_path / "bench" / "runs").iterdir())
    dt_pixels.main(argv)  # every row is there: nothing is recorded, trained or evaluated again
    assert len(out.read_text().splitlines()) == len(rows)
    assert set((tmp_path / "bench" / "runs").iterdir()) == runs
    out.with_suffix(".md").unlink()
    dt_pixels.main(["--report-only", "--out", str(out)])
    assert out.with_suffix(".md").read_text() == report

    # Another --out with more episodes at the target: the same runs, evaluated again.
    again = tmp_path / "rows" / "more_episodes.jsonl"
    dt_pixels.main([*argv[:-1], str(again), "--target-episodes", "3"])
    assert set((tmp_path / "bench" / "runs").iterdir()) == runs
    redone = {(r["dataset"], r["method"]): r for r in map(json.loads, again.open())}
    for row in rows:
        new = redone[(row["dataset"], row["method"])]
        assert (new["episodes"], new["sweep_episodes"]) == (3, 2)
        assert new["run_dir"] == row["run_dir"]
        assert new["sweep"][0] == row["sweep"][0]  # the 0.5x fraction: same 2 episodes
        assert new["score"] == new["sweep"][1]["mean"]
    assert "3 at the target, 2 at each other fraction" in again.with_suffix(".md").read_text()


def test_only_seed_picks_runs_among_the_seeds_and_eval_device_defaults_to_the_cpu() -> None:
    base = ["--report-only", "--seeds", "5"]
    assert dt_pixels.chosen_seeds(dt_pixels.parse_args(base)) == [0, 1, 2, 3, 4]
    one = dt_pixels.parse_args([*base, "--only-seed", "3", "--only-seed", "1"])
    assert dt_pixels.chosen_seeds(one) == [1, 3]
    with pytest.raises(SystemExit, match="--only-seed 7: seeds run from 0 to"):
        dt_pixels.parse_args([*base, "--only-seed", "7"])
    assert one.eval_device == "cpu"


def _row(method: str, seed: int, steps: int, score: float) -> dt_pixels.Row:
    sweep = [{"fraction": 1.0, "target": 5.0, "mean": score, "ci_low": score, "ci_high": score}]
    return dt_pixels.Row(
        task="seaquest",
        dataset="medium-expert",
        method=method,
        seed=seed,
        train_steps=steps,
        target=5.0,
        score=score,
        score_ci=[score, score],
        sweep=sweep,
        dataset_mean=3.0,
        dataset_best=9.0,
        dataset_episodes=100,
        episodes=100,
        variant="v",
        commit=None,
        seconds=1.0,
        train_seconds=1.0,
        resumed=False,
        run_dir="run",
    )


def test_the_report_keeps_runs_of_different_lengths_apart() -> None:
    """DT and BC at 3,000 steps are level and at 9,000 apart: pooled, the report would show one
    line per method and one verdict; kept apart, each length has its own line and verdict."""
    rows = [
        *(_row("dt", seed, 3000, 4.0 + 0.01 * seed) for seed in range(3)),
        *(_row("bc", seed, 3000, 4.0 - 0.01 * seed) for seed in range(3)),
        *(_row("dt", seed, 9000, 5.0 + 0.01 * seed) for seed in range(3)),
        *(_row("bc", seed, 9000, 3.0 + 0.01 * seed) for seed in range(3)),
    ]
    text = dt_pixels.report(rows)
    lines = [line for line in text.splitlines() if line.startswith("| medium-expert")]
    assert [line.split(" | ")[5] for line in lines] == ["3000", "3000", "9000", "9000"]
    assert "medium-expert, 3000 steps: DT above BC with CIs apart: no" in text
    assert "medium-expert, 9000 steps: DT above BC with CIs apart: yes" in text
