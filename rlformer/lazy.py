"""Package namespaces that import their names on first use (PEP 562).

A package whose ``__init__`` re-exports torch-backed classes would import torch for anyone who
imports a light submodule of it (a version string, an exception class): Python runs the
package's ``__init__`` first. The command line checks its input, reports bad input and answers
``--help`` before torch loads (about 2.5 s of a process's start here), so such packages name
where each export lives and load it when it is first read.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def exports(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports each name of ``homes`` (name ->
    module) on first access and keeps it in the package's namespace, so the next read is a
    plain attribute; any other name raises :class:`AttributeError` as usual."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
