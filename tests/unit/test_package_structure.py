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


# Layers that act, store or evaluate never reach up into training, the algorithms or the command
# line: a trained policy must be usable without them.
LOWER_LAYERS = (
    "rlformer.core",
    "rlformer.networks",
    "rlformer.data",
    "rlformer.rollout",
    "rlformer.evaluation",
    "rlformer.policies",
    "rlformer.export",
    "rlformer.serve",
)
UPPER_LAYERS = ("rlformer.runs.training", "rlformer.algos", "rlformer.cli")

# What each package above the shared layers may import besides itself: only downward.
SHARED = (
    "rlformer.core",
    "rlformer.config",
    "rlformer.networks",
    "rlformer.data",
    "rlformer.rollout",
    "rlformer.learners",
    "rlformer.policies",
    "rlformer.evaluation",
    "rlformer.export",
    "rlformer.extras",
    "rlformer.moved_paths",
)
ALLOWED_BELOW = {
    "rlformer.runs": SHARED,
    "rlformer.algos.ppo": (*SHARED, "rlformer.runs"),
    "rlformer.algos.dt": (*SHARED, "rlformer.runs"),
    "rlformer.algos.odt": (*SHARED, "rlformer.runs", "rlformer.algos.dt"),  # DT, fine-tuned online
}


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


def imports_not_downward(graph: dict[str, set[str]]) -> list[str]:
    """``module -> target`` where an algorithm's package or the run lifecycle imports anything
    but itself and the packages below it (the top package, for its version, is below all)."""
    problems = []
    for package, below in ALLOWED_BELOW.items():
        for module, targets in graph.items():
            if not _within(module, (package,)):
                continue
            problems += [
                f"{module} -> {target}"
                for target in targets
                if target != "rlformer" and not _within(target, (package, *below))
            ]
    return sorted(problems)


# Besides the algorithms' packages, only these may name an algorithm: the layout's compatibility
# table of moved paths, and the typed API on top, which declares the built-in algorithms'
# sections and hands the config package its model by registration.
NAMING_ALGORITHMS = ("rlformer.algos", "rlformer.moved_paths", "rlformer.api")


def generic_modules_naming_an_algorithm(graph: dict[str, set[str]]) -> list[str]:
    """Modules outside :data:`NAMING_ALGORITHMS` that import or load an algorithm's package."""
    return sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if not _within(module, NAMING_ALGORITHMS)
        for target in targets
        if _within(target, ("rlformer.algos",)) and target != "rlformer.algos"
    )


def test_no_lower_layer_imports_training_algos_or_the_cli():
    assert upward_imports(import_graph()) == []


def test_the_algorithms_and_the_run_lifecycle_import_only_downward():
    assert imports_not_downward(import_graph()) == []


def test_no_generic_module_imports_or_loads_an_algorithm():
    assert generic_modules_naming_an_algorithm(import_graph()) == []


def test_strings_that_load_a_module_count_as_imports(tmp_path):
    """The checks see ``importlib`` loads and ``module:attr`` paths, not only import lines."""
    root = tmp_path / "rlformer"
    _write(root, "__init__.py", "")
    _write(root, "algos/__init__.py", "")
    _write(root, "algos/toy.py", "X = 1\n")
    _write(root, "runs/__init__.py", "")
    _write(
        root, "runs/a.py", "import importlib\nM = importlib.import_module('rlformer.algos.toy')\n"
    )
    _write(root, "runs/b.py", "SPEC = 'rlformer.algos.toy:X'\n")
    graph = import_graph(root)
    assert graph["rlformer.runs.a"] == {"rlformer.algos.toy"}
    assert imports_not_downward(graph) == [
        "rlformer.runs.a -> rlformer.algos.toy",
        "rlformer.runs.b -> rlformer.algos.toy",
    ]
    assert generic_modules_naming_an_algorithm(graph) == [
        "rlformer.runs.a -> rlformer.algos.toy",
        "rlformer.runs.b -> rlformer.algos.toy",
    ]


def test_an_upward_import_inside_a_function_is_found(tmp_path):
    root = tmp_path / "rlformer"
    _write(root, "__init__.py", "")
    _write(root, "algos/__init__.py", "")
    _write(root, "algos/ppo.py", "")
    _write(root, "networks/__init__.py", "")
    _write(root, "networks/net.py", "def load():\n    from rlformer.algos.ppo import x\n")
    _write(root, "cli.py", "import rlformer.networks.net\n")
    assert upward_imports(import_graph(root)) == ["rlformer.networks.net -> rlformer.algos.ppo"]
