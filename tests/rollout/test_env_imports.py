"""``env.imports`` entries: modules are imported, ``module:function`` entries are called once per
process (packages such as MinAtar register their ids only when asked), and problems are one
line; saved configs that would call a function need the user's trust."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlformer.config import ConfigError, EnvConfig, load_config
from rlformer.rollout import env_factory
from rlformer.rollout.env_factory import EnvError, env_from_config, import_env_modules
from rlformer.runs.checkpoints import UnsafeCheckpointError, refuse_saved_calls

REGISTERING_MODULE = """\
import gymnasium as gym

CALLS = []
NOT_A_FUNCTION = 3


def register():
    CALLS.append(1)
    gym.register("LateRegistered-v0", entry_point="gymnasium.envs.classic_control:CartPoleEnv")


def broken():
    raise RuntimeError("no licence found\\nsecond line")
"""


@pytest.fixture
def late_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module (unique per test) whose ``register`` adds an id only when called."""
    name = f"late_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(REGISTERING_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)
    env_factory._CALLED.difference_update({e for e in env_factory._CALLED if e.startswith(name)})


def test_function_entry_is_called_once_per_process(late_module: str) -> None:
    entry = f"{late_module}:register"
    cfg = EnvConfig(id="LateRegistered-v0", imports=[entry])
    env_from_config(cfg).close()
    env_from_config(cfg).close()  # every env build runs the imports; the call happens once
    import_env_modules([entry, "gymnasium"])
    assert importlib.import_module(late_module).CALLS == [1]


@pytest.mark.parametrize(
    ("attribute", "message"),
    [
        ("regster", "module '{m}' has no attribute 'regster'; check the spelling"),
        ("NOT_A_FUNCTION", "'NOT_A_FUNCTION' is not callable (type int)"),
        ("broken", "calling it failed with RuntimeError: no licence found"),
    ],
    ids=["missing", "not-callable", "raises"],
)
def test_bad_function_entry_is_one_line_naming_it(
    late_module: str, attribute: str, message: str
) -> None:
    entry = f"{late_module}:{attribute}"
    with pytest.raises(EnvError) as err:
        import_env_modules([entry])
    text = str(err.value)
    assert text.startswith(f"env.imports entry {entry!r}: ")
    assert message.format(m=late_module) in text and "\n" not in text


def test_missing_module_of_a_function_entry_says_what_to_install() -> None:
    with pytest.raises(EnvError, match=r"no module named 'nosuchpkg_xyz'\); install"):
        import_env_modules(["nosuchpkg_xyz.gym:register_envs"])


@pytest.mark.parametrize("entry", ["minatar.gym:", ":register", "a b", "pkg:f:g", "pkg-x"])
def test_malformed_entries_are_config_errors(entry: str) -> None:
    with pytest.raises(ConfigError, match="neither a module"):
        load_config(None, [f"env.imports=[{entry!r}]"])


def test_unknown_minatar_id_says_which_import_registers_it() -> None:
    with pytest.raises(EnvError, match=r"env.imports: \['minatar.gym:register_envs'\]"):
        env_from_config(EnvConfig(id="MinAtar/NoSuchGame-v1"))


def test_saved_function_entries_need_trust_plain_modules_do_not() -> None:
    refuse_saved_calls(EnvConfig(imports=["popgym", "minigrid"]), "ckpt.pt", trust=False)
    refuse_saved_calls(None, "ckpt.pt", trust=False)
    saved = EnvConfig(imports=["popgym", "minatar.gym:register_envs"])
    refuse_saved_calls(saved, "ckpt.pt", trust=True)
    with pytest.raises(UnsafeCheckpointError) as err:
        refuse_saved_calls(saved, "ckpt.pt", trust=False)
    text = str(err.value)
    assert "'minatar.gym:register_envs'" in text and "--trust-checkpoint" in text
    assert text.startswith("ckpt.pt: ") and "\n" not in text
