"""The default suite's runner: the env id alone, a row per finished run, a killed run continued."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import default_suite  # noqa: E402
from default_suite import SUITES, Task, command, run_one  # noqa: E402


def test_the_suites_name_every_task_once_with_only_env_keys() -> None:
    tasks = {name: task for suite in SUITES.values() for name, task in suite.items()}
    assert len([n for n in tasks if n.startswith("popgym-")]) == 14
    assert len([n for n in tasks if n.startswith("minatar-")]) == 5
    for task in tasks.values():
        assert all(key.startswith(("env.imports=", "env.kwargs.")) for key in task.keys)
    items = command(tasks["minatar-Breakout"], 1, Path("r"), "x")
    assert items[:3] == [
        "env.id=MinAtar/Breakout-v1",
        "env.imports=[minatar.gym:register_envs]",
        "env.kwargs.use_minimal_action_set=false",
    ]


def test_a_run_continues_from_its_checkpoint_and_gives_one_row(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(default_suite, "EVAL_EPISODES", 2)
    task = Task("CartPole-v1", 2048)
    first = run_one("CartPole", task, 0, tmp_path)
    (run,) = tmp_path.glob("CartPole-s0-*")
    assert first.eval_return > 0 and first.command.startswith("rlformer train --set env.id=")
    (run / "eval.json").unlink()  # as if killed before the final evaluation
    again = run_one("CartPole", task, 0, tmp_path)
    assert list(tmp_path.glob("CartPole-s0-*")) == [run]  # continued, not started afresh
    assert again.eval_return == first.eval_return
    assert json.loads((run / "eval.json").read_text())["episodes"] == 2


def test_random_play_scores_each_task_once(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(default_suite, "EVAL_EPISODES", 5)
    monkeypatch.setitem(default_suite.TASKS, "CartPole", Task("CartPole-v1", 100))
    out = tmp_path / "random_play.jsonl"
    default_suite.random_play(["CartPole"], out)
    default_suite.random_play(["CartPole"], out)  # already played: no second row
    (row,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert row["task"] == "CartPole" and row["episodes"] == 5
    assert 8 < row["return_mean"] < 60  # uniform actions keep CartPole up for ~22 steps


def test_popgym_aggregate_rescales_random_play_to_0_and_the_best_return_to_1() -> None:
    rows = [
        {"task": "popgym-A", "eval_return": 1.0},
        {"task": "popgym-A", "eval_return": 0.0},
        {"task": "popgym-B", "eval_return": -0.5},
        {"task": "CartPole", "eval_return": 500.0},  # not POPGym: left out
    ]
    floors = {"popgym-A": 0.0, "popgym-B": -0.5, "CartPole": 22.0}
    mean, low, high = default_suite.popgym_aggregate(rows, floors)
    assert mean == 0.25  # A: (1 + 0) / 2 = 0.5, B: 0 (its random play); mean over tasks
    assert low == 0.0 and high == 0.5  # A's resamples: 0, 0.5 or 1 -> aggregate 0, 0.25, 0.5


def test_the_aggregate_gets_a_ci_only_once_every_task_has_two_seeds(tmp_path: Path, capsys) -> None:
    out, random_out = tmp_path / "rows.jsonl", tmp_path / "random_play.jsonl"
    random_out.write_text(
        "".join(
            json.dumps({"task": t, "return_mean": 0.0}) + "\n" for t in ("popgym-A", "popgym-B")
        )
    )

    def write(*runs: tuple[str, int, float]) -> str:
        rows = [{"task": t, "seed": s, "steps": 10, "eval_return": r} for t, s, r in runs]
        out.write_text("".join(json.dumps(row) + "\n" for row in rows))
        default_suite.report(out, random_out)
        printed = capsys.readouterr().out.splitlines()
        return next(line for line in printed if line.startswith("POPGym aggregate"))

    # A's two seeds alone would give an interval narrower than the tasks' spread: no CI.
    one_seed = write(("popgym-A", 0, 1.0), ("popgym-A", 1, 0.0), ("popgym-B", 0, 0.5))
    assert one_seed == "POPGym aggregate over 2 tasks: 0.500 (no CI: one seed on 1 of 2 tasks)"
    both = write(
        *[("popgym-A", s, 1.0 - s) for s in (0, 1)], ("popgym-B", 0, 0.5), ("popgym-B", 1, 0.5)
    )
    assert both == "POPGym aggregate over 2 tasks: 0.500 [0.250, 0.750]"


def test_an_agent_adds_its_keys_to_the_env_id_alone_and_runs_under_its_own_name(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(default_suite, "EVAL_EPISODES", 2)
    task = Task("CartPole-v1", 1024)
    items = command(task, 0, tmp_path, "x", "gru")
    assert items[:3] == ["env.id=CartPole-v1", "ppo.total_steps=1024", "model.torso=gru"]
    row = run_one("CartPole", task, 0, tmp_path, "gru")
    (run,) = tmp_path.glob("CartPole-gru-s0-*")
    assert row.agent == "gru" and row.command.endswith("--set model.torso=gru")
    assert "torso: gru" in (run / "config.yaml").read_text()


def test_a_task_config_agent_trains_the_task_s_config_at_the_suite_s_budget(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(default_suite, "EVAL_EPISODES", 2)
    config = "configs/memory/popgym_count_recall_constant_lr.yaml"  # its own budget is 5M
    monkeypatch.setitem(default_suite.TASK_CONFIGS, "popgym-CountRecall", config)
    task = Task("popgym-CountRecallEasy-v0", 512, ("env.imports=[popgym]",))
    row = run_one("popgym-CountRecall", task, 0, tmp_path, "task-config-gru")
    (run,) = tmp_path.glob("popgym-CountRecall-task-config-gru-s0-*")
    saved = (run / "config.yaml").read_text()
    assert "total_steps: 512" in saved and "anneal_lr: false" in saved and "torso: gru" in saved
    assert row.command.startswith(f"rlformer train {config} --set env.id=")
    assert row.agent == "task-config-gru" and row.steps == 512


def _rows(task: str, agent: str, returns: list[float]) -> list[dict]:
    return [
        {"task": task, "agent": agent, "seed": seed, "eval_return": value}
        for seed, value in enumerate(returns)
    ]


def test_the_ceiling_is_the_best_other_agent_and_the_default_is_compared_on_its_seeds() -> None:
    rows = [
        *_rows("popgym-A", "default", [0.9, 0.5, 0.1]),
        *_rows("popgym-A", "gru", [0.8, 0.6]),  # ceiling 0.7 over seeds 0-1
        *_rows("popgym-A", "task-config", [0.2, 0.2, 0.2]),
        *_rows("popgym-B", "default", [0.5]),
        *_rows("popgym-B", "gru", [0.02]),  # within 0.05 of random play: apart
        *_rows("popgym-C", "default", [0.3]),  # no other agent: apart
    ]
    floors = {"popgym-A": -0.5, "popgym-B": 0.0, "popgym-C": 0.0}
    a, b, c = default_suite.ceiling_verdicts(rows, floors)
    assert (a["by"], a["seeds"], a["counted"]) == ("gru", [0, 1], True)
    assert a["ceiling"] == 0.7 and a["default"] == 0.7  # the default's seeds 0-1 only
    assert a["normalised"] == 1.0 and a["within"]
    assert (b["counted"], c["counted"], c["ceiling"]) == (False, False, None)
    behind = default_suite.ceiling_verdicts(
        [*_rows("popgym-A", "default", [0.4]), *_rows("popgym-A", "gru", [1.0])], floors
    )[0]
    assert behind["normalised"] == 0.6 and not behind["within"]  # (0.4 + 0.5) / (1 + 0.5)


def test_a_run_another_job_holds_is_skipped_and_the_rest_go_on(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    from rlformer.runs.directory import RunLock

    monkeypatch.setattr(default_suite, "EVAL_EPISODES", 2)
    monkeypatch.setitem(default_suite.SUITES, "classic", {"CartPole": Task("CartPole-v1", 1024)})
    out, root = tmp_path / "rows.jsonl", tmp_path / "runs"
    run_one("CartPole", Task("CartPole-v1", 1024), 0, root)
    (held,) = root.glob("CartPole-s0-*")
    (held / "eval.json").unlink()  # unfinished, and another job is on it
    argv = ["default_suite.py", "--suites", "classic", "--seeds", "0", "1"]
    monkeypatch.setattr(sys, "argv", [*argv, "--out", str(out), "--root", str(root)])
    with RunLock(held):
        default_suite.main()
    printed = capsys.readouterr().out
    assert "CartPole default seed 0: skipped" in printed and "is in use by process" in printed
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(r["task"], r["seed"]) for r in rows] == [("CartPole", 1)]


def test_the_torso_comparison_uses_the_seeds_both_agents_ran() -> None:
    rows = [
        *_rows("popgym-A", "default", [0.9, 0.1, 0.5]),
        *_rows("popgym-A", "gru", [0.4]),  # seed 0 only: the default's 0.9 against it
        *_rows("popgym-B", "default", [0.2]),  # no GRU run: not compared
    ]
    assert default_suite.against(rows, "gru") == {"popgym-A": (0.9, 0.4, [0])}


def test_recurrent_ppo_rows_of_the_memory_suite_are_ceiling_candidates_at_the_budget(
    tmp_path: Path,
) -> None:
    """Matched by the env id the memory suite's config makes; other budgets, variants and
    agents are left out."""

    def result(task: str, agent: str, budget: int, score: float, **extra: object) -> str:
        row = {"task": task, "agent": agent, "seed": 0, "env_steps": budget + 480}
        row |= {"seconds": 1.0, "score": score, "success_rate": None, "curve": []}
        return json.dumps({**row, "budget": budget, **extra})

    peers = tmp_path / "results.jsonl"
    lines = [
        result("count-recall", "recurrent_ppo", 1_000_000, -0.2),
        result("count-recall", "recurrent_ppo", 200_000, 0.9),  # another budget
        result("count-recall", "gtrxl", 1_000_000, 0.9),  # not a peer
        result("count-recall", "recurrent_ppo", 1_000_000, 0.9, overrides=["x=1"]),  # a variant
        result("noisy-position-only-pendulum", "recurrent_ppo", 1_000_000, 0.8),
    ]
    peers.write_text("\n".join(lines) + "\n")
    rows = default_suite.peer_rows(peers)
    assert sorted((r["task"], r["agent"], r["eval_return"]) for r in rows) == [
        ("popgym-CountRecall", "recurrent-ppo", -0.2),
        ("popgym-NoisyPositionOnlyPendulum", "recurrent-ppo", 0.8),
    ]
    default = {"task": "popgym-CountRecall", "agent": "default", "seed": 0, "eval_return": -0.3}
    (verdict,) = default_suite.ceiling_verdicts([default, *rows], {"popgym-CountRecall": -0.5})
    assert verdict["by"] == "recurrent-ppo" and verdict["ceiling"] == -0.2
    assert abs(verdict["normalised"] - 2 / 3) < 1e-9 and not verdict["within"]


def test_minatar_games_are_judged_on_every_seed_s_training_return_against_dqn(capsys) -> None:
    def row(task: str, seed: int, train: float) -> dict:
        return {"task": task, "seed": seed, "train_return": train, "eval_return": train - 1}

    dqn = {t: v[0] for t, v in default_suite.MINATAR_PUBLISHED.items()}
    rows = [
        row("minatar-Breakout", 0, dqn["minatar-Breakout"] + 1),
        row("minatar-Breakout", 1, dqn["minatar-Breakout"] + 2),
        row("minatar-Freeway", 0, dqn["minatar-Freeway"] + 1),
        row("minatar-Freeway", 1, dqn["minatar-Freeway"] - 1),  # one seed below: not counted
        {**row("minatar-Asterix", 0, 99.0), "agent": "gru"},  # not the default: not reported
    ]
    floors = {"minatar-Breakout": 0.5, "minatar-Freeway": 0.2}
    default_suite.report_minatar(rows, floors)
    out = capsys.readouterr().out
    assert "minatar-Asterix" not in out
    breakout = (dqn["minatar-Breakout"] + 1.5 - 0.5) / (14.2 - 0.5)  # AC(0.8) is its ceiling
    assert f"| {breakout:.2f} | behind |" in out
    assert "every seed's training return above DQN at 2M on 1 of 2 games" in out


def test_sb3_ppo_rows_of_the_defaults_benchmark_are_ceiling_candidates_at_the_budget(
    tmp_path: Path,
) -> None:
    """Matched by env id; rows at another budget and rlformer's own agents are left out. A row
    written without its budget counts as the defaults benchmark's budget for that task."""

    def result(task: str, agent: str, score: float, budget: int | None) -> str:
        row = {"task": task, "agent": agent, "seed": 0, "env_steps": 1_000_448, "seconds": 1.0}
        row |= {"score": score, "success_rate": None, "curve": []}
        return json.dumps(row if budget is None else {**row, "budget": budget})

    out = tmp_path / "results.jsonl"
    lines = [
        result("lunarlander", "sb3_ppo_zoo", 250.0, 1_000_000),
        result("lunarlander", "sb3_ppo", 114.0, None),  # the benchmark's own 500k budget
        result("lunarlander", "rlformer", 270.0, 1_000_000),  # not SB3
        result("cartpole", "sb3_ppo", 500.0, None),  # 100k, the suite's CartPole budget
    ]
    out.write_text("\n".join(lines) + "\n")
    rows = default_suite.sb3_rows(out)
    assert sorted((r["task"], r["agent"], r["eval_return"]) for r in rows) == [
        ("CartPole", "sb3-ppo", 500.0),
        ("LunarLander", "sb3-ppo-zoo", 250.0),
    ]


def test_a_published_score_is_a_ceiling_candidate_against_every_seed_of_the_default() -> None:
    rows = [
        *_rows("Hopper", "default", [3000.0, 1000.0, 2000.0]),
        *_rows("Hopper", "sb3-ppo-zoo", [1000.0, 100.0]),
        *_rows("LunarLander", "default", [250.0]),
        *_rows("LunarLander", "sb3-ppo-zoo", [260.0]),
    ]
    floors = {"Hopper": 0.0, "LunarLander": -190.0}
    published = {"Hopper": (2500.0, "paper"), "LunarLander": (240.0, "paper")}
    hopper, lander = default_suite.ceiling_verdicts(rows, floors, published)
    assert (hopper["by"], hopper["ceiling"], hopper["seeds"]) == ("paper", 2500.0, [])
    assert hopper["default"] == 2000.0 and hopper["normalised"] == 0.8  # all three seeds
    assert (lander["by"], lander["ceiling"]) == ("sb3-ppo-zoo", 260.0)  # above the paper's
