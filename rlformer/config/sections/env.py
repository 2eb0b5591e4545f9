"""The ``env`` section: which Gymnasium task to build, and the wrappers around it."""

from __future__ import annotations

import re
from typing import Any

from pydantic import ConfigDict, Field, field_validator

from rlformer.config.sections.base import StrictModel

_IMPORT_PATH = r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$"
_IMPORT_ENTRY = re.compile(r"^[A-Za-z_][\w.]*(:[A-Za-z_][\w.]*)?$")


def calls_function(entry: str) -> bool:
    """Whether an ``env.imports`` entry calls a function (``module:function``), not only
    imports a module: such entries from a checkpoint need the user's trust."""
    return ":" in entry


class WrapperConfig(StrictModel):
    """One wrapper applied to every env: ``{class: module:Class, kwargs: {...}}``."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, populate_by_name=True, serialize_by_alias=True
    )

    cls: str = Field(
        alias="class",
        pattern=_IMPORT_PATH,
        description="Wrapper as module:Class, e.g. minigrid.wrappers:ImgObsWrapper.",
    )
    kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments of the wrapper (after the env)."
    )
    unwrapped: bool = Field(
        False,
        description="Wrap the bare env (inside gymnasium.make's time limit), as popgym's "
        "wrappers require; only for the first wrappers of the list.",
    )


class EnvConfig(StrictModel):
    """Which Gymnasium task to run."""

    id: str = Field(
        "CartPole-v1",
        description="Gymnasium env id (CartPole-v1, rlformer/TMaze-v0) or module:EnvId.",
    )
    kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments passed to gymnasium.make."
    )
    max_episode_steps: int | None = Field(
        None, ge=1, description="Override the env's time limit (null keeps the registered one)."
    )
    imports: list[str] = Field(
        default_factory=list,
        description="Modules imported first to register envs, e.g. [popgym, minigrid, mypkg]; "
        "module:function also calls that function once per process, e.g. "
        "[minatar.gym:register_envs] (from a checkpoint only with --trust-checkpoint).",
    )
    wrappers: list[WrapperConfig] = Field(
        default_factory=list,
        description="Wrappers applied in order: [{class: module:Class, kwargs: {...}}, ...]; "
        "unwrapped: true wraps the bare env (popgym's wrappers need it; first in the list only).",
    )
    action_mask: str | None = Field(
        None,
        pattern=r"^(info|obs|method):\S+$",
        description="Where the env's action masks come from: info:KEY, obs:KEY (a Dict "
        "observation key, removed from the policy's input) or method:NAME (sb3-contrib: "
        "method:action_masks); Discrete and MultiDiscrete actions.",
    )

    @field_validator("imports")
    @classmethod
    def _module_or_function(cls, imports: list[str]) -> list[str]:
        for entry in imports:
            if not _IMPORT_ENTRY.match(entry):
                raise ValueError(
                    f"entry {entry!r} is neither a module (mypkg.envs) nor module:function "
                    "(minatar.gym:register_envs)"
                )
        return imports

    @field_validator("wrappers")
    @classmethod
    def _unwrapped_first(cls, wrappers: list[WrapperConfig]) -> list[WrapperConfig]:
        flags = [w.unwrapped for w in wrappers]
        if any(later and not earlier for earlier, later in zip(flags, flags[1:], strict=False)):
            raise ValueError(
                "wrappers with unwrapped: true must come first (they wrap the bare env)"
            )
        return wrappers
