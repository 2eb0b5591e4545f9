"""How an algorithm declares its part of the run config.

A declaration names the algorithm's own section, the shared sections
(:data:`~rlformer.config_sections.shared.SHARED_SECTIONS`) it reads and, in one line each, why it
ignores the others: a key set in an ignored section is refused with that reason instead of
training something other than what was asked. :mod:`rlformer.config_sections.registry` lists the
declarations and says how to add one. Nothing here imports torch or an algorithm's code, since
:mod:`rlformer.config`, which nearly every module imports, reads these declarations.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rlformer.config_sections.base import Section


@dataclass(frozen=True, eq=False)
class AlgoConfigSpec:
    """One algorithm's part of the run config (compared by identity)."""

    name: str
    """The value of ``algo`` that selects it, and the key of its own section."""

    summary: str
    """A few words for the description of ``algo`` (``online GTrXL-PPO``)."""

    section: Section | None
    """Its own section, under the key :attr:`name`; None when it has no settings of its own."""

    unread_reason: str = ""
    """What its section configures, the reason given when a run of an algorithm that does not
    read the section sets a key in it (``it configures PPO``)."""

    reads: tuple[str, ...] = ()
    """Sections it reads besides its own: shared ones, and other algorithms' (ODT reads ``dt``)."""

    unread: Mapping[str, str] = field(default_factory=dict)
    """Every shared section it does not read, or a single key of one it reads, with the reason
    (``"rollout": "an offline DT collects no rollouts"``)."""

    preset_sections: tuple[str, ...] | None = None
    """The sections of a named preset it takes; None: all of them, and ``preset: auto`` picks the
    env family's preset (the presets hold settings measured with PPO)."""

    async_sampling: bool = False
    """Whether it samples ahead with ``rollout.async_sampling``; other algorithms refuse the key."""

    check: Callable[[Any], None] | None = None
    """Rules across sections, given the validated config of a run of this algorithm; raises
    ValueError with a one-line message that names the keys."""
