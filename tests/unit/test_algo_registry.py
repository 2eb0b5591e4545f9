"""Adding an algorithm is one declaration: its section joins the run config, keys in the sections
it ignores are refused with its own reasons, and ``rlformer config-doc`` lists it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import Field

from rlformer.config import ConfigError, TrainConfig, build_config, reference_lines
from rlformer.config.sections.base import Section, StrictModel
from rlformer.config.sections.registry import register, registered, unregister
from rlformer.config.sections.spec import AlgorithmSpec

INSTALLED = registered()
"""The algorithms the package's entry points declare."""


def test_the_installed_algorithms_come_from_the_entry_points_in_rank_order() -> None:
    assert [spec.name for spec in INSTALLED] == ["ppo", "dt", "odt", "mappo"]
    assert TrainConfig.model_fields["algo"].default == "ppo"


class ToyConfig(StrictModel):
    """Settings of an algorithm that exists only in this test."""

    steps: int = Field(10, ge=1, description="Steps the toy takes.")


def _toy(**changes: object) -> AlgorithmSpec:
    fields: dict = {
        "name": "toy",
        "summary": "a test's algorithm",
        "section": Section(ToyConfig, "Toy learner."),
        "unread_reason": "it configures the toy",
        "reads": ("run", "env", "eval"),
        "unread": {
            "model": "a toy has no network",
            "rollout": "a toy collects nothing",
            "learner": "a toy learns in one process",
        },
        "preset_sections": (),
    }
    return AlgorithmSpec(**{**fields, **changes})


@pytest.fixture
def toy() -> Iterator[AlgorithmSpec]:
    spec = register(_toy())
    yield spec
    unregister(spec.name)
    assert registered() == INSTALLED


def test_a_registered_algorithm_has_a_section_and_refuses_what_it_ignores(toy) -> None:
    cfg = build_config({"algo": "toy", "toy": {"steps": 3}, "env": {"id": "Pendulum-v1"}})
    assert (cfg.algo, cfg.toy.steps, cfg.env.id) == ("toy", 3, "Pendulum-v1")
    with pytest.raises(ConfigError) as info:
        build_config({"algo": "toy", "rollout": {"num_workers": 2}})
    assert str(info.value) == (
        "rollout.num_workers is set, but algo toy never reads the rollout section "
        "(a toy collects nothing); remove it"
    )
    # Its section's values are checked like any other, and other algorithms refuse it.
    with pytest.raises(ConfigError, match=r"toy.steps: got 0; Input should be greater"):
        build_config({"algo": "toy", "toy": {"steps": 0}})
    with pytest.raises(ConfigError, match=r"algo dt never reads the toy section \(it configures"):
        build_config({"algo": "dt", "toy": {"steps": 3}})
    # A named preset gives it only the sections it declares (none).
    plain = build_config({"algo": "toy", "env": {"id": "Hopper-v5"}})
    assert build_config({"algo": "toy", "env": {"id": "Hopper-v5"}, "preset": "mujoco"}).env == (
        plain.env
    )
    assert "toy.steps                        10             Steps the toy takes." in (
        reference_lines()
    )


def test_removing_it_restores_the_shipped_config(toy) -> None:
    unregister("toy")
    try:
        with pytest.raises(ConfigError, match="algo: got 'toy'; Input should be 'ppo', 'dt'"):
            build_config({"algo": "toy"})
        assert type(build_config({})) is TrainConfig
        assert not any(line.startswith("toy.") for line in reference_lines())
    finally:
        register(toy)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"reads": ("run", "env")}, "say whether it reads the shared eval section"),
        ({"reads": ("run", "env", "eval", "model")}, "say whether it reads the shared model"),
        ({"unread": {"model": "", "rollout": "none"}}, "unread gives no reason for model"),
        ({"reads": ("run", "env", "eval", "nothing")}, "reads nothing, which is neither"),
        ({"unread_reason": ""}, "unread_reason must say what its section configures"),
        ({"name": "ppo"}, "an algorithm of that name is registered"),
        ({"name": "env"}, "names no other top-level key"),
    ],
)
def test_an_incomplete_declaration_is_refused(changes: dict, expected: str) -> None:
    with pytest.raises(ValueError, match=expected):
        register(_toy(**changes))
    assert registered() == INSTALLED


def test_a_source_tree_without_its_entry_points_says_how_to_install(monkeypatch) -> None:
    from rlformer.config.sections import registry

    monkeypatch.setattr(registry, "_LOADED", False)
    monkeypatch.setattr(registry, "entry_points", lambda group: [])
    with pytest.raises(registry.NoAlgorithmsInstalled, match="pip install -e ."):
        registry.registered()
