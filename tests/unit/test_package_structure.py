"""The package's dependencies point one way: no import circles, counting imports in functions."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.unit.import_graph import find_cycles, import_graph


def test_no_module_of_the_package_is_on_an_import_circle():
    cycles = find_cycles(import_graph())
    assert cycles == [], "import circles: " + "; ".join(" <-> ".join(c) for c in cycles)


def _write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def test_a_circle_through_an_import_inside_a_function_is_found(tmp_path):
    """The check itself can fail: two modules that import each other, one of them only when a
    function runs, plus a relative import, form one circle; a third module outside it is not
    reported."""
    root = tmp_path / "rlformer"
    _write(root, "__init__.py", "")
    _write(root, "sub/__init__.py", "")
    _write(root, "sub/a.py", "from rlformer.sub.b import thing\n")
    _write(root, "sub/b.py", "def thing():\n    from . import a\n    return a\n")
    _write(root, "c.py", "import rlformer.sub.a\n")
    graph = import_graph(root)
    assert graph["rlformer.sub.b"] == {"rlformer.sub.a"}
    assert find_cycles(graph) == [["rlformer.sub.a", "rlformer.sub.b"]]


def test_a_package_without_circles_reports_none(tmp_path):
    root = tmp_path / "rlformer"
    _write(root, "__init__.py", "")
    _write(root, "a.py", "import rlformer.b\n")
    _write(root, "b.py", "x = 1\n")
    assert find_cycles(import_graph(root)) == []


# Layers that act, store or evaluate never reach up into training or the command line:
# a trained policy must be usable without them.
LOWER_LAYERS = (
    "rlformer.core",
    "rlformer.models",
    "rlformer.data",
    "rlformer.rollout",
    "rlformer.evaluation",
    "rlformer.policies",
    "rlformer.serve",
)
UPPER_LAYERS = ("rlformer.training", "rlformer.algos", "rlformer.cli")


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(f"{p}.") for p in packages)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``lower -> upper`` for every import from a lower layer into training, algos or the CLI."""
    return sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if _within(module, LOWER_LAYERS)
        for target in targets
        if _within(target, UPPER_LAYERS)
    )


def test_no_lower_layer_imports_training_algos_or_the_cli():
    assert upward_imports(import_graph()) == []


def test_an_upward_import_inside_a_function_is_found(tmp_path):
    root = tmp_path / "rlformer"
    _write(root, "__init__.py", "")
    _write(root, "algos/__init__.py", "")
    _write(root, "algos/ppo.py", "")
    _write(root, "models/__init__.py", "")
    _write(root, "models/net.py", "def load():\n    from rlformer.algos.ppo import x\n")
    _write(root, "cli.py", "import rlformer.models.net\n")
    assert upward_imports(import_graph(root)) == ["rlformer.models.net -> rlformer.algos.ppo"]
