"""The multi-agent benchmark's settings and its reading of both libraries' rows: every task and
variant is a config the CLI accepts, BenchMARL's rows are read in env steps, the equal-step
windows average what they should, and the throughput record prints as the page's table."""

from __future__ import annotations

import pytest
from script_loader import load_script

from rlformer.config import load_config


def test_every_task_and_variant_is_a_valid_config_with_its_budget() -> None:
    script = load_script("multiagent")
    for task, (factory, kwargs, budget) in script.TASKS.items():
        for variant in script.VARIANTS:
            cfg = load_config(None, script.sets(task, variant, 3, None))
            assert cfg.algo == "mappo" and cfg.run.seed == 3
            assert cfg.mappo.env == factory and cfg.mappo.env_kwargs == kwargs
            assert cfg.mappo.total_steps == budget
        torso = load_config(None, script.sets(task, "gru", 0, 5000))
        assert torso.model.torso == "gru" and torso.mappo.total_steps == 5000
    ippo = load_config(None, script.sets("relay", "ippo", 0, None))
    assert ippo.mappo.critic == "independent"


def test_the_peer_row_is_read_in_env_steps() -> None:
    script = load_script("multiagent")
    row = {
        "task": "simple_spread",
        "frames": 12_000,
        "eval_per_agent_mean_return": -80.5,
        "curve": [{"frames": 6_000, "episode_reward_mean": -120.0},
                  {"frames": 12_000, "episode_reward_mean": -100.0}],
    }  # fmt: skip
    read = script.peer_row(row)
    assert read["steps"] == 12_000 and read["eval_return"] == -80.5
    assert read["curve"] == [(6_000, -120.0), (12_000, -100.0)]
    assert script.peer_row({"frames": 1})["curve"] == []


def test_equal_step_windows_average_the_points_up_to_the_mark() -> None:
    script = load_script("multiagent")
    points = [(40_000, -9.0), (60_000, -3.0), (90_000, -1.0), (100_000, 1.0), (110_000, 50.0)]
    assert script.at_steps(points, 100_000) == pytest.approx((-3.0 - 1.0 + 1.0) / 3)
    assert script.at_steps(points, 100_000, width=15_000) == pytest.approx(0.0)
    assert script.at_steps(points, 20_000) is None


def test_the_throughput_record_prints_rows_and_ratios(capsys: pytest.CaptureFixture) -> None:
    script = load_script("multiagent")
    record = {
        "steps": 12_000,
        "commit": "0123456789abcdef",
        "load_average": {"before": 0.5, "after": 1.25},
        "results": {
            "rlformer gtrxl, 10 envs": {"steps_per_s": 300.0, "cpu_steps_per_s": 310.0,
                                        "ratio_wall": 2.0, "ratio_cpu": 2.07},
            "benchmarl mlp": {"steps_per_s": 150.0, "cpu_steps_per_s": 150.0},
        },
    }  # fmt: skip
    script.throughput_table(record)
    out = capsys.readouterr().out
    assert "12,000 steps, commit 0123456, load average 0.50 before and 1.25 after" in out
    assert "| rlformer gtrxl, 10 envs | 300 | 310 | 2.00x / 2.07x |" in out
    assert "| benchmarl mlp | 150 | 150 | 1 |" in out
