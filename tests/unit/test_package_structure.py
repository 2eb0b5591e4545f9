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
