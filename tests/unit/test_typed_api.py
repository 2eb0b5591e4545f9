"""The typed API: a type checker knows the run config's fields, a config built with keywords
trains as the same keys in a YAML file would, and ``rlformer.train`` returns a run whose policy
loads, evaluates and exports."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from pydantic import Field

import rlformer
from rlformer import EnvConfig, ModelConfig, PPOConfig, RunConfig, TrainConfig
from rlformer.config import (
    ConfigError,
    build_config,
    load_config,
    set_keys,
    train_config_model,
)
from rlformer.config.sections.base import Section, StrictModel
from rlformer.config.sections.registry import register, unregister
from rlformer.config.sections.spec import AlgorithmSpec

REPO = Path(__file__).resolve().parents[2]


def test_the_declared_config_is_the_model_yaml_validates_against() -> None:
    assert train_config_model() is TrainConfig
    assert type(load_config(None)) is TrainConfig
    assert list(TrainConfig.model_fields) == [
        "algo", "preset", "run", "env", "rollout", "model", "eval", "learner", "ppo", "dt", "odt",
        "mappo",
    ]  # fmt: skip
    assert rlformer.config.TrainConfig is TrainConfig


def test_a_keyword_config_resolves_as_the_same_keys_in_yaml() -> None:
    cfg = TrainConfig(env=EnvConfig(id="CartPole-v1"), ppo=PPOConfig(total_steps=2048))
    cfg.rollout.envs_per_worker = 4
    assert set_keys(cfg) == {
        "env": {"id": "CartPole-v1"},
        "rollout": {"envs_per_worker": 4},
        "ppo": {"total_steps": 2048},
    }
    raw = {"env": {"id": "CartPole-v1"}, "rollout": {"envs_per_worker": 4}}
    yaml_cfg = build_config({**raw, "ppo": {"total_steps": 2048}})
    assert cfg.resolved() == yaml_cfg
    # A preset is laid under the keys set; the keys set win.
    popgym = TrainConfig(env=EnvConfig(id="popgym-RepeatPreviousEasy-v0"))
    popgym.ppo.learning_rate = 1e-3
    resolved = popgym.resolved()
    assert resolved == load_config(
        None, ["env.id=popgym-RepeatPreviousEasy-v0", "ppo.learning_rate=1e-3"]
    )
    assert (popgym.preset, resolved.preset, resolved.ppo.learning_rate) == ("auto", "popgym", 1e-3)
    # A key the algorithm never reads is refused on resolving, as in a YAML file.
    with pytest.raises(ConfigError, match="algo dt never reads the model section"):
        TrainConfig(algo="dt", model=ModelConfig(torso="lstm")).resolved()


def test_a_keyword_config_checks_values_and_sections_as_it_is_built() -> None:
    with pytest.raises(ValueError, match="greater than 0"):
        PPOConfig(learning_rate=0)
    with pytest.raises(ValueError, match="num_minibatches=16 exceeds"):
        TrainConfig(ppo=PPOConfig(num_minibatches=16))


class _ToyConfig(StrictModel):
    steps: int = Field(1, ge=1, description="Steps.")


@pytest.fixture
def toy() -> Iterator[None]:
    register(
        AlgorithmSpec(
            name="typedtoy",
            summary="a test's algorithm",
            section=Section(_ToyConfig, "Toy."),
            unread_reason="it configures the toy",
            reads=("run", "env", "rollout", "model", "eval", "learner"),
            preset_sections=(),
        )
    )
    yield
    unregister("typedtoy")


def test_an_algorithm_registered_after_the_built_in_ones_extends_the_declared_config(
    toy: None,
) -> None:
    model = train_config_model()
    assert model is not TrainConfig and issubclass(model, TrainConfig)
    assert list(model.model_fields)[-1] == "typedtoy"
    cfg = build_config({"algo": "typedtoy", "typedtoy": {"steps": 3}})
    assert isinstance(cfg, TrainConfig) and cfg.typedtoy.steps == 3


# Third-party packages whose types the snippets below never reach: mypy reads them as Any
# instead of analysing them (torch alone is 37 of the 44 s of CPU a snippet check takes).
UNREAD = ["torch.*", "ray.*", "gymnasium.*", "numpy.*", "sympy.*", "onnx.*", "onnxruntime.*"]


def _ini_value(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return ", ".join(value) if isinstance(value, list) else str(value)


def _mypy_config(tmp_path: Path) -> Path:
    """The project's mypy settings (pyproject.toml) as an INI file, plus :data:`UNREAD`."""
    tomllib = pytest.importorskip("tomllib")
    tool = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]
    sections = {"mypy": {k: v for k, v in tool["mypy"].items() if k not in ("files", "overrides")}}
    sections["pydantic-mypy"] = tool["pydantic-mypy"]
    for override in tool["mypy"]["overrides"]:
        rest = {k: v for k, v in override.items() if k != "module"}
        sections[f"mypy-{','.join(override['module'])}"] = rest
    sections[f"mypy-{','.join(UNREAD)}"] = {"follow_imports": "skip"}
    path = tmp_path / "mypy.ini"
    path.write_text(
        "".join(
            f"[{name}]\n" + "".join(f"{k} = {_ini_value(v)}\n" for k, v in body.items())
            for name, body in sections.items()
        )
    )
    return path


def _mypy(tmp_path: Path, code: str) -> str:
    pytest.importorskip("mypy")
    snippet = tmp_path / "snippet.py"
    snippet.write_text(textwrap.dedent(code))
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(_mypy_config(tmp_path)),
         "--follow-imports", "silent", str(snippet)],
        capture_output=True, text=True, timeout=900, cwd=REPO,
    )  # fmt: skip
    return done.stdout + done.stderr


@pytest.mark.slow
def test_the_type_checker_knows_the_fields(tmp_path: Path) -> None:
    out = _mypy(
        tmp_path,
        """
        import rlformer

        cfg = rlformer.TrainConfig(env=rlformer.EnvConfig(id="CartPole-v1"))
        reveal_type(cfg.ppo.learning_rate)
        reveal_type(rlformer.load_config(None).dt.context)
        cfg.ppo.learning_rat
        rlformer.PPOConfig(total_step=1)
        """,
    )
    assert re.search(r'snippet.py:5: note: Revealed type is "(builtins\.)?float"', out), out
    assert re.search(r'snippet.py:6: note: Revealed type is "(builtins\.)?int"', out), out
    assert 'snippet.py:7: error: "PPOConfig" has no attribute "learning_rat"' in out, out
    assert 'snippet.py:8: error: Unexpected keyword argument "total_step"' in out, out
    assert "Found 2 errors in 1 file" in out, out


@pytest.mark.slow
def test_train_returns_a_run_whose_policy_evaluates_and_exports(tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    torch.set_num_threads(1)
    cfg = TrainConfig(
        env=EnvConfig(id="CartPole-v1"),
        run=RunConfig(root=str(tmp_path), progress=False),
        model=ModelConfig.model_validate(
            {"core": {"n_layers": 1, "d_model": 16, "n_heads": 1, "d_ff": 32, "memory_length": 8}}
        ),
    )
    run = rlformer.train(cfg, ["ppo.total_steps=512", "eval.episodes=2"])
    assert run.directory.is_dir() and run.directory.parent == tmp_path
    assert run.result.env_steps >= 512 and run.config.ppo.total_steps == 512
    assert (run.directory / "config.yaml").is_file()
    policy = run.policy()
    assert policy.info.training_env is not None
    assert policy.info.training_env.id == "CartPole-v1"
    report = run.evaluate(episodes=2, num_envs=2)
    assert report.summary.episodes == 2 and report.summary.mean > 0
    out = run.export(tmp_path / "export")
    assert out == tmp_path / "export" and (out / "policy.onnx").is_file()
    assert rlformer.load_policy(tmp_path / "export").info.name
