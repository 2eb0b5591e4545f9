"""What every section of the run config is built from: a strict model, and the declaration of one
top-level key (its model and the line that describes it)."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Base for config sections: unknown keys are errors, assignments are re-validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


@dataclass(frozen=True)
class Section:
    """One top-level key of the run config: the model that validates it, and its description.

    The key is the declaration's: a shared section's name in
    :data:`~rlformer.config.sections.shared.SHARED_SECTIONS`, an algorithm's own section its
    ``algo`` name.
    """

    model: type[StrictModel]
    doc: str
