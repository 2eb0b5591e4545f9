"""The package's import graph read from source (no module is imported), for the structure tests.

Every ``import`` and ``from ... import`` counts, at module level or inside a function, since a
function-level import is still a dependency: it only moves the failure from import time to call
time. So do the loads that name a module in a string: ``importlib.import_module("a.b")`` with a
literal name, and every ``"a.b:attr"`` string (the paths an algorithm's declaration gives, which
the registry loads).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "rlformer"


def module_name(path: Path, root: Path = PACKAGE_ROOT) -> str:
    """``rlformer/rollout/collector.py`` -> ``rlformer.rollout.collector`` (a package's
    ``__init__.py`` is the package itself)."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _absolute(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """The absolute module a ``from`` import names, resolving leading dots."""
    if node.level == 0:
        return node.module or ""
    base = importer.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _attribute_path_module(text: str, known: set[str]) -> set[str]:
    """The package's module a ``module:attr`` string names (none for other strings)."""
    head, colon, _ = text.partition(":")
    return {head} if colon and head in known else set()


def _is_import_module_call(node: ast.AST) -> bool:
    """``importlib.import_module("literal")`` or ``import_module("literal")``."""
    if not isinstance(node, ast.Call) or not node.args:
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    first = node.args[0]
    return (
        name == "import_module" and isinstance(first, ast.Constant) and isinstance(first.value, str)
    )


def imported_modules(path: Path, known: set[str], root: Path = PACKAGE_ROOT) -> set[str]:
    """The modules of ``known`` that the file at ``path`` imports, anywhere in it.

    ``from pkg import name`` counts as importing ``pkg.name`` when that is a module, else ``pkg``.
    """
    importer = module_name(path, root)
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.update(_attribute_path_module(node.value, known))
        if _is_import_module_call(node):
            found.update(_attribute_path_module(node.args[0].value + ":", known))  # type: ignore[attr-defined]
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(node, importer, is_package)
            submodules = {f"{target}.{alias.name}" for alias in node.names} & known
            found.update(submodules)
            if len(submodules) < len(node.names):  # some names are defined in ``target``
                found.add(target)
    # A dotted import of a submodule also imports its parents, but those edges are the
    # package's faces (``__init__``), not dependencies of this file's code: keep exact names.
    return {name for name in found if name in known and name != importer}


def import_graph(root: Path = PACKAGE_ROOT) -> dict[str, set[str]]:
    """Module -> modules of the package it imports."""
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    known = set(files)
    return {name: imported_modules(path, known, root) for name, path in files.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (or a module importing itself),
    each as a sorted list: the import circles (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1 or node in graph.get(node, ()):
                    cycles.append(sorted(group))
    return cycles
