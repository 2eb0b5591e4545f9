"""The algorithms a run config can name, each with its declaration.

Algorithms are found through the ``rlformer.algorithms`` entry-point group: each entry names an
:class:`~rlformer.config.sections.spec.AlgorithmSpec` (rlformer's own are declared in its
``pyproject.toml``; a separate package adds one the same way). Adding an algorithm ``foo``:

1. a package (``rlformer/algos/foo/`` for rlformer's own) holding ``config.py``: the ``foo``
   section as a :class:`~rlformer.config.sections.base.StrictModel` (every field with a default
   and a description) and ``FOO = AlgorithmSpec(...)``: the shared sections it reads and, in one
   line each, why it ignores the others, and the ``"module:attr"`` paths of its algorithm,
   policy loader and export step. No torch and no algorithm code in that module, since
   :mod:`rlformer.config` loads it;
2. the entry point ``foo = "package.config:FOO"``. The run config's ``algo`` values and ``foo``
   section, the refusal of keys it ignores, ``rlformer config-doc``, checkpoints, policies,
   export and sweeps all follow from it.

Code outside an installed package, or a test, may :func:`register` a declaration while it runs
and :func:`unregister` it again: :func:`rlformer.config.build_config` validates against the
algorithms registered when it is called.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from rlformer.config.sections.shared import SHARED_SECTIONS
from rlformer.config.sections.spec import AlgorithmSpec

ENTRY_POINT_GROUP = "rlformer.algorithms"


class NoAlgorithmsInstalled(RuntimeError):
    """The package's entry points are missing: its code is imported without its installed
    metadata (a source tree on ``sys.path`` that was never installed)."""


"""Installed algorithms are registered by their declarations' ``rank``: ``rlformer config-doc``
lists them in that order, and the first is the default ``algo``."""

_TOP_LEVEL_KEYS = ("algo", "preset")
_REGISTERED: dict[str, AlgorithmSpec] = {}
_LOADED = False


def _section_problems(spec: AlgorithmSpec, others: dict[str, AlgorithmSpec]) -> list[str]:
    """What is wrong with the shared and foreign sections ``spec`` says it reads or ignores."""
    problems = []
    whole = {path for path in spec.unread if "." not in path}
    for key in SHARED_SECTIONS:
        if (key in spec.reads) == (key in whole):
            problems.append(
                f"say whether it reads the shared {key} section: list it in reads, or give "
                "the reason it does not in unread"
            )
    for path, reason in spec.unread.items():
        if path.partition(".")[0] not in SHARED_SECTIONS:
            problems.append(f"unread names {path}, which is no shared section or key of one")
        elif not reason.strip():
            problems.append(f"unread gives no reason for {path}")
    foreign = {name for name, other in others.items() if other.section is not None}
    for key in spec.reads:
        if key not in SHARED_SECTIONS and key not in foreign:
            problems.append(f"reads {key}, which is neither a shared nor a registered section")
    return problems


def declaration_problems(spec: AlgorithmSpec, others: dict[str, AlgorithmSpec]) -> list[str]:
    """Why ``spec`` cannot join the algorithms ``others`` (empty when it can)."""
    problems = []
    if not spec.name.isidentifier() or spec.name in (*SHARED_SECTIONS, *_TOP_LEVEL_KEYS):
        problems.append("its name must be an identifier that names no other top-level key")
    if spec.name in others:
        problems.append("an algorithm of that name is registered")
    if spec.section is not None and not spec.unread_reason.strip():
        problems.append(
            "unread_reason must say what its section configures, for algorithms that ignore it"
        )
    return problems + _section_problems(spec, others)


def register(spec: AlgorithmSpec) -> AlgorithmSpec:
    """Make ``spec`` a value of ``algo`` (and its section a key of the run config)."""
    _load_installed()
    problems = declaration_problems(spec, _REGISTERED)
    if problems:
        raise ValueError(f"algorithm {spec.name!r}: " + "; ".join(problems))
    _REGISTERED[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Remove a registered algorithm, unless another one reads its section."""
    if name not in _REGISTERED:
        raise ValueError(f"no algorithm {name!r} is registered")
    readers = [spec.name for spec in _REGISTERED.values() if name in spec.reads]
    if readers:
        raise ValueError(f"algorithm {name!r}: {', '.join(readers)} read its section")
    del _REGISTERED[name]


def registered() -> tuple[AlgorithmSpec, ...]:
    """The algorithms a run config can name now: the installed ones, then those registered."""
    _load_installed()
    return tuple(_REGISTERED.values())


def algorithm_spec(name: str) -> AlgorithmSpec:
    """The declaration of algorithm ``name`` (KeyError when none is registered)."""
    _load_installed()
    return _REGISTERED[name]


def spec_for_kind(kind: str) -> AlgorithmSpec | None:
    """The algorithm whose checkpoints have ``kind`` and that says how to load them."""
    for spec in registered():
        if spec.kind == kind and spec.policy_loader is not None:
            return spec
    return None


def load_attr(path: str) -> Any:
    """The object a ``"module:attr"`` path of a declaration names."""
    module, _, attr = path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _load_installed() -> None:
    """Register the installed algorithms' declarations, once (before any registered in code)."""
    global _LOADED
    if _LOADED:
        return
    installed = []
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        spec = entry.load()
        if not isinstance(spec, AlgorithmSpec):
            raise TypeError(f"entry point {ENTRY_POINT_GROUP}:{entry.name} is no AlgorithmSpec")
        installed.append(spec)
    if not installed:
        raise NoAlgorithmsInstalled(
            f"no algorithm is installed (no {ENTRY_POINT_GROUP} entry points): rlformer runs from "
            "an installed package; in a clone, `make install` or `pip install -e .`"
        )
    _LOADED = True
    earlier = dict(_REGISTERED)
    _REGISTERED.clear()
    for spec in sorted(installed, key=lambda s: (s.rank, s.name)):
        register(spec)
    for spec in earlier.values():
        register(spec)


def unread_paths(spec: AlgorithmSpec, specs: tuple[AlgorithmSpec, ...]) -> dict[str, str]:
    """Every section or key a run of ``spec`` never reads, with the reason: those it declares,
    then the sections of the other algorithms of ``specs`` that it does not read."""
    paths = dict(spec.unread)
    for other in specs:
        if other is not spec and other.section is not None and other.name not in spec.reads:
            paths[other.name] = other.unread_reason
    return paths
