"""Import paths of the earlier layout keep working: the same module object, and a
DeprecationWarning that names the new path."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from rlformer.moved_paths import FACES, MODULES, NAMES, new_path

_CHECK = textwrap.dedent(
    """
    import importlib, json, sys, warnings
    from rlformer.moved_paths import MODULES, NAMES, FACES
    out = {}
    for old, new in sorted(MODULES.items()):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module = importlib.import_module(old)
        out[old] = [module is importlib.import_module(new),
                    [str(w.message) for w in caught if w.category is DeprecationWarning]]
    for (module, name), target in sorted(NAMES.items()):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = getattr(importlib.import_module(module), name)
        same = value is getattr(importlib.import_module(target), name)
        out[f"{module}.{name}"] = [same, [str(w.message) for w in caught]]
    print(json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def imported() -> dict[str, list]:
    """Every old path imported once in a fresh interpreter (no module cached under its name)."""
    done = subprocess.run(
        [sys.executable, "-c", _CHECK], capture_output=True, text=True, timeout=300, check=True
    )
    return json.loads(done.stdout.splitlines()[-1])


def test_every_old_module_path_is_the_module_at_its_new_path_and_warns(imported) -> None:
    for old, new in MODULES.items():
        same, warnings = imported[old]
        assert same, old
        assert f"{old} has moved to {new}" in warnings, (old, warnings)


def test_names_that_left_a_module_are_read_from_their_new_module_with_a_warning(imported):
    for (module, name), target in NAMES.items():
        same, warnings = imported[f"{module}.{name}"]
        assert same, (module, name)
        assert f"{module}.{name} has moved to {target}.{name}" in warnings


def test_the_import_statements_of_the_earlier_layout_work() -> None:
    """What users' scripts and the docs of the earlier layout wrote."""
    code = textwrap.dedent(
        """
        import warnings
        warnings.simplefilter("error", DeprecationWarning)
        from rlformer.config import load_config
        from rlformer.policies import load_policy
        for statement in [
            "from rlformer.training import train, resume, build_model",
            "from rlformer.config import PPOConfig",
            "from rlformer.models.actor_critic import ActorCritic",
            "from rlformer.runs import RunLock",
            "from rlformer.algos.ppo import ALGORITHM",
            "import rlformer.policies.export",
        ]:
            try:
                exec(statement)
            except DeprecationWarning as warning:
                print("warned:", warning)
            else:
                raise SystemExit(f"no warning: {statement}")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("warned:") == 6
    assert "rlformer.training has moved to rlformer.runs.training" in done.stdout
    assert "rlformer.runs.RunLock has moved to rlformer.runs.directory.RunLock" in done.stdout


def test_a_moved_package_takes_its_unlisted_submodules_along() -> None:
    assert new_path("rlformer.models.some_module") == "rlformer.networks.some_module"
    assert new_path("rlformer.networks.encoders") is None
    assert set(FACES) <= {
        "rlformer.runs",
        "rlformer.algos.ppo",
        "rlformer.algos.dt",
        "rlformer.algos.odt",
    }
