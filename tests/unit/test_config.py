"""Config validation: overrides, and one-line errors naming the key, the value and the rule."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rlformer.config import (
    ConfigError,
    TrainConfig,
    describe_fields,
    dump_config,
    load_config,
    reference_lines,
)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_text(text)
    return path


def test_defaults_validate_and_round_trip(tmp_path: Path) -> None:
    cfg = load_config(None)
    again = load_config(_write(tmp_path, dump_config(cfg)))
    assert again == cfg


def test_set_overrides_nested_fields_with_yaml_types(tmp_path: Path) -> None:
    path = _write(tmp_path, "ppo:\n  learning_rate: 0.001\nenv:\n  id: CartPole-v1\n")
    cfg = load_config(
        path,
        [
            "ppo.learning_rate=5e-4",
            "model.core.n_layers=3",
            "env.kwargs.length=7",
            "rollout.ray_address=null",
            "run.name=abc",
        ],
    )
    assert cfg.ppo.learning_rate == pytest.approx(5e-4)
    assert cfg.model.core.n_layers == 3
    assert cfg.env.kwargs == {"length": 7}
    assert cfg.rollout.ray_address is None
    assert cfg.run.name == "abc"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["ppo.lerning_rate=1"], "ppo.lerning_rate: unknown key"),
        (["ppo.clip_coef=-0.1"], "ppo.clip_coef: got -0.1; Input should be greater than 0"),
        (
            ["rollout.backend=slurm"],
            "rollout.backend: got 'slurm'; Input should be 'local' or 'ray'",
        ),
        (["ppo.update_epochs=many"], "ppo.update_epochs: got 'many'"),
        (["model.core.n_heads=0"], "model.core.n_heads: got 0"),
        (["bogus=1"], "bogus: unknown key"),
        (["ppo.num_minibatches=64"], "exceeds the 8 env slots"),
    ],
)
def test_bad_values_name_key_value_and_rule(overrides: list[str], expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, overrides)
    assert expected in str(info.value)


@pytest.mark.parametrize(
    ("overrides", "meant"),
    [
        (["ppo.lerning_rate=1"], "ppo.learning_rate"),  # a close spelling
        (["ppo.lr=1"], "ppo.learning_rate"),  # the initials of a snake_case key
        (["algo=dt", "dt.lr=1"], "dt.learning_rate"),  # in the section where it was typed
        (["model.core.n_layer=2"], "model.core.n_layers"),
        (["env.wrappers=[{clas: x}]"], "env.wrappers.0.class"),  # through a list, by alias
        (["lr=1"], "ppo.learning_rate"),  # other libraries' names, from any section
        (["rollout.num_envs=4"], "rollout.envs_per_worker"),
        (["ppo.n_steps=64"], "rollout.fragment_length"),
        (["ppo.n_epochs=2"], "ppo.update_epochs"),
        (["ppo.lambda=0.9"], "ppo.gae_lambda"),
        (["seed=3"], "run.seed"),
    ],
)
def test_unknown_key_names_the_key_meant(overrides: list[str], meant: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, overrides)
    assert f"did you mean {meant}?" in str(info.value)


@pytest.mark.parametrize("override", ["model.zzz=1", "env.colour=red"])
def test_unknown_key_without_a_likely_meaning_suggests_nothing(override: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, [override])
    assert "did you mean" not in str(info.value)
    assert "check spelling" in str(info.value)


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ("ppo", "expected KEY.PATH=VALUE"),
        ("=3", "expected KEY.PATH=VALUE"),
        ("ppo.gamma.x=1", "ppo.gamma is a value, not a section"),
    ],
)
def test_malformed_set_items(item: str, expected: str) -> None:
    overrides = ["ppo.gamma=0.9", item] if item.startswith("ppo.gamma.") else [item]
    with pytest.raises(ConfigError, match=expected):
        load_config(None, overrides)


def test_file_problems_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(_write(tmp_path, "ppo: [unclosed\n"))
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_config(_write(tmp_path, "- a\n- b\n"))


def test_every_field_is_documented() -> None:
    rows = describe_fields(TrainConfig)
    assert len(rows) > 40
    undocumented = [path for path, _, doc in rows if not doc.strip()]
    assert undocumented == []


def test_documented_defaults_are_the_effective_ones() -> None:
    # dt.core overrides CoreConfig's class defaults; the reference must show the DT's values.
    rows = {path: default for path, default, _ in describe_fields(TrainConfig)}
    effective = TrainConfig()
    for path, shown in rows.items():
        value: object = effective
        for part in path.split("."):
            value = getattr(value, part)
        assert shown == repr(value), path
    assert rows["dt.core.n_layers"] == "3" and rows["model.core.n_layers"] == "1"
    assert rows["model.core.gate_bias"] == "0.0" and rows["model.core.d_ff"] == "128"


def test_config_reference_doc_is_current() -> None:
    # docs/guides/configs.md holds the printed `rlformer config-doc` (its first bare code block);
    # regenerate it when a key changes.
    doc = (Path(__file__).parents[2] / "docs" / "guides" / "configs.md").read_text()
    body = doc.split("```\n")[1].splitlines()
    assert body == reference_lines(), "docs/guides/configs.md differs from `rlformer config-doc`"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["algo=dt", "model.core.n_layers=4"], "model.core.n_layers is set, but algo dt never"),
        (["algo=dt", "rollout.num_workers=2"], "an offline DT collects no rollouts"),
        (["algo=odt", "ppo.learning_rate=0.1"], "algo odt never reads the ppo section"),
        (["algo=odt", "model.torso=lstm"], "network is dt.core"),
        (["dt.context=5"], "algo ppo never reads the dt section"),
        (["odt.replay_size=50"], "algo ppo never reads the odt section"),
        (["algo=odt", "rollout.fragment_length=32"], "collects whole episodes"),
    ],
)
def test_keys_the_algorithm_would_ignore_are_refused(overrides: list[str], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_config(None, overrides)


def test_sections_an_algorithm_reads_are_accepted(tmp_path: Path) -> None:
    odt = load_config(None, ["algo=odt", "rollout.envs_per_worker=4", "dt.context=5"])
    assert odt.rollout.envs_per_worker == 4 and odt.dt.context == 5
    # A resolved config, every section written out at its defaults, loads again.
    assert load_config(_write(tmp_path, dump_config(odt))) == odt
    assert (
        load_config(None, ["model.core.n_layers=2", "ppo.update_epochs=2"]).ppo.update_epochs == 2
    )
    # Configs stored in checkpoints are not re-checked: older runs stay loadable for evaluation.
    stored = TrainConfig.model_validate({"algo": "dt", "model": {"torso": "lstm"}})
    assert stored.model.torso == "lstm"


@pytest.mark.parametrize("algo", ["dt", "odt"])
def test_a_preset_named_for_an_offline_algorithm_sets_only_the_env(algo: str) -> None:
    """MiniGrid data is recorded through the preset's wrappers, so a DT trained on it needs
    them; the preset's rollout, model, PPO and evaluation settings were measured for PPO."""
    cfg = load_config(None, [f"algo={algo}", "env.id=MiniGrid-MemoryS11-v0", "preset=minigrid"])
    ppo = load_config(None, ["env.id=MiniGrid-MemoryS11-v0", "preset=minigrid"])
    assert cfg.env == ppo.env and "minigrid.wrappers:ImgObsWrapper" in str(cfg.env.wrappers)
    plain = TrainConfig(algo=algo)
    assert (cfg.rollout, cfg.model, cfg.ppo, cfg.eval) == (
        plain.rollout,
        plain.model,
        plain.ppo,
        plain.eval,
    )
    # A preset with nothing for the env (mujoco: observation normalisation, a PPO setting).
    hopper = load_config(None, [f"algo={algo}", "env.id=Hopper-v5", "preset=mujoco"])
    assert hopper.model == plain.model


def test_resumed_configs_check_only_the_new_overrides(tmp_path: Path) -> None:
    from rlformer.config import load_saved_config

    # A DT run saved by a version whose PPO model defaults differed: the saved file lists the
    # unread model section with other values. Resuming it must still work.
    saved = load_config(None, ["algo=dt", "dt.context=5"]).model_dump(mode="json")
    saved["model"]["core"]["gate_bias"] = 2.0
    path = _write(tmp_path, yaml.safe_dump(saved))
    with pytest.raises(ConfigError, match="model.core.gate_bias is set"):
        load_config(path)
    assert load_saved_config(path).model.core.gate_bias == 2.0
    assert load_saved_config(path, ["dt.train_steps=50"]).dt.train_steps == 50
    with pytest.raises(ConfigError, match="model.core.n_layers is set, but algo dt never"):
        load_saved_config(path, ["model.core.n_layers=4"])
