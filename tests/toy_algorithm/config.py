"""The toy's config section."""

from __future__ import annotations

from pydantic import Field

from rlformer.config.sections.base import StrictModel


class ToyConfig(StrictModel):
    """Hill climbing on the weights of a linear policy."""

    iterations: int = Field(8, ge=1, description="Candidates tried.")
    episodes: int = Field(2, ge=1, description="Episodes that score each candidate.")
    noise: float = Field(0.5, gt=0, description="Std of the perturbation of the weights.")
