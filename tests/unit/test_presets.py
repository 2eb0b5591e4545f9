"""Presets: tuned settings of a task family under a config; the config and --set win."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from rlformer.config import ConfigError, dump_config, load_config
from rlformer.config.presets import PRESETS, apply_preset, merged
from rlformer.networks.normalization import moments
from rlformer.runs.training import check_config


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_text(text)
    return path


def test_preset_fills_what_the_config_leaves_out(tmp_path: Path) -> None:
    cfg = load_config(_write(tmp_path, "preset: popgym\nenv: {id: popgym-RepeatFirstEasy-v0}\n"))
    assert cfg.env.id == "popgym-RepeatFirstEasy-v0"
    assert cfg.env.imports == ["popgym"]
    assert [(w.cls, w.unwrapped) for w in cfg.env.wrappers] == [
        ("popgym.wrappers:PreviousAction", True)
    ]
    assert (cfg.rollout.envs_per_worker, cfg.rollout.fragment_length) == (16, 64)
    assert (cfg.ppo.learning_rate, cfg.ppo.ent_coef, cfg.ppo.total_steps) == (5e-4, 0.01, 200_000)
    assert cfg.model.core.memory_length == 64 and cfg.model.recurrent_hidden == 64
    assert cfg.model.core.episode_clock  # the popgym preset's own; the default is off
    assert not load_config(None).model.core.episode_clock
    # Keys no preset names keep the ordinary defaults.
    assert cfg.ppo.gamma == load_config(None).ppo.gamma


def test_config_keys_merge_into_the_preset_and_win(tmp_path: Path) -> None:
    text = (
        "preset: minigrid\n"
        "env: {id: MiniGrid-DoorKey-5x5-v0}\n"
        "model:\n  core: {memory_length: 16}\n  recurrent_hidden: 32\n"
        "ppo: {learning_rate: 0.001}\n"
    )
    cfg = load_config(_write(tmp_path, text))
    assert cfg.model.core.memory_length == 16  # the config's
    assert cfg.model.core.d_model == 64 and cfg.model.core.gate_bias == 0.0  # the preset's
    assert cfg.model.recurrent_hidden == 32  # the config's, over the preset's 64
    assert [w.cls for w in cfg.env.wrappers] == [
        "rlformer_envs:SuccessFromReward",
        "minigrid.wrappers:OneHotPartialObsWrapper",
        "minigrid.wrappers:ImgObsWrapper",
    ]
    assert cfg.ppo.learning_rate == 0.001 and cfg.ppo.ent_coef == 0.01


def test_set_wins_over_config_and_preset_and_can_name_the_preset(tmp_path: Path) -> None:
    path = _write(tmp_path, "env: {id: popgym-RepeatFirstEasy-v0}\nppo: {learning_rate: 0.002}\n")
    plain = load_config(path, ["preset=null"])
    assert plain.preset is None
    assert plain.rollout.envs_per_worker == 8 and plain.env.wrappers == []
    cfg = load_config(path, ["preset=popgym", "rollout.envs_per_worker=4"])
    assert cfg.preset == "popgym" and cfg.rollout.envs_per_worker == 4
    assert cfg.ppo.learning_rate == 0.002  # the config's, over the preset's 5e-4
    assert cfg.rollout.fragment_length == 64 and len(cfg.env.wrappers) == 1


@pytest.mark.parametrize(
    ("env_id", "algo", "expected"),
    [
        ("popgym-RepeatFirstEasy-v0", "ppo", "popgym"),
        ("popgym:popgym-CountRecallHard-v0", "ppo", "popgym"),
        ("MiniGrid-DoorKey-5x5-v0", "ppo", "minigrid"),
        ("rlformer/CartPoleNoVel-v0", "ppo", "cartpole-novel"),
        ("rlformer_envs:rlformer/PendulumNoVel-v0", "ppo", "pendulum-novel"),
        ("rlformer/LunarLanderNoVel-v0", "ppo", "lunarlander-novel"),
        ("CartPole-v1", "ppo", None),  # the velocities are there: not the NoVel preset
        ("Hopper-v5", "ppo", "mujoco"),
        ("HumanoidStandup-v5", "ppo", "mujoco"),
        ("Hopper-v5", "odt", None),  # the DT normalises states from its dataset
        ("rlformer/TMaze-v0", "ppo", None),
        ("MiniGrid-DoorKey-5x5-v0", "dt", None),  # presets hold PPO evidence
    ],
)
def test_auto_picks_the_env_familys_preset_and_records_it(
    env_id: str, algo: str, expected: str | None, tmp_path: Path
) -> None:
    # auto is the default: a config with only env.id gets its family's settings.
    cfg = load_config(_write(tmp_path, f"algo: {algo}\nenv: {{id: {env_id!r}}}\n"))
    assert cfg.preset == expected
    named = "null" if expected is None else expected
    assert cfg == load_config(None, [f"algo={algo}", f"env.id={env_id}", f"preset={named}"])
    if expected == "popgym":
        assert cfg.rollout.envs_per_worker == 16 and cfg.env.imports == ["popgym"]
    if expected == "pendulum-novel":
        assert cfg.ppo.gamma == 0.9 and cfg.model.normalize_reward
    if expected == "mujoco":
        assert cfg.model.normalize_obs
    if expected is None:
        assert not cfg.model.normalize_obs  # the default; only presets turn it on


def test_shipped_no_velocity_configs_are_their_presets_plus_a_run_name() -> None:
    """The three configs and `--set env.id=ID` alone train with the same settings."""
    configs = Path(__file__).parents[2] / "configs"
    for task in ("cartpole", "pendulum", "lunarlander"):
        shipped = load_config(configs / f"ppo_gtrxl_{task}_novel.yaml")
        alone = load_config(None, [f"env.id={shipped.env.id}", f"run.name={shipped.run.name}"])
        assert shipped.preset == f"{task}-novel"
        assert alone == shipped


def test_a_listed_wrapper_list_replaces_the_presets(tmp_path: Path) -> None:
    text = "preset: popgym\nenv:\n  id: popgym-RepeatFirstEasy-v0\n  wrappers: []\n"
    cfg = load_config(_write(tmp_path, text))
    assert cfg.env.wrappers == [] and cfg.env.imports == ["popgym"]


@pytest.mark.parametrize("name", ["nope", 3, ["popgym"]])
def test_unknown_preset_is_one_line_naming_the_choices(name: object, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, [f"preset={name}"])
    message = str(err.value)
    assert "\n" not in message and message.startswith("preset: unknown preset")
    assert all(choice in message for choice in PRESETS)


def test_resolved_config_round_trips(tmp_path: Path) -> None:
    cfg = load_config(None, ["preset=popgym", "env.id=popgym-RepeatFirstEasy-v0"])
    again = load_config(_write(tmp_path, dump_config(cfg)))
    assert again == cfg


def test_merging_leaves_the_preset_untouched() -> None:
    before = repr(PRESETS["popgym"])
    first = apply_preset({"preset": "popgym", "model": {"core": {"memory_length": 8}}})
    first["env"]["wrappers"].append({"class": "x:Y"})
    second = apply_preset({"preset": "popgym"})
    assert repr(PRESETS["popgym"]) == before
    assert second["model"]["core"]["memory_length"] == 64 and len(second["env"]["wrappers"]) == 1


def test_merged_replaces_non_mappings_and_recurses_into_mappings() -> None:
    base = {"a": {"b": 1, "c": [1, 2]}, "d": 5}
    assert merged(base, {"a": {"c": [3]}, "d": None}) == {"a": {"b": 1, "c": [3]}, "d": None}
    assert merged(base, {"a": 7}) == {"a": 7, "d": 5}


@pytest.mark.parametrize(
    ("preset", "env_id"),
    [
        ("popgym", "popgym-CountRecallMedium-v0"),
        ("minigrid", "MiniGrid-DoorKey-5x5-v0"),
        ("mujoco", "Walker2d-v5"),
    ],
)
def test_preset_builds_env_and_model_for_an_untuned_task(
    preset: str, env_id: str, tmp_path: Path
) -> None:
    # A task of the family that no shipped config names: the preset alone makes it run.
    cfg = load_config(None, [f"preset={preset}", f"env.id={env_id}", f"run.root={tmp_path}"])
    assert check_config(cfg).startswith(f"ok: ppo on {env_id}")


def _memory_s11_encoder_and_cue_views() -> tuple[Any, Any, dict[str, np.ndarray]]:
    """The minigrid preset's env and encoder for MiniGrid-MemoryS11, and one start view per cue
    type (a key or a ball) taken with the agent beside the cue, where the cue is in view."""
    pytest.importorskip("minigrid")
    from rlformer.networks.encoders import ObservationEncoder
    from rlformer.rollout.env_factory import env_from_config

    cfg = load_config(None, ["env.id=MiniGrid-MemoryS11-v0"])
    env = env_from_config(cfg.env)
    encoder = ObservationEncoder(env.observation_space, cfg.model)
    views: dict[str, np.ndarray] = {}
    for seed in range(200):
        obs, _ = env.reset(seed=seed)
        grid = env.unwrapped.grid
        cue = grid.get(1, grid.height // 2 - 1).type
        if env.unwrapped.agent_pos[0] == 1 and cue not in views:
            views[cue] = obs
        if len(views) == 2:
            break
    return env, encoder, views


def test_minigrid_preset_shows_a_key_and_a_ball_in_separate_input_units() -> None:
    """MiniGrid-MemoryS11's cue (a key or a ball) must reach the model as distinct inputs.

    Under the old preset (object codes / 10 into a CNN) the two differed by 0.1 in one channel
    and PPO stayed at chance even with the cue in every view; the one-hot view gives each object
    type its own bit.
    """
    env, encoder, views = _memory_s11_encoder_and_cue_views()
    assert encoder.out_dim == 7 * 7 * 20  # flattened, no CNN: the view has 20 channels
    # Before any statistics are merged, normalisation is the identity: the raw bits.
    key, ball = (encoder(torch.as_tensor(views[cue])[None])[0] for cue in ("key", "ball"))
    assert set(torch.unique(key).tolist()) == {0.0, 1.0}
    # Same position, same colour, same layout around it: only the cue cell's type bits differ.
    assert int((key != ball).sum()) == 2


def test_minigrid_preset_normalises_the_view_so_the_rare_cue_bits_stand_out() -> None:
    """With statistics of random play merged, the cue's type bit is far louder than the bits
    every view shares (walls, floor). Unnormalised it was 2 of about 150 set bits, and with the
    cue shown at the first step only PPO stayed at chance for 1M steps
    (docs/benchmarks/memory.md)."""
    env, encoder, views = _memory_s11_encoder_and_cue_views()
    rng = np.random.default_rng(0)
    seen = []
    for seed in range(50):
        obs, _ = env.reset(seed=seed)
        for _ in range(10):
            seen.append(obs.reshape(-1))
            obs, *_ = env.step(int(rng.integers(3)))  # left, right, forward
    (statistics,) = encoder.normalized_leaves().values()
    statistics.merge(moments(np.stack(seen), (7 * 7 * 20,)))

    for cue, other in (("key", "ball"), ("ball", "key")):
        raw = torch.as_tensor(views[cue]).reshape(-1)
        cue_bit = (raw == 1) & (raw != torch.as_tensor(views[other]).reshape(-1))
        rest = (raw == 1) & ~cue_bit
        encoded = encoder(torch.as_tensor(views[cue])[None])[0]
        assert int(cue_bit.sum()) == 1
        assert float(encoded[cue_bit].abs()) > 5 * float(encoded[rest].abs().median())
