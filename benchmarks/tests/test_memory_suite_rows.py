"""The memory suite's result rows say which code produced them (benchmarks/memory_suite.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import torch

ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import memory_suite  # noqa: E402


def test_new_rows_record_the_checkout_and_old_rows_read_as_unknown(tmp_path: Path) -> None:
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    fresh = memory_suite.Result("t", "gtrxl", 0, 10, 1.0, 0.5, None, [(10, 0.5)])
    assert fresh.commit is not None and fresh.commit.startswith(head)
    row = asdict(fresh)
    old = {key: value for key, value in row.items() if key not in ("commit", "overrides")}
    out = tmp_path / "results.jsonl"
    out.write_text(json.dumps(old) + "\n" + json.dumps(row) + "\n")
    before, after = memory_suite._done(out)
    assert before.commit is None and before.overrides == []
    assert after.commit == fresh.commit and after.score == 0.5


def test_sb3_agents_are_scored_greedily_or_sampling_as_the_config_says() -> None:
    import gymnasium as gym
    import numpy as np
    from stable_baselines3 import PPO

    env = gym.make("CartPole-v1")
    model = PPO("MlpPolicy", env, seed=0, device="cpu")
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(256, 4)).astype(np.float32)
    starts = np.ones(256, dtype=bool)
    policy = memory_suite.sb3_eval_policy(model, env, env.observation_space)
    greedy, _ = model.predict(obs, deterministic=True)
    acted, _ = policy.act(obs, None, starts, deterministic=True)
    np.testing.assert_array_equal(acted, greedy)
    # An untrained policy is near uniform: sampling departs from the greedy action about half
    # the time over 256 states.
    sampled, _ = policy.act(obs, None, starts, deterministic=False)
    assert (sampled != greedy).sum() > 64
    env.close()


def test_report_shows_the_success_rate_only_where_every_seed_has_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = [
        memory_suite.Result("grid", "gtrxl", 0, 10, 1.0, 0.98, 1.0, [(10, 0.9)]),
        memory_suite.Result("grid", "gtrxl", 1, 10, 1.0, 0.49, 0.5, [(10, 0.5)]),
        memory_suite.Result("grid", "gru", 0, 10, 1.0, 0.49, None, [(10, 0.5)]),
    ]
    memory_suite.report(rows, plots=None)
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line}
    assert "75.0%" in lines["gtrxl"]
    assert "%" not in lines["gru"]


def test_sb3_setup_steps_envs_in_subprocesses_and_is_recorded(tmp_path: Path) -> None:
    """``--sb3-subprocess-envs`` gives SB3 one process per env, the rows say so, and a default
    setup adds nothing to a row (older rows and new default rows read the same)."""
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    cfg = memory_suite.task_config(memory_suite.TASKS["cartpole-novel"], 64, 0, tmp_path)
    for subprocess_envs, kind in ((False, DummyVecEnv), (True, SubprocVecEnv)):
        venv = memory_suite._sb3_env(cfg, 2, 0, False, False, subprocess_envs)
        try:
            assert isinstance(venv, kind)
            obs = venv.reset()
            assert obs.shape == (2, 2)  # CartPole without velocities: position and angle
        finally:
            venv.close()
    assert memory_suite.SB3Setup().describe() == {}
    assert memory_suite.SB3Setup(threads=2).describe() == {"threads": 2, "subprocess_envs": False}


def _row(task: str, env_steps: int, **fields: object) -> memory_suite.Result:
    return memory_suite.Result(task, "gtrxl", 0, env_steps, 1.0, 0.5, None, [], **fields)


def test_skip_key_holds_the_budget_and_rows_without_one_count_as_the_default(
    tmp_path: Path,
) -> None:
    """A 5M request never takes a 200k row for done, nor a 200k request a 5M row; a row from
    before budgets were recorded counts as its task's default budget when its env steps are
    that budget rounded up to whole rollouts, and as no budget otherwise."""
    cpu = ["run.device=cpu"]

    def request(budget: int, overrides: list[str] = cpu) -> tuple[object, ...]:
        return memory_suite.run_key("repeat-previous", "gtrxl", 0, budget, overrides)

    old = asdict(_row("repeat-previous", 200_704))
    for key in ("budget", "resumed", "timed_steps", "mmer", "overrides", "commit"):
        del old[key]
    quick = {**old, "env_steps": 2048}
    long = asdict(_row("repeat-previous", 5_000_192, budget=5_000_000, overrides=cpu))
    out = tmp_path / "results.jsonl"
    out.write_text("".join(json.dumps(row) + "\n" for row in (old, quick, long)))
    old_row, quick_row, long_row = memory_suite._done(out)
    assert memory_suite.row_budget(old_row) == 200_000
    assert memory_suite.row_budget(quick_row) is None
    done = {memory_suite.row_key(row) for row in (old_row, quick_row, long_row)}
    assert request(200_000) in done  # rows from before --device ran on CPU
    assert request(5_000_000) in done
    assert request(1_000_000) not in done
    assert request(2048) not in done  # a --quick row of unknown budget trains again
    assert request(200_000, [*cpu, "model.core.d_model=32"]) not in done
    assert request(200_000, ["run.device=cuda"]) not in done
    # A new 200k row and a 5M request, the other way round.
    short = _row("repeat-previous", 200_704, budget=200_000, overrides=cpu)
    assert memory_suite.row_key(short) == request(200_000) != request(5_000_000)


def test_run_names_are_deterministic_and_find_only_their_own_directory(tmp_path: Path) -> None:
    name = memory_suite.run_name("repeat-previous", "gtrxl", 1, 200_000, ["run.device=cpu"])
    assert name == memory_suite.run_name("repeat-previous", "gtrxl", 1, 200_000, [])
    others = [
        memory_suite.run_name("repeat-previous", "gtrxl", 1, 2_000_000, []),
        memory_suite.run_name("repeat-previous", "gtrxl", 2, 200_000, []),
        memory_suite.run_name("repeat-previous", "gru", 1, 200_000, []),
        memory_suite.run_name("repeat-previous", "gtrxl", 1, 200_000, ["run.device=cuda"]),
    ]
    assert len({name, *others}) == 5

    def run_dir(dir_name: str, *checkpoints: int) -> Path:
        path = tmp_path / dir_name / "checkpoints"
        path.mkdir(parents=True)
        for step in checkpoints:
            (path / f"ckpt_{step:09d}.pt").write_bytes(b"")
        return path.parent

    assert memory_suite.resumable_run(tmp_path / "missing", name) is None
    run_dir(f"{name}-20260101-000000")  # killed before its first checkpoint
    run_dir(f"{others[0]}-20260101-000000", 4096)  # another budget
    assert memory_suite.resumable_run(tmp_path, name) is None
    run_dir(f"{name}-20260101-000100", 1024)
    best = run_dir(f"{name}-20260101-000100-2", 1024, 2048)
    assert memory_suite.resumable_run(tmp_path, name) == best
    (run_dir(f"{name}-20260101-000200", 4096) / "eval.json").write_text("{}")  # finished
    assert memory_suite.resumable_run(tmp_path, name) == best


class _Killed(Exception):
    pass


def _kill_after(cfg: Any, iterations: int) -> None:
    """Trains ``cfg`` with a checkpoint every iteration and kills it after ``iterations``."""
    from rlformer.runs.training import train

    cfg.run.checkpoint_every = 1

    def kill(iteration: int, metrics: dict[str, float]) -> None:
        if iteration == iterations:
            raise _Killed

    with pytest.raises(_Killed):
        train(cfg, on_iteration=kill)


@pytest.mark.parametrize("killed_after", [2, 5])
def test_suite_resumes_a_killed_run_to_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, killed_after: int
) -> None:
    """A run killed after iteration 2 (of 5) continues from its checkpoint in the same run
    directory, and its steps/s count the iterations trained after the resume; one killed after
    its last iteration (before the final evaluation) trains nothing more and is timed from
    the iteration times in its metrics."""
    from tests.reliability.tiny import TINY_OVERRIDES

    config = tmp_path / "tiny.yaml"
    config.write_text("algo: ppo\n")
    monkeypatch.setitem(
        memory_suite.TASKS, "tiny", memory_suite.Task(str(config), 320, TINY_OVERRIDES)
    )
    root, overrides = tmp_path / "runs", ["run.device=cpu"]
    cfg = memory_suite.rlformer_config("tiny", "gtrxl", 320, 0, 2, root, overrides)
    _kill_after(cfg, killed_after)
    result = memory_suite.run_rlformer("tiny", "gtrxl", 320, 0, 2, root, overrides)
    assert len(list(root.iterdir())) == 1  # the same run directory, continued
    assert result.resumed and result.budget == 320 and result.env_steps == 320
    assert result.timed_steps == 320 - 64 * killed_after if killed_after < 5 else 320
    assert result.seconds > 0
    assert [step for step, _ in result.curve] == [64, 128, 192, 256, 320]
    assert result.mmer == max(value for _, value in result.curve)


def test_mmer_is_the_best_point_of_the_learning_curve(capsys: pytest.CaptureFixture[str]) -> None:
    curve = [(1024, -0.4), (2048, 0.7), (3072, 0.2)]
    assert memory_suite.mmer(curve) == 0.7
    assert memory_suite.mmer([]) is None
    row = memory_suite.Result("grid", "gtrxl", 0, 3072, 1.0, 0.1, None, curve)
    assert row.mmer == 0.7 and asdict(row)["mmer"] == 0.7
    # Rows read back keep theirs; rows written before MMER get it from their curve.
    assert memory_suite.Result(**{**asdict(row), "mmer": 0.9}).mmer == 0.9
    other = memory_suite.Result("grid", "gtrxl", 1, 3072, 1.0, 0.1, None, [(3072, 0.3)])
    memory_suite.report([row, other], plots=None)
    line = next(line for line in capsys.readouterr().out.splitlines() if "gtrxl" in line)
    assert "0.500" in line  # the mean over seeds of 0.7 and 0.3


def test_each_budget_draws_its_own_png_whichever_budgets_a_report_shows(tmp_path: Path) -> None:
    default = memory_suite.TASKS["count-recall"].steps
    short = memory_suite.Result("count-recall", "gtrxl", 0, default, 1.0, -0.8, None, [(8, -0.9)])
    short.budget = default
    long = memory_suite.Result("count-recall", "gtrxl", 0, 5_000_000, 1.0, -0.4, None, [(8, -0.5)])
    long.budget = 5_000_000
    memory_suite.report([long], plots=tmp_path)  # a `--steps 5000000` report alone
    assert sorted(p.name for p in tmp_path.iterdir()) == ["count-recall-5000000.png"]
    memory_suite.report([short, long], plots=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "count-recall-5000000.png",
        "count-recall.png",
    ]


def test_a_report_keeps_variants_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Rows of the default run and of a --set variant in one --out: a line and a PNG each."""

    def row(seed: int, score: float, overrides: list[str]) -> memory_suite.Result:
        result = memory_suite.Result(
            "count-recall", "gtrxl", seed, 64, 1.0, score, None, [(64, score)]
        )
        result.budget, result.overrides = 64, ["run.device=cpu", *overrides]
        return result

    lever = ["model.core.memory_length=128"]
    rows = [row(0, -0.5, []), row(0, 0.5, lever), row(1, -0.5, []), row(1, 0.5, lever)]
    memory_suite.report(rows, plots=tmp_path)
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    scores = [float(line[2]) for line in lines if line[:1] == ["gtrxl"]]
    assert scores == [-0.5, 0.5]  # two seeds each, never averaged together
    assert ["with", "--set", *lever] == next(line[-3:] for line in lines if "with" in line)
    digest = memory_suite.variant_digest(lever)
    assert {p.name for p in tmp_path.iterdir()} == {
        "count-recall-64.png",
        f"count-recall-64-{digest}.png",
    }


def test_settings_tell_a_changed_preset_from_the_recorded_one(tmp_path: Path) -> None:
    """Rows record what the run trained with, so a preset or default changed since (which no
    override shows) is trained again; naming and pacing keys do not count, nor keys added since."""
    planned = memory_suite.settings(
        memory_suite.rlformer_config("count-recall", "gtrxl", 5_000_000, 0, 100, tmp_path)
    )
    assert planned["ppo.learning_rate"] == 0.0005 and planned["model.torso"] == "gtrxl"
    assert not memory_suite.UNSCORED_SETTINGS & planned.keys()
    other_seed = memory_suite.settings(
        memory_suite.rlformer_config("count-recall", "gtrxl", 200_000, 2, 10, tmp_path / "x")
    )
    assert other_seed == planned
    assert memory_suite.same_settings(None, planned)  # rows from before settings were recorded
    assert memory_suite.same_settings(dict(planned), planned)
    older = {key: value for key, value in planned.items() if key != "ppo.target_kl"}
    assert memory_suite.same_settings(older, planned)  # a key added since
    assert not memory_suite.same_settings({**planned, "ppo.learning_rate": 0.001}, planned)
    row = asdict(_row("count-recall", 5_000_192, budget=5_000_000))
    row["settings"] = planned
    out = tmp_path / "results.jsonl"
    out.write_text(json.dumps(row) + "\n")
    (read,) = memory_suite._done(out)
    assert memory_suite.same_settings(read.settings, planned)


def test_a_killed_run_of_a_changed_preset_trains_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.reliability.tiny import TINY_OVERRIDES

    config = tmp_path / "tiny.yaml"
    config.write_text("algo: ppo\n")
    monkeypatch.setitem(
        memory_suite.TASKS, "tiny", memory_suite.Task(str(config), 192, TINY_OVERRIDES)
    )
    root = tmp_path / "runs"
    cfg = memory_suite.rlformer_config("tiny", "gtrxl", 192, 0, 2, root)
    _kill_after(cfg, 1)
    changed = [*TINY_OVERRIDES, "ppo.learning_rate=0.00123"]
    monkeypatch.setitem(memory_suite.TASKS, "tiny", memory_suite.Task(str(config), 192, changed))
    result = memory_suite.run_rlformer("tiny", "gtrxl", 192, 0, 2, root)
    assert len(list(root.iterdir())) == 2  # the killed run is left as it was
    assert not result.resumed and result.timed_steps is None
    assert result.settings is not None and result.settings["ppo.learning_rate"] == 0.00123


def _tiny_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, steps: int) -> list[str]:
    """Registers the suite task ``tiny`` and returns a suite command line for it under tmp_path."""
    from tests.reliability.tiny import TINY_OVERRIDES

    config = tmp_path / "tiny.yaml"
    config.write_text("algo: ppo\n")
    monkeypatch.setitem(
        memory_suite.TASKS, "tiny", memory_suite.Task(str(config), steps, TINY_OVERRIDES)
    )
    return [
        "memory_suite.py",
        *("--tasks", "tiny", "--agents", "gtrxl", "--steps", str(steps), "--episodes", "2"),
        *("--out", str(tmp_path / "rows.jsonl"), "--root", str(tmp_path / "runs")),
        *("--plots", str(tmp_path / "plots")),
    ]


def test_side_by_side_suites_skip_the_runs_another_process_trains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [*_tiny_task(tmp_path, monkeypatch, 128), "--seeds", "2"]
    root = tmp_path / "runs"
    seed0 = memory_suite.run_name("tiny", "gtrxl", 0, 128, ["run.device=cpu"])
    with memory_suite.claim(root, seed0) as mine:  # as a second suite process would hold it
        assert mine
        with memory_suite.claim(root, seed0) as again:
            assert not again
        monkeypatch.setattr(sys, "argv", argv)
        memory_suite.main()
    assert "tiny gtrxl seed 0: another process is training it; skipped" in capsys.readouterr().out
    rows = memory_suite._done(tmp_path / "rows.jsonl")
    assert [row.seed for row in rows] == [1]
    # Released with the block: the next suite trains seed 0 and leaves seed 1 alone.
    memory_suite.main()
    assert sorted(row.seed for row in memory_suite._done(tmp_path / "rows.jsonl")) == [0, 1]


def test_a_suite_skips_a_run_directory_another_process_is_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run directory locked by its trainer (here: a suite started before claims existed)."""
    from rlformer.runs.directory import RunLock

    argv = [*_tiny_task(tmp_path, monkeypatch, 192), "--seeds", "1"]
    root = tmp_path / "runs"
    cfg = memory_suite.rlformer_config("tiny", "gtrxl", 192, 0, 2, root, ["run.device=cpu"])
    _kill_after(cfg, 1)
    (run_dir,) = root.glob("tiny-*")
    monkeypatch.setattr(sys, "argv", argv)
    with RunLock(run_dir):
        memory_suite.main()
    assert "another process is training it; skipped" in capsys.readouterr().out
    assert not (tmp_path / "rows.jsonl").exists()
    memory_suite.main()  # the trainer gone, the run is resumed
    (row,) = memory_suite._done(tmp_path / "rows.jsonl")
    assert row.resumed and row.env_steps == 192


@pytest.mark.parametrize("normalize_obs", [False, True])
def test_a_killed_sb3_run_resumes_from_its_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, normalize_obs: bool
) -> None:
    """RecurrentPPO (64 env steps a rollout) killed after its second checkpoint continues from
    it: same run, its curve kept, its budget reached, only the part after the resume timed; the
    finished run deletes its checkpoint."""
    _tiny_task(tmp_path, monkeypatch, 320)
    if normalize_obs:  # rewards are normalised either way, by default
        task = memory_suite.TASKS["tiny"]
        extra = ["model.normalize_obs=true"]
        monkeypatch.setitem(
            memory_suite.TASKS,
            "tiny",
            memory_suite.Task(task.config, 320, [*task.overrides, *extra]),
        )
    monkeypatch.setattr(memory_suite, "CHECKPOINT_STEPS", 64)
    root = tmp_path / "runs"
    save = memory_suite.SB3Checkpoint.save
    saved: list[dict[str, Any]] = []

    def save_then_die(self: Any, model: Any, curve: list[tuple[int, float]]) -> None:
        save(self, model, curve)
        state = torch.load(self.folder / self.FILE, weights_only=True)
        saved.append(state)
        if len(saved) == 2:
            raise _Killed

    with monkeypatch.context() as patch:
        patch.setattr(memory_suite.SB3Checkpoint, "save", save_then_die)
        with pytest.raises(_Killed):
            memory_suite.run_sb3("tiny", "recurrent_ppo", 320, 0, 2, root)
    killed_at = saved[-1]["num_timesteps"]
    assert killed_at == 128
    # Saved after the update on the rollout that ended there: 2 epochs x 2 minibatches each.
    adam_steps = {int(param["step"]) for param in saved[-1]["optimizer"]["state"].values()}
    assert adam_steps == {2 * 2 * killed_at // 64}
    assert ("obs_rms" in saved[-1]) == normalize_obs and "ret_rms" in saved[-1]
    restore = memory_suite.SB3Checkpoint.restore
    restored: list[bool] = []

    def restore_and_compare(self: Any, model: Any, state: dict[str, Any]) -> Any:
        curve = restore(self, model, state)
        weights = model.policy.state_dict()
        assert all(torch.equal(weights[k], v) for k, v in state["policy"].items())
        assert model.num_timesteps == killed_at
        env = model.get_env()
        for name in ("obs_rms", "ret_rms") if normalize_obs else ("ret_rms",):
            assert torch.equal(torch.as_tensor(vars(env)[name].var), state[name]["var"])
        restored.append(True)
        return curve

    monkeypatch.setattr(memory_suite.SB3Checkpoint, "restore", restore_and_compare)
    result = memory_suite.run_sb3("tiny", "recurrent_ppo", 320, 0, 2, root)
    assert restored == [True]
    assert result.resumed and result.env_steps == 320 and result.timed_steps == 320 - killed_at
    assert [step for step, _ in result.curve] == [64, 128, 192, 256, 320]
    assert result.curve[:2] == [tuple(point) for point in saved[-1]["curve"]]
    assert not list(root.rglob(memory_suite.SB3Checkpoint.FILE))


def test_an_sb3_checkpoint_of_other_settings_is_not_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tiny_task(tmp_path, monkeypatch, 128)
    name = memory_suite.sb3_run_name(
        "tiny", "recurrent_ppo", 0, 128, "cpu", memory_suite.SB3Setup()
    )
    folder = tmp_path / "runs" / name
    memory_suite.SB3Checkpoint(folder, {"learning_rate": 1.0}).save(_FakeModel(), [(64, 0.5)])
    result = memory_suite.run_sb3("tiny", "recurrent_ppo", 128, 0, 2, tmp_path / "runs")
    assert not result.resumed and result.timed_steps is None and result.env_steps == 128


class _FakeModel:
    """What SB3Checkpoint.save reads from a model."""

    num_timesteps = 64

    def __init__(self) -> None:
        self.policy = torch.nn.Linear(2, 2)
        self.policy.optimizer = torch.optim.Adam(self.policy.parameters())  # type: ignore[assignment]

    def get_vec_normalize_env(self) -> None:
        return None


def test_a_run_another_suite_finished_after_this_one_started_is_not_trained_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows read at the start miss one another process appended since: the suite reads the
    rows again once it holds the run's claim."""
    argv = [*_tiny_task(tmp_path, monkeypatch, 64), "--seeds", "1"]
    monkeypatch.setattr(sys, "argv", argv)
    memory_suite.main()
    out, root = tmp_path / "rows.jsonl", tmp_path / "runs"
    assert len(memory_suite._done(out)) == 1 and len(list(root.glob("tiny-*"))) == 1
    read = memory_suite._done
    calls = []

    def first_read_misses_the_row(path: Path) -> list[memory_suite.Result]:
        calls.append(path)
        return [] if len(calls) == 1 else read(path)

    monkeypatch.setattr(memory_suite, "_done", first_read_misses_the_row)
    memory_suite.main()
    assert len(calls) >= 2 and len(read(out)) == 1
    assert len(list(root.glob("tiny-*"))) == 1  # no second run directory


def test_rows_read_while_another_process_appends_skip_the_unfinished_last_line(
    tmp_path: Path,
) -> None:
    row = asdict(memory_suite.Result("tiny", "gtrxl", 0, 64, 1.0, 0.5, None, [(64, 0.5)]))
    out = tmp_path / "rows.jsonl"
    whole = json.dumps(row) + "\n"
    out.write_text(whole + whole[:40])
    assert [r.seed for r in memory_suite._done(out)] == [0]
    out.write_text(whole[:40] + "\n" + whole)
    with pytest.raises(json.JSONDecodeError):  # a broken line before the last is an error
        memory_suite._done(out)
