"""The benchmark scripts are files to run, not modules of a package: their tests load them by
path."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1]


def load_script(name: str) -> ModuleType:
    """``benchmarks/NAME.py`` as the module ``bench_NAME`` (a bare name such as ``dt`` could
    be another module on the path), registered in ``sys.modules``, where the script's
    dataclasses look their module up."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
