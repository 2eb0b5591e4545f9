"""How an algorithm declares itself: its part of the run config, and where its parts live.

A declaration names the algorithm's own section, the shared sections
(:data:`~rlformer.config.sections.shared.SHARED_SECTIONS`) it reads and, in one line each, why it
ignores the others: a key set in an ignored section is refused with that reason instead of
training something other than what was asked. :mod:`rlformer.config.sections.registry` lists the
declarations and says how to add one. Nothing here imports torch or an algorithm's code, since
:mod:`rlformer.config`, which nearly every module imports, reads these declarations.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rlformer.config.sections.base import Section


@dataclass(frozen=True, eq=False)
class AlgorithmSpec:
    """One algorithm: its part of the run config, and the ``"module:attr"`` paths of its parts
    (compared by identity).

    The paths are loaded only when they are used, so that reading a config never imports torch
    or an algorithm's code; generic code (the run loop, policy loading, export, sweeps) reaches
    an algorithm only through these fields and never names one.
    """

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

    rank: int = 100
    """Where it is listed among the installed algorithms (lowest first: ``rlformer config-doc``);
    the lowest is the default ``algo``."""

    algorithm: str = ""
    """``"module:attr"`` of the class the run loop drives
    (:class:`rlformer.runs.algorithm.Algorithm`)."""

    checkpoint_kind: str = ""
    """The ``kind`` entry of its checkpoints, which picks the policy loader (empty: its name)."""

    policy_loader: str | None = None
    """``"module:attr"`` of ``(checkpoint payload, name) -> Policy`` for its checkpoint kind; None
    when it writes another algorithm's kind (ODT writes ``dt`` checkpoints)."""

    budget_key: str = ""
    """The key that says how long a run trains (``ppo.total_steps``), named when a finished run
    is resumed and set by sweeps' budgets."""

    budget_unit: str = "env_steps"
    """What :attr:`budget_key` counts: ``env_steps`` (online), or another unit (``gradient steps``)
    for which ``rlformer tune``'s env-step budgets do not apply."""

    export_step: str | None = None
    """``"module:attr"`` of ``(policy) -> step module`` for ``rlformer export`` of its policies
    (:mod:`rlformer.export.writer`); None: its policies cannot be exported."""

    export_loader: str | None = None
    """``"module:attr"`` of ``(directory) -> Policy`` for its exports that are more than one graph
    (a team's: one graph per policy group, described by ``team.json``); None: one graph."""

    network_policy: str | None = None
    """``"module:attr"`` of ``(object) -> Policy | None``: a policy for one of its bare networks
    (a training run's current weights), None for any other object."""

    planned_iterations: Callable[[Any], int] | None = None
    """Iterations a run of the given config makes (sweeps' and tuning's time axis); None: it
    cannot be swept."""

    @property
    def kind(self) -> str:
        """Its checkpoints' ``kind``."""
        return self.checkpoint_kind or self.name


AlgoConfigSpec = AlgorithmSpec
"""Alias of :class:`AlgorithmSpec`."""
