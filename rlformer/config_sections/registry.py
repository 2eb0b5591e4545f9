"""The algorithms a run config can name, each with its config declaration.

Adding an algorithm ``foo``:

1. ``rlformer/config_sections/foo.py``: the ``foo`` section as a
   :class:`~rlformer.config_sections.base.StrictModel` (every field with a default and a
   description) and ``FOO = AlgoConfigSpec(...)`` (:mod:`rlformer.config_sections.spec`): the
   shared sections it reads and, in one line each, why it ignores the others. No torch and no
   algorithm code in it, since :mod:`rlformer.config` imports it.
2. ``FOO`` appended to :data:`BUILTIN` below. The run config's ``algo`` values and ``foo``
   section, the refusal of keys it ignores and ``rlformer config-doc`` all follow from it
   (regenerate the table of docs/CONFIG.md from ``rlformer config-doc``).
3. ``rlformer/algos/foo.py`` holding ``ALGORITHM`` (:mod:`rlformer.algos.base`), which reads
   ``cfg.foo``.

Code outside the package, or a test, may :func:`register` a declaration while it runs and
:func:`unregister` it again: :func:`rlformer.config.build_config` validates against the
algorithms registered when it is called.
"""

from __future__ import annotations

from rlformer.config_sections.dt import DT
from rlformer.config_sections.odt import ODT
from rlformer.config_sections.ppo import PPO
from rlformer.config_sections.shared import SHARED_SECTIONS
from rlformer.config_sections.spec import AlgoConfigSpec

BUILTIN: tuple[AlgoConfigSpec, ...] = (PPO, DT, ODT)
"""The shipped algorithms, in the order ``rlformer config-doc`` lists their sections; the first
is the default ``algo``."""

_TOP_LEVEL_KEYS = ("algo", "preset")
_REGISTERED: dict[str, AlgoConfigSpec] = {}


def _section_problems(spec: AlgoConfigSpec, others: dict[str, AlgoConfigSpec]) -> list[str]:
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


def declaration_problems(spec: AlgoConfigSpec, others: dict[str, AlgoConfigSpec]) -> list[str]:
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


def register(spec: AlgoConfigSpec) -> AlgoConfigSpec:
    """Make ``spec`` a value of ``algo`` (and its section a key of the run config)."""
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


def registered() -> tuple[AlgoConfigSpec, ...]:
    """The algorithms a run config can name now, in registration order."""
    return tuple(_REGISTERED.values())


def unread_paths(spec: AlgoConfigSpec, specs: tuple[AlgoConfigSpec, ...]) -> dict[str, str]:
    """Every section or key a run of ``spec`` never reads, with the reason: those it declares,
    then the sections of the other algorithms of ``specs`` that it does not read."""
    paths = dict(spec.unread)
    for other in specs:
        if other is not spec and other.section is not None and other.name not in spec.reads:
            paths[other.name] = other.unread_reason
    return paths


for _spec in BUILTIN:
    register(_spec)
