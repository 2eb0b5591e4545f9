"""Fuzzing the command line: random argument lists over the real commands and options.

Arguments are drawn from a vocabulary of the real commands, their options, plausible values
(a real run, a real dataset, small numbers) and junk, and run through ``rlformer.cli.app``
in-process. Every list must end with exit code 0 or 2, no traceback in the output and no
exception escaping. Nothing long may start: ``train`` always gets ``--dry-run``, ``collect`` a
few ``--steps``, ``eval`` one episode, and every output path points into a temp folder (the
options appended last win).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from rlformer.cli import app
from rlformer.config import load_config
from tests.reliability.fuzzing import FUZZ, check_cli_result, outcome, tried, working_directory


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Real things for arguments to name: a tiny run, a dataset, suites, junk files."""
    from rlformer.data.recorder import collect_dataset
    from rlformer.runs.training import train

    tmp = tmp_path_factory.mktemp("world")
    cfg = load_config(
        None,
        [
            f"run.root={tmp / 'runs'}",
            "run.progress=false",
            "model.torso=mlp",
            "model.mlp_hidden=[8]",
            "rollout.envs_per_worker=2",
            "rollout.fragment_length=8",
            "ppo.total_steps=16",
            "ppo.num_minibatches=1",
            "ppo.update_epochs=1",
            "eval.episodes=0",
        ],
    )
    run_dir = train(cfg).run_dir
    dataset = tmp / "cartpole.hdf5"
    collect_dataset("random", "CartPole-v1", 64, dataset, num_envs=2)
    suite = tmp / "suite.yaml"
    suite.write_text(
        "name: tiny\nepisodes: 1\nseeds: 1\ntasks:\n"
        "  - {env: CartPole-v1, label: cp}\n  - {env: Pendulum-v1, label: pend}\n"
    )
    junk = tmp / "junk.bin"
    junk.write_bytes(b"\x00\xffjunk" * 10)
    config = tmp / "config.yaml"
    config.write_text("model: {torso: mlp, mlp_hidden: [8]}\nrollout: {envs_per_worker: 2}\n")
    return {
        "tmp": str(tmp),
        "run": str(run_dir),
        "ckpt": str(next((run_dir / "checkpoints").glob("ckpt_*.pt"))),
        "dataset": str(dataset),
        "suite": str(suite),
        "junk": str(junk),
        "config": str(config),
        "missing": str(tmp / "missing"),
        "empty_dir": str(tmp_path_factory.mktemp("empty")),
    }


# Values: a placeholder in braces names an entry of ``world``.
PATHS = [
    "{run}",
    "{ckpt}",
    "{dataset}",
    "{suite}",
    "{junk}",
    "{config}",
    "{missing}",
    "{empty_dir}",
]
NUMBERS = ["0", "1", "2", "3", "-1", "1.5", "abc", "", "1e3", "nan"]
ENVS = ["CartPole-v1", "Pendulum-v1", "rlformer/TMaze-v0", "NoSuchEnv-v0", ""]
SETS = ["ppo.learning_rate=1e-3", "model.torso=mlp", "env.id=Pendulum-v1", "bogus=1", "x", "a.b="]
OPTIONS: dict[str, dict[str, list[str] | None]] = {
    # option -> its values (None: a flag)
    "train": {
        "--set": SETS, "--resume": PATHS, "--trust-checkpoint": None, "--dry-run": None,
    },
    "eval": {
        "--env": ENVS, "--suite": PATHS, "--episodes": NUMBERS, "--seeds": NUMBERS,
        "--num-envs": NUMBERS, "--stochastic": None, "--target-return": ["100", "0:10:3",
        "-5,5", "1:2", "x"], "--json": ["{tmp}/e.json", "{empty_dir}"], "--csv":
        ["{tmp}/e.csv"], "--plot": ["{tmp}/p.png"], "--trust-checkpoint": None,
    },
    "plot": {"--metric": ["rollout/return_mean", "loss/policy", "nope"], "--smooth": NUMBERS},
    "collect": {
        "--policy": ["random", "{run}", "{ckpt}", "sb3:{junk}", "{missing}", "{dataset}"],
        "--env": ENVS, "--seed": NUMBERS, "--num-envs": ["1", "2", "0", "-1", "x"],
        "--noise": NUMBERS, "--random-fraction": ["0", "0.5", "1", "2", "-1"],
        "--stochastic": None, "--trust-checkpoint": None, "--config": PATHS, "--set": SETS,
    },
    "dataset info": {},
    "config-doc": {},
    "export": {"--format": ["onnx", "torch-export", "tflite", ""], "--trust-checkpoint": None},
}  # fmt: skip
POSITIONALS = {
    "train": ["{config}", "{junk}", "{missing}", "{dataset}"],
    "eval": ["{run}", "{ckpt}", "{junk}", "{missing}", "sb3:{junk}", "100", "{dataset}"],
    "plot": ["{run}", "{missing}", "{empty_dir}", "{junk}"],
    "collect": [],
    "dataset info": ["d4rl:{dataset}", "{dataset}", "{junk}", "{missing}", "minari:nope/x-v0",
                     "ftp:x", "d4rl:{ckpt}", "{run}"],
    "config-doc": [],
    "export": ["{run}", "{ckpt}", "{junk}", "{missing}", "sb3:{junk}", "{dataset}"],
}  # fmt: skip
# Appended last, so they win over anything random: nothing long starts, nothing leaves tmp.
SAFETY = {
    "train": ["--dry-run", "--set", "run.root={tmp}/runs"],
    "eval": ["--episodes", "1", "--num-envs", "1", "--seeds", "1"],
    "plot": ["--out", "{tmp}/curves.png"],
    "collect": ["--steps", "16", "--out", "{tmp}/out.hdf5"],
    "dataset info": [],
    "config-doc": [],
    "export": ["--out", "{tmp}/export"],
}
JUNK = ["--bogus", "-x", "--", "--help", "-h", "", "--set", "train", "ünï", "--episodes=1"]


@st.composite
def argument_lists(draw: st.DrawFn) -> tuple[str, list[str]]:
    command = draw(st.sampled_from([*OPTIONS, "bogus", ""]))
    if command not in OPTIONS:
        return command, [command, *draw(st.lists(st.sampled_from(JUNK), max_size=3))]
    args: list[str] = []
    for _ in range(draw(st.integers(0, 3))):
        choice = draw(st.integers(0, 7))
        if choice <= 2 and OPTIONS[command]:  # an option, with a value from its vocabulary
            option = draw(st.sampled_from(sorted(OPTIONS[command])))
            values = OPTIONS[command][option]
            args += [option] if values is None else [option, draw(st.sampled_from(values))]
        elif choice <= 5 and POSITIONALS[command]:
            args.append(draw(st.sampled_from(POSITIONALS[command])))
        else:
            args.append(draw(st.sampled_from(JUNK) | st.text(max_size=6)))
    if draw(st.integers(0, 3)) and POSITIONALS[command]:  # most commands want one
        args.insert(0, draw(st.sampled_from(POSITIONALS[command])))
    return command, [*command.split(), *args, *SAFETY[command]]


@pytest.mark.slow
@pytest.mark.timeout(300)
@settings(FUZZ, max_examples=300)
@given(drawn=argument_lists())
def test_random_command_lines(world: dict[str, str], drawn: tuple[str, list[str]]) -> None:
    command, template = drawn
    # Placeholders of ``world`` only: a random argument may hold braces of its own.
    args = [re.sub(r"\{(\w+)\}", lambda m: world.get(m[1], m[0]), arg) for arg in template]
    target = "cli: random argument lists"
    tried(target)
    with working_directory(Path(world["tmp"])), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # gymnasium / matplotlib UserWarnings are not ours
        result = CliRunner().invoke(app, args)
    check_cli_result(result, strict_stderr=False)
    outcome(target, f"{command or '(none)'} exit {result.exit_code}")
