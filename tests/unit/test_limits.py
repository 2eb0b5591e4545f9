"""Size limits that keep the package readable: short files, short functions, few loose modules,
no import circles (the last in test_package_structure, counting loads inside functions)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.unit.import_graph import PACKAGE_ROOT

MAX_FILE_LINES = 500
MAX_FUNCTION_BODY_LINES = 60
MAX_LOOSE_MODULES = 3


def _body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines of a function's body, its docstring not counted."""
    body = node.body
    first = body[0]
    has_doc = (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    )
    start = body[1].lineno if has_doc and len(body) > 1 else first.lineno
    return (node.end_lineno or start) - start + 1


def long_files(root: Path = PACKAGE_ROOT) -> list[str]:
    return [
        f"{path.relative_to(root.parent)}: {n} lines"
        for path in sorted(root.rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > MAX_FILE_LINES
    ]


def long_functions(root: Path = PACKAGE_ROOT) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if (n := _body_lines(node)) > MAX_FUNCTION_BODY_LINES:
                found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name}: {n}")
    return found


def loose_modules(root: Path = PACKAGE_ROOT) -> list[str]:
    """Modules directly under the package, besides its ``__init__``."""
    return sorted(p.name for p in root.glob("*.py") if p.name != "__init__.py")


def test_no_file_of_the_package_is_over_500_lines() -> None:
    assert long_files() == []


def test_no_function_body_is_over_60_lines() -> None:
    assert long_functions() == []


def test_at_most_three_modules_lie_loose_at_the_top() -> None:
    assert len(loose_modules()) <= MAX_LOOSE_MODULES, loose_modules()


def test_the_limits_catch_what_they_count(tmp_path: Path) -> None:
    root = tmp_path / "rlformer"
    root.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    (root / "big.py").write_text(f'def f():\n    """Doc."""\n{body}\n' + "\n" * 440)
    for name in ("a", "b", "c"):
        (root / f"{name}.py").write_text("")
    assert long_files(root) == ["rlformer/big.py: 503 lines"]
    assert long_functions(root) == ["rlformer/big.py:1 f: 61"]
    assert loose_modules(root) == ["a.py", "b.py", "big.py", "c.py"]
