"""Evaluation suites: a named list of tasks read from ``configs/eval/*.yaml``.

A suite fixes what "evaluated on the memory tasks" means — which envs, with which settings,
how many episodes and seeds — so numbers from different runs and machines are comparable::

    name: memory
    episodes: 20
    seeds: 3
    tasks:
      - {env: rlformer/TMaze-v0, kwargs: {length: 10}, label: tmaze-10}
      - {env: rlformer/TMaze-v0, kwargs: {length: 50}, label: tmaze-50}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from rlformer.config import (
    ConfigError,
    EnvConfig,
    StrictModel,
    WrapperConfig,
    format_validation_error,
    read_yaml,
)


class SuiteTask(StrictModel):
    """One task of a suite."""

    env: str = Field(description="Gymnasium env id.")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="Passed to gymnasium.make.")
    max_episode_steps: int | None = Field(None, ge=1, description="Override the time limit.")
    imports: list[str] = Field(
        default_factory=list, description="Modules imported first (they register env ids)."
    )
    wrappers: list[WrapperConfig] = Field(
        default_factory=list,
        description="Wrappers in order, as env.wrappers (default: none, or see env_config).",
    )
    label: str | None = Field(None, description="Name in reports (default: the env id).")
    target_returns: list[float] | None = Field(
        None, description="Return-conditioned agents: targets for this task (default: the agent's)."
    )

    @property
    def name(self) -> str:
        return self.label or self.env

    def env_config(self, trained_on: EnvConfig | None = None) -> EnvConfig:
        """The task's env; without imports / wrappers of its own it takes those of the env
        the agent was trained on (``trained_on``), which made the observations it knows."""
        imports, wrappers = self.imports, self.wrappers
        if trained_on is not None and not imports and not wrappers:
            imports, wrappers = trained_on.imports, trained_on.wrappers
        return EnvConfig(
            id=self.env,
            kwargs=self.kwargs,
            max_episode_steps=self.max_episode_steps,
            imports=imports,
            wrappers=wrappers,
        )


class Suite(StrictModel):
    """A named set of tasks with the episode and seed counts they are evaluated with."""

    name: str
    description: str = ""
    episodes: int = Field(20, ge=1, description="Episodes per seed and task.")
    seeds: int = Field(3, ge=1, description="Independent seeds per task.")
    tasks: list[SuiteTask] = Field(min_length=1)


def load_suite(path: str | Path) -> Suite:
    """Read and validate a suite file; problems become one-line :class:`ConfigError` messages."""
    raw = read_yaml(path)
    try:
        suite = Suite.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(
            f"{path}: " + format_validation_error(err, Suite).replace("\n", f"\n{path}: ")
        ) from None
    labels = [task.name for task in suite.tasks]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise ConfigError(f"{path}: task labels must be unique, repeated: {', '.join(repeated)}")
    return suite
