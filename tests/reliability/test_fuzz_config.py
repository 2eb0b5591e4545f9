"""Fuzzing the config path: random trees, values, YAML text and ``--set`` overrides.

Whatever the input, ``load_config`` either returns a config that survives a dump/reload round
trip, or raises :class:`ConfigError` whose message has one non-empty line per problem; and
``rlformer train CONFIG --dry-run`` exits 0 or 2 (``error:`` lines only), never with a traceback.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from rlformer.cli import app
from rlformer.config import ConfigError, TrainConfig, describe_fields, dump_config, load_config
from tests.reliability.fuzzing import (
    FUZZ,
    check_cli_result,
    outcome,
    tried,
    working_directory,
)

LEAVES = [path for path, _, _ in describe_fields()]
SECTIONS = sorted({".".join(p.split(".")[:i]) for p in LEAVES for i in range(1, p.count(".") + 1)})
JUNK_KEYS = ["", "x", "lr", "ppo_", "Run", "model.core", "0", "env id", "__class__", "ünï"]
KEYS = st.sampled_from(LEAVES + SECTIONS + JUNK_KEYS)
WORDS = [
    "ppo",
    "dt",
    "gtrxl",
    "mlp",
    "local",
    "ray",
    "auto",
    "cpu",
    "cuda",
    "fp32",
    "bf16",
    "relative",
    "rotary",
    "none",
    "trxl_i",
    "gru",
    "stop",
    "skip",
    "CartPole-v1",
    "rlformer/TMaze-v0",
    "Pendulum-v1",
    "NoSuchEnv-v0",
    "1e-3",
    "",
    "null",
    "-1",
    "nan",
]


def _scalars(small: bool) -> st.SearchStrategy[Any]:
    ints = st.integers(-3, 48) if small else st.integers(-(2**70), 2**70)
    floats = (
        st.sampled_from([0.0, 0.01, 0.5, 1.0, 2.5, -1.0, math.inf, math.nan])
        if small
        else st.floats(allow_nan=True, allow_infinity=True)
    )
    return st.one_of(
        st.none(), st.booleans(), ints, floats, st.sampled_from(WORDS), st.text(max_size=12)
    )


def _values(small: bool) -> st.SearchStrategy[Any]:
    return st.recursive(
        _scalars(small),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(st.sampled_from(JUNK_KEYS), inner, max_size=3),
        ),
        max_leaves=6,
    )


def _tree(small: bool) -> st.SearchStrategy[dict[str, Any]]:
    """A nested mapping built from ``path -> value`` items: real keys, sections and junk."""

    def build(items: list[tuple[str, Any]]) -> dict[str, Any]:
        tree: dict[str, Any] = {}
        for path, value in items:
            node = tree
            *parents, last = path.split(".")
            for part in parents:
                child = node.get(part)
                if not isinstance(child, dict):
                    child = node[part] = {}
                node = child
            node[last] = value
        return tree

    item = st.one_of(
        st.tuples(st.sampled_from(LEAVES), _scalars(small)),  # a real key, a plain value
        st.tuples(KEYS, _values(small)),  # any key, any value
    )
    return st.lists(item, max_size=6).map(build)


def _check_outcome(target: str, load: Any) -> None:
    """``load()`` gives a config that round-trips, or a ConfigError of one line per problem."""
    tried(target)
    try:
        cfg = load()
    except ConfigError as err:
        lines = str(err).splitlines()
        assert lines and all(line.strip() for line in lines), repr(str(err))
        outcome(target, "ConfigError")
        return
    outcome(target, "valid")
    assert isinstance(cfg, TrainConfig)
    again = TrainConfig.model_validate(yaml.safe_load(dump_config(cfg)))
    assert dump_config(again) == dump_config(cfg)


@settings(FUZZ, max_examples=250)
@given(tree=_tree(small=False))
def test_random_config_files(tmp_path_factory: pytest.TempPathFactory, tree: dict) -> None:
    path = tmp_path_factory.mktemp("cfg") / "c.yaml"
    path.write_text(yaml.safe_dump(tree, allow_unicode=True))
    _check_outcome("config: YAML file (tree)", lambda: load_config(path))


# Raw YAML text: tags, anchors, dates (some invalid), binary, flow syntax, tabs, bad indents.
YAML_PIECES = [
    "run:\n  seed: 3\n",
    "ppo: {learning_rate: 1e-3}\n",
    "env:\n\tid: x\n",
    "a: *nope\n",
    "x: !!python/object:os.system x\n",
    "run: {seed: 2001-13-45}\n",
    "run: {name: 2020-02-30}\n",
    "run: {name: 2001-12-14t21:59:43.10-05:00}\n",
    "env: {kwargs: {b: !!binary aGk=}}\n",
    "- 1\n- 2\n",
    "'unterminated\n",
    "? [a, b]\n: 1\n",
    "model: &m {torso: mlp}\nppo: *m\n",
    "%YAML 9.9\n---\n",
    "\x00\x01",
    "---\n...\n---\n",
    "env:\n  id: [\n",
    "algo: ppo\nalgo: dt\n",
]


@settings(FUZZ, max_examples=150)
@given(
    pieces=st.lists(st.sampled_from(YAML_PIECES), min_size=1, max_size=3), junk=st.text(max_size=8)
)
def test_random_yaml_text(
    tmp_path_factory: pytest.TempPathFactory, pieces: list, junk: str
) -> None:
    path = tmp_path_factory.mktemp("cfg") / "c.yaml"
    path.write_text("".join(pieces) + junk)
    _check_outcome("config: YAML file (raw text)", lambda: load_config(path))


OVERRIDE_VALUES = st.one_of(
    st.sampled_from(
        [
            "1",
            "-1",
            "1e-3",
            "nan",
            ".inf",
            "null",
            "~",
            "true",
            "[1, 2]",
            "{a: 1}",
            "[",
            "{",
            "*x",
            "&a 1",
            "!!binary aGk=",
            "!!python/name:os.system",
            "2001-13-45",
            "2024-02-30",
            "12:30:00",
            "0x1F",
            "0o17",
            "'q'",
            '"\\x"',
            "a: b: c",
            "- x",
            "%",
            "@",
            "`",
        ]
    ),
    st.text(max_size=10),
)


@settings(FUZZ, max_examples=300)
@given(
    overrides=st.lists(
        st.one_of(
            st.builds(lambda k, v: f"{k}={v}", KEYS, OVERRIDE_VALUES),
            st.text(max_size=12),  # no '=' at all, or stray separators
        ),
        max_size=5,
    )
)
def test_random_set_overrides(overrides: list[str]) -> None:
    _check_outcome("config: --set overrides", lambda: load_config(None, overrides))


# ------------------------------------------------------------------ through the real CLI
ENV_IDS = ["CartPole-v1", "Pendulum-v1", "rlformer/TMaze-v0", "CartPole-v1", "NoSuchEnv-v0", ""]
ENV_KWARGS = st.dictionaries(
    st.sampled_from(["length", "slack", "g", "sutton_barto_reward", "render_mode", "bogus"]),
    st.one_of(st.integers(-3, 12), st.sampled_from(["abc", "rgb_array", None, 1.5, [1]])),
    max_size=2,
)
# Mostly real leaves with small values, so many configs validate and reach the env / model.
SMALL_ITEMS = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(LEAVES), st.integers(1, 8)),
        st.tuples(st.sampled_from(LEAVES), _scalars(small=True)),
        st.tuples(KEYS, _values(True)),
    ),
    max_size=3,
)


def _dry_run_config(env_id: str, torso: str, kwargs: dict, items: list) -> dict[str, Any]:
    # Small models so a valid config builds in milliseconds; the random items may override them.
    tree: dict[str, Any] = {
        "env": {"id": env_id, "kwargs": kwargs},
        "model": {
            "torso": torso,
            "mlp_hidden": [8],
            "core": {"d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 8, "memory_length": 4},
        },
        "rollout": {"envs_per_worker": 4},
    }
    for path, value in items:
        node = tree
        *parents, last = path.split(".")
        for part in parents:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[last] = value
    return tree


@pytest.mark.slow
@settings(FUZZ, max_examples=60)
@given(
    env_id=st.sampled_from(ENV_IDS),
    torso=st.sampled_from(["mlp", "gtrxl"]),
    kwargs=st.one_of(st.just({}), ENV_KWARGS),
    items=SMALL_ITEMS,
    extra=st.lists(st.builds(lambda k, v: f"{k}={v}", KEYS, OVERRIDE_VALUES), max_size=1),
)
def test_dry_run_cli(
    tmp_path_factory: pytest.TempPathFactory,
    env_id: str,
    torso: str,
    kwargs: dict,
    items: list,
    extra: list,
) -> None:
    target = "cli: train CONFIG --dry-run"
    tried(target)
    tmp = tmp_path_factory.mktemp("dry")
    path = tmp / "c.yaml"
    path.write_text(yaml.safe_dump(_dry_run_config(env_id, torso, kwargs, items)))
    sets = [arg for item in extra for arg in ("--set", item)]
    # The run root always ends up in the temp folder (the last override wins).
    args = ["train", str(path), "--dry-run", *sets, "--set", f"run.root={tmp / 'runs'}"]
    with working_directory(Path(tmp)), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # gymnasium's own UserWarnings are not our stderr
        result = CliRunner().invoke(app, args)
    check_cli_result(result)
    outcome(target, f"exit {result.exit_code}")
    if result.exit_code == 0:
        assert result.stdout.startswith("ok: "), result.stdout
