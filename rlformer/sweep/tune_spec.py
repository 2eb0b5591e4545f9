"""Tune files: a base config, a search space over config keys, a budget, a metric, a scheduler.

A tune file (``configs/tune/*.yaml``)::

    name: tmaze                          # the folder is tune/tmaze unless `dir:` or --dir
    base: ../ppo_gtrxl_tmaze.yaml        # a run config (path relative to this file) or a mapping
    set: {eval.episodes: 20}             # fixed overrides, dotted paths as with --set
    space:                               # dotted config path -> values, as a sweep's axes
      ppo.learning_rate: {loguniform: [1.0e-4, 3.0e-3]}
      ppo.ent_coef: {uniform: [0.0, 0.03]}
      model.core.memory_length: [16, 32] # a list: a choice
    num_samples: 12                      # configurations tried
    seeds: 1                             # runs per configuration (run.seed = first_seed, ...)
    budget: 60000                        # env steps of each trial (its ppo.total_steps)
    metric: rollout/success_rate         # reported every iteration; what is compared
    mode: max
    scheduler: {type: asha, time: env_steps, grace_period: 10000, reduction_factor: 3}
    search: random                       # or optuna (Tune's OptunaSearch, one seed per config)

The space uses the sweep file's vocabulary: a list (a choice), named options (one option sets
several keys), ``{uniform: [lo, hi]}``, ``{loguniform: [lo, hi]}``, ``{randint: [lo, hi]}`` (hi
excluded). With ``search: random`` the draws are made here, reproducibly from ``sample_seed``, so
each trial is a sweep trial (:mod:`rlformer.sweep.spec`): validated before Ray starts, with a
fixed name and folder a restarted tune finds again. Optuna and PBT choose values while the tune
runs; their trials' configs are checked here at every choice and at both ends of every range.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from rlformer.config import (
    ConfigError,
    TrainConfig,
    build_config,
    format_validation_error,
    read_yaml,
)
from rlformer.config.sections.registry import algorithm_spec, registered
from rlformer.runs.resume import refuse_fixed_changes
from rlformer.sweep.spec import (
    DISTRIBUTIONS,
    Resources,
    Sweep,
    SweepSpec,
    _base_mapping,
    _set_path,
    _Strict,
    expand,
)

TIME_UNITS = ("env_steps", "iterations")


class AshaTune(_Strict):
    """Asynchronous successive halving: stop configurations whose metric lags at each rung."""

    type: Literal["asha"] = "asha"
    time: Literal["env_steps", "iterations"] = Field(
        "env_steps", description="Unit of grace_period: env steps or training iterations."
    )
    grace_period: int | None = Field(
        None, ge=1, description="Time every trial runs before a cut (default budget/factor^2)."
    )
    reduction_factor: float = Field(3.0, gt=1, description="Keep 1/this of trials per rung.")


class PbtTune(_Strict):
    """Population-based training: every perturbation_interval the worst quantile copies a
    better trial's checkpoint and perturbs its values (only keys a resume may change)."""

    type: Literal["pbt"] = "pbt"
    time: Literal["env_steps", "iterations"] = Field(
        "env_steps", description="Unit of perturbation_interval."
    )
    perturbation_interval: int = Field(ge=1, description="Time between exploit/explore steps.")
    quantile_fraction: float = Field(0.25, gt=0, le=0.5, description="Share copied / copying.")
    resample_probability: float = Field(0.25, ge=0, le=1, description="Redraw, not perturb.")
    synch: bool = Field(
        False,
        description="Wait at each perturbation point until every member reaches it (Tune's "
        "synchronous PBT): exploits then do not depend on which member ran faster.",
    )


class NoScheduler(_Strict):
    """Run every trial to its budget."""

    type: Literal["none"] = "none"


class TuneSpec(_Strict):
    """The validated contents of a tune file."""

    name: str = Field(min_length=1, description="Tune name (default folder tune/NAME).")
    base: str | dict[str, Any] = Field(
        default_factory=dict, description="Run config file (relative to the tune file) or map."
    )
    set: dict[str, Any] = Field(default_factory=dict, description="Fixed dotted overrides.")
    space: dict[str, list[Any] | dict[str, Any]] = Field(
        min_length=1, description="Dotted config path -> choices or a distribution."
    )
    num_samples: int = Field(8, ge=1, description="Configurations tried.")
    sample_seed: int = Field(0, ge=0, description="Seed of the draws (random search).")
    seeds: int = Field(1, ge=1, description="Runs per configuration (random search).")
    first_seed: int = Field(0, ge=0, description="run.seed of the first seed.")
    budget: int = Field(ge=1, description="Env steps per trial (its ppo.total_steps).")
    metric: str = Field("rollout/return_mean", description="Reported every iteration; compared.")
    mode: Literal["max", "min"] = Field("max", description="Whether larger metric is better.")
    scheduler: AshaTune | PbtTune | NoScheduler = Field(
        default_factory=AshaTune, discriminator="type", description="asha (default), pbt, none."
    )
    search: Literal["random", "optuna"] = Field("random", description="random or optuna.")
    resources: Resources = Field(default_factory=Resources, description="Per-trial resources.")
    max_concurrent: int = Field(0, ge=0, description="Trials at once (0: as many as fit).")
    dir: str | None = Field(None, description="Tune folder (default tune/NAME).")

    @model_validator(mode="after")
    def _consistent(self) -> TuneSpec:
        if self.scheduler.type != "none" and self.metric.startswith("eval/"):
            raise ValueError(
                f"metric {self.metric} is logged once, after training; a scheduler compares "
                "trials every iteration: use a per-iteration metric such as rollout/success_rate"
            )
        if self.search == "optuna" and self.seeds > 1:
            raise ValueError(
                "search: optuna runs one seed per configuration; set seeds: 1, or use "
                "search: random for several seeds per configuration"
            )
        if self.scheduler.type == "pbt":
            if self.search != "random":
                raise ValueError("scheduler pbt draws its own population: use search: random")
            if self.seeds > 1:
                raise ValueError(
                    "scheduler pbt: each member of the population is one run (run.seed = "
                    "first_seed + its index); set seeds: 1"
                )
        return self

    def sweep_spec(self, budget_key: str | None = None) -> SweepSpec:
        """The same trials as a random sweep (what ``search: random`` runs); ``budget_key``:
        the algorithm's key that :attr:`budget` sets."""
        budget = {} if budget_key is None else {budget_key: self.budget}
        return SweepSpec(
            name=self.name,
            base=self.base,
            set={**self.set, **budget},
            axes=self.space,
            search="random",
            num_samples=self.num_samples,
            sample_seed=self.sample_seed,
            seeds=self.seeds,
            first_seed=self.first_seed,
            metric=self.metric,
            mode=self.mode,
            resources=self.resources,
            max_concurrent=self.max_concurrent,
        )


@dataclass(frozen=True)
class Tune:
    """A parsed tune file: its spec, its folder, the base config and, for random search, the
    trials (a sweep)."""

    spec: TuneSpec
    source: Path
    directory: Path
    base: TrainConfig
    base_raw: dict[str, Any]
    sweep: Sweep | None  # random search: every trial, expanded and validated

    @property
    def native(self) -> bool:
        """Tune chooses the values while it runs (Optuna, PBT): no trial list beforehand."""
        return self.sweep is None


def load_tune(path: str | Path, directory: str | Path | None = None) -> Tune:
    """Read, validate and (random search) expand a tune file; any problem is one
    :class:`ConfigError` line."""
    path = Path(path)
    raw = read_yaml(path)
    try:
        spec = TuneSpec.model_validate(raw)
        sweep_spec = spec.sweep_spec()  # the space checked as a sweep's axes
    except ValidationError as err:
        problems = format_validation_error(err, TuneSpec).replace("\n", "; ")
        raise ConfigError(f"{path}: {problems}") from None
    folder = Path(directory or spec.dir or Path("tune") / spec.name).resolve()
    base_raw = _base_mapping(sweep_spec, path)
    for key, value in sweep_spec.set.items():
        _set_path(base_raw, key, value, f"{path}: set")
    budget_key = _budget_key(_base_config(base_raw, path), path)
    if budget_key in spec.set or budget_key in spec.space:
        raise ConfigError(f"{path}: {budget_key} is the trials' `budget`; set budget instead")
    sweep_spec = spec.sweep_spec(budget_key)
    _set_path(base_raw, budget_key, spec.budget, f"{path}: budget")
    base = _base_config(base_raw, path)
    if spec.scheduler.type == "pbt":
        _refuse_unresumable(spec, path)
    if spec.search == "random" and spec.scheduler.type != "pbt":
        sweep = Sweep(sweep_spec, path, folder, expand(sweep_spec, path, folder))
        return Tune(spec, path, folder, base, base_raw, sweep)
    _check_space_ends(spec, path, base_raw, folder)
    return Tune(spec, path, folder, base, base_raw, None)


def cfg_value(cfg: TrainConfig, key: str) -> Any:
    """The value of a dotted key (``ppo.total_steps``) of a validated config."""
    value: Any = cfg
    for part in key.split("."):
        value = getattr(value, part)
    return value


def _base_config(base_raw: dict[str, Any], path: Path) -> TrainConfig:
    try:
        return build_config(copy.deepcopy(base_raw))
    except ConfigError as err:
        raise ConfigError(f"{path}: base: {str(err).replace(chr(10), '; ')}") from None


def _budget_key(base: TrainConfig, path: Path) -> str:
    """The key a trial's env-step budget sets: the base algorithm's length key."""
    algo = algorithm_spec(base.algo)
    if algo.planned_iterations is None or algo.budget_unit != "env_steps":
        able = [
            s.name for s in registered() if s.planned_iterations and s.budget_unit == "env_steps"
        ]
        raise ConfigError(
            f"{path}: rlformer tune gives trials budgets in env steps, which algo {base.algo} "
            f"does not count ({algo.budget_unit}); tunable: {', '.join(able)}"
        )
    return algo.budget_key


def space_keys(axis_key: str, axis: list[Any] | dict[str, Any]) -> list[str]:
    """The config keys an axis sets (a named axis: every option's keys)."""
    if is_named(axis):
        return sorted({k for overrides in axis.values() for k in overrides})
    return [axis_key]


def is_named(axis: list[Any] | dict[str, Any]) -> bool:
    return isinstance(axis, dict) and not (len(axis) == 1 and next(iter(axis)) in DISTRIBUTIONS)


def _refuse_unresumable(spec: TuneSpec, path: Path) -> None:
    """PBT continues a trial from another's checkpoint with new values: only keys that
    ``rlformer train --resume --set`` may change can be searched."""
    refused = []
    for axis_key, axis in spec.space.items():
        for key in space_keys(axis_key, axis):
            try:
                refuse_fixed_changes([key], "")
            except ConfigError:
                refused.append(key)
    if refused:
        raise ConfigError(
            f"{path}: scheduler pbt changes values mid-run, as a resume does, and a resume "
            f"cannot change {', '.join(refused)}; search those with scheduler asha"
        )


def _check_space_ends(spec: TuneSpec, path: Path, base_raw: dict[str, Any], folder: Path) -> None:
    """Values chosen while the tune runs: build the config at every choice and both ends of
    every range, one key at a time, so a bad value fails here and not in trial 37."""
    for axis_key, axis in spec.space.items():
        for label, overrides in _extremes(axis_key, axis):
            raw = copy.deepcopy(base_raw)
            for key, value in overrides.items():
                _set_path(raw, key, value, f"{path}: space {axis_key}")
            _set_path(raw, "run.root", str(folder / "trials" / "check"), str(path))
            try:
                build_config(raw)
            except ConfigError as err:
                raise ConfigError(
                    f"{path}: space {axis_key} = {label}: {str(err).replace(chr(10), '; ')}"
                ) from None


def _extremes(axis_key: str, axis: list[Any] | dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    if isinstance(axis, list):
        return [(repr(v), {axis_key: v}) for v in axis]
    if is_named(axis):
        return [(name, dict(overrides)) for name, overrides in axis.items()]
    ((kind, (low, high)),) = axis.items()
    ends = [low, high - 1] if kind == "randint" else [low, high]
    return [(repr(v), {axis_key: v}) for v in ends]


def time_value(unit: str, env_steps: int, cfg: TrainConfig) -> int:
    """A duration in env steps expressed in ``unit`` (iterations rounded up)."""
    if unit == "env_steps":
        return env_steps
    spec = algorithm_spec(cfg.algo)
    planned = spec.planned_iterations(cfg)  # type: ignore[misc]
    total = int(cfg_value(cfg, spec.budget_key))
    return math.ceil(env_steps * planned / total)


TIME_ATTRS = {"env_steps": "env_steps", "iterations": "iteration"}
"""The key of each time unit in what a trial reports to Tune."""
