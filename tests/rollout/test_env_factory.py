"""Envs from config: imports, ``module:EnvId``, wrappers in order, and one-line errors."""

from __future__ import annotations

import gymnasium as gym
import pytest

from rlformer.algos.ppo.algorithm import build_model
from rlformer.config import EnvConfig, load_config
from rlformer.rollout.env_factory import EnvError, env_from_config, vector_env_from_config


def _env(**fields: object) -> EnvConfig:
    return EnvConfig.model_validate(fields)


def test_module_colon_id_and_wrappers_in_order() -> None:
    cfg = _env(
        id="tests.space_envs:SpaceTest-v0",
        kwargs={"obs": "box", "action": "discrete"},
        max_episode_steps=10,
        wrappers=[
            {"class": "gymnasium.wrappers:TimeAwareObservation"},
            {
                "class": "gymnasium.wrappers:ClipReward",
                "kwargs": {"min_reward": 0, "max_reward": 0.5},
            },
        ],
    )
    env = env_from_config(cfg)
    assert isinstance(env, gym.wrappers.ClipReward)
    assert isinstance(env.env, gym.wrappers.TimeAwareObservation)
    assert env.observation_space.shape == (4,)  # the time feature was appended
    env.close()
    # The resolved config round-trips with the `class` key (as written in YAML).
    dumped = cfg.model_dump(mode="json")
    first = {"class": "gymnasium.wrappers:TimeAwareObservation", "kwargs": {}, "unwrapped": False}
    assert dumped["wrappers"][0] == first
    assert EnvConfig.model_validate(dumped) == cfg


def test_imports_register_envs_before_make() -> None:
    envs = vector_env_from_config(
        _env(id="popgym-CountRecallEasy-v0", imports=["popgym"]), num_envs=2
    )
    assert isinstance(envs.single_observation_space, gym.spaces.MultiDiscrete)
    envs.close()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"id": "nosuchpkg_xyz:Foo-v0"}, "cannot import module 'nosuchpkg_xyz'"),
        ({"imports": ["nosuchpkg_xyz"]}, "env.imports entry 'nosuchpkg_xyz': cannot import"),
        (
            {"wrappers": [{"class": "nosuchpkg_xyz.wrappers:W"}]},
            "env.wrappers[0] (nosuchpkg_xyz.wrappers:W): cannot import module",
        ),
        (
            {"wrappers": [{"class": "gymnasium.wrappers:NoSuchWrapper"}]},
            "has no attribute 'NoSuchWrapper'",
        ),
        (
            {"wrappers": [{"class": "gymnasium.wrappers:ClipReward", "kwargs": {"bogus": 1}}]},
            "could not wrap 'CartPole-v1' with kwargs {'bogus': 1}: TypeError",
        ),
    ],
)
def test_env_errors_are_one_line(fields: dict, message: str) -> None:
    with pytest.raises(EnvError) as err:
        env_from_config(_env(**fields))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_wrapper_that_makes_spaces_unsupported_is_named() -> None:
    cfg = load_config(
        None,
        [
            "env.id=tests.space_envs:SpaceTest-v0",
            "env.kwargs.obs=box",
            "env.wrappers=[{class: tests.space_envs:AddMission}]",
        ],
    )
    with pytest.raises(EnvError) as err:
        build_model(cfg)
    text = str(err.value)
    assert "wrapped in tests.space_envs:AddMission" in text and "'mission'" in text


def test_bad_wrapper_path_is_a_config_error() -> None:
    from rlformer.config import ConfigError

    with pytest.raises(ConfigError, match=r"env.wrappers.0.class"):
        load_config(None, ["env.wrappers=[{class: not-a-path}]"])


@pytest.mark.parametrize(
    ("env_id", "expected"),
    [
        ("MiniGrid-NoSuchTask-v0", "env.imports: [minigrid] (or preset: minigrid)"),
        ("popgym-NoSuchTaskEasy-v0", "env.imports: [popgym] (or preset: popgym)"),
    ],
)
def test_unknown_id_of_a_known_family_names_its_import(env_id: str, expected: str) -> None:
    with pytest.raises(EnvError) as err:
        env_from_config(_env(id=env_id))
    assert f"unknown env id {env_id!r}" in str(err.value) and expected in str(err.value)


def test_unknown_id_outside_the_families_gets_no_import_hint() -> None:
    with pytest.raises(EnvError) as err:
        env_from_config(_env(id="NoSuchTask-v0"))
    assert "env.imports" not in str(err.value)
