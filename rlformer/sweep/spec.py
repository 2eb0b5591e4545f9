"""Sweep files: a base config, tasks, axes over config keys, seeds -> a list of validated trials.

A sweep file (``configs/sweeps/*.yaml``)::

    name: gates                          # the sweep's folder is sweeps/gates unless --dir
    base: ../ppo_gtrxl_tmaze.yaml        # a run config (path relative to this file) or a mapping
    set: {ppo.total_steps: 20000}        # fixed overrides, dotted paths as with --set
    tasks:                               # optional; each task is a set of overrides
      tmaze50: {env.id: rlformer/TMaze-v0, env.kwargs.length: 50}
    axes:                                # the variants: dotted config path -> values
      model.core.gate: [gru, input]
      model.core.block: [gtrxl, trxl_i]
      arch:                              # a named axis: each option sets several keys
        gtrxl_gru: {model.core.block: gtrxl, model.core.gate: gru}
        post_ln: {model.core.block: post_ln}
    search: grid                         # grid: every combination; random: num_samples draws
    seeds: 3                             # each variant x task runs with run.seed = 0, 1, 2
    metric: rollout/success_rate         # reported to Tune each iteration (ASHA, curves)
    score: eval/success_rate             # final score per trial in the report
    resources: {cpu: 1, gpu: 0}          # Ray resources of one trial (fractions allowed)

An axis whose key is not a config path maps option names to overrides (for variants that set
several keys together, or that only make sense in some combinations). Random search draws each
axis from a list or named options (uniformly) or from ``{uniform: [lo, hi]}``,
``{loguniform: [lo, hi]}`` or ``{randint: [lo, hi]}`` (hi excluded), with ``sample_seed``.
The expansion happens here, not inside Tune, so every trial's config is validated by
:func:`rlformer.config.build_config` before any trial starts, and each trial has a fixed name
and run directory that a restarted sweep finds again.
"""

from __future__ import annotations

import copy
import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rlformer.config import (
    ConfigError,
    TrainConfig,
    build_config,
    format_validation_error,
    read_yaml,
)
from rlformer.config.sections.registry import algorithm_spec

DISTRIBUTIONS = ("uniform", "loguniform", "randint")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Resources(_Strict):
    """Ray resources reserved for one trial (its learner and, with the local backend, its envs)."""

    cpu: float = Field(1.0, gt=0, description="CPUs per trial; fractions share a core.")
    gpu: float = Field(0.0, ge=0, description="GPUs per trial; fractions share a GPU.")


class AshaSpec(_Strict):
    """Asynchronous successive halving: stop trials whose metric lags at each rung."""

    type: Literal["asha"] = Field("asha", description="Only ASHA is offered.")
    grace_period: int = Field(5, ge=1, description="Iterations every trial runs before a cut.")
    reduction_factor: float = Field(3.0, gt=1, description="Keep 1/this of trials per rung.")


class SweepSpec(_Strict):
    """The validated contents of a sweep file."""

    name: str = Field(min_length=1, description="Sweep name (default folder sweeps/NAME).")
    base: str | dict[str, Any] = Field(
        default_factory=dict, description="Run config file (relative to the sweep file) or map."
    )
    set: dict[str, Any] = Field(default_factory=dict, description="Fixed dotted overrides.")
    tasks: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Task name -> dotted overrides (default: one task)."
    )
    axes: dict[str, list[Any] | dict[str, Any]] = Field(
        default_factory=dict, description="Dotted config path -> values (or a distribution)."
    )
    search: Literal["grid", "random"] = Field("grid", description="grid or random sampling.")
    num_samples: int = Field(1, ge=1, description="random: variants drawn.")
    sample_seed: int = Field(0, ge=0, description="random: seed of the draws.")
    seeds: int = Field(1, ge=1, description="Seeds per variant and task.")
    first_seed: int = Field(0, ge=0, description="run.seed of the first seed.")
    metric: str = Field("rollout/return_mean", description="Reported to Tune every iteration.")
    mode: Literal["max", "min"] = Field("max", description="Whether larger metric is better.")
    score: str | None = Field(None, description="Final score per trial (default: metric).")
    resources: Resources = Field(default_factory=Resources, description="Per-trial resources.")
    max_concurrent: int = Field(0, ge=0, description="Trials at once (0: as many as fit).")
    scheduler: AshaSpec | None = Field(None, description="null (run all) or ASHA.")
    dir: str | None = Field(None, description="Sweep folder (default sweeps/NAME).")

    @model_validator(mode="after")
    def _axes_usable(self) -> SweepSpec:
        for key, values in self.axes.items():
            if isinstance(values, list):
                if not values:
                    raise ValueError(f"axis {key!r} is empty; give at least one value")
                continue
            if not values:
                raise ValueError(f"axis {key!r} is empty; give at least one value")
            if len(values) != 1 or next(iter(values)) not in DISTRIBUTIONS:
                for option, overrides in values.items():  # named options
                    if not isinstance(overrides, dict) or not overrides:
                        raise ValueError(
                            f"axis {key!r}: option {option!r} must map dotted config keys to "
                            f"values (or the axis be a list, or one of "
                            f"{{{', '.join(DISTRIBUTIONS)}}}: [low, high])"
                        )
                continue
            if self.search == "grid":
                raise ValueError(
                    f"axis {key!r}: a distribution needs search: random; grid takes a list"
                )
            ((kind, bounds),) = values.items()
            if (
                not isinstance(bounds, list)
                or len(bounds) != 2
                or not all(isinstance(b, int | float) for b in bounds)
                or not bounds[0] < bounds[1]
                or (kind == "loguniform" and bounds[0] <= 0)
            ):
                raise ValueError(f"axis {key!r}: {kind} needs [low, high] with low < high")
        return self

    @property
    def score_metric(self) -> str:
        return self.score or self.metric


@dataclass(frozen=True)
class Trial:
    """One run of the sweep: a task, a variant (axis values) and a seed."""

    name: str
    task: str
    variant: str
    values: dict[str, Any]
    seed: int
    config: TrainConfig


@dataclass(frozen=True)
class Sweep:
    """A parsed sweep: its spec, its folder and every trial, all validated."""

    spec: SweepSpec
    source: Path
    directory: Path
    trials: list[Trial]


def load_sweep(path: str | Path, directory: str | Path | None = None) -> Sweep:
    """Read, validate and expand a sweep file; any problem is one :class:`ConfigError` line."""
    path = Path(path)
    raw = read_yaml(path)
    try:
        spec = SweepSpec.model_validate(raw)
    except ValidationError as err:
        problems = format_validation_error(err, SweepSpec).replace("\n", "; ")
        raise ConfigError(f"{path}: {problems}") from None
    folder = Path(directory or spec.dir or Path("sweeps") / spec.name).resolve()
    return Sweep(spec, path, folder, expand(spec, path, folder))


def expand(spec: SweepSpec, source: Path, folder: Path) -> list[Trial]:
    """Every trial of ``spec``; each config validated as ``rlformer train`` would."""
    base = _base_mapping(spec, source)
    tasks = spec.tasks or {"": {}}
    trials = []
    for variant, values in _variants(spec):
        for task, task_overrides in tasks.items():
            for k in range(spec.seeds):
                seed = spec.first_seed + k
                name = _safe("__".join(p for p in (task, variant, f"seed{seed}") if p))
                raw = copy.deepcopy(base)
                for where, overrides in (("set", spec.set), (f"task {task}", task_overrides)):
                    for key, value in overrides.items():
                        _set_path(raw, key, value, f"{source}: {where}")
                for key, value in values.items():
                    if isinstance(value, NamedOption):
                        for sub, sub_value in value.overrides.items():
                            _set_path(raw, sub, sub_value, f"{source}: axis {key}.{value.name}")
                    else:
                        _set_path(raw, key, value, f"{source}: axis {key}")
                _set_path(raw, "run.seed", seed, str(source))
                _set_path(raw, "run.name", "run", str(source))
                _set_path(raw, "run.root", str(folder / "trials" / name), str(source))
                try:
                    cfg = build_config(raw)
                except ConfigError as err:
                    raise ConfigError(
                        f"{source}: trial {name}: {str(err).replace(chr(10), '; ')}"
                    ) from None
                if algorithm_spec(cfg.algo).planned_iterations is None:
                    raise ConfigError(
                        f"{source}: algo {cfg.algo} declares no planned_iterations, which "
                        "sweeps schedule trials by"
                    )
                shown = {k: v.name if isinstance(v, NamedOption) else v for k, v in values.items()}
                trials.append(Trial(name, task or cfg.env.id, variant, shown, seed, cfg))
    return trials


def _base_mapping(spec: SweepSpec, source: Path) -> dict[str, Any]:
    if isinstance(spec.base, dict):
        return copy.deepcopy(spec.base)
    base_path = Path(spec.base)
    if not base_path.is_absolute():
        base_path = source.parent / base_path
    try:
        return read_yaml(base_path)
    except ConfigError as err:
        raise ConfigError(f"{source}: base: {err}") from None


def _variants(spec: SweepSpec) -> list[tuple[str, dict[str, Any]]]:
    """(name, {key: value}) per variant: the grid's combinations or the random draws."""
    keys = list(spec.axes)
    labels = _labels(keys)
    if spec.search == "grid":
        choices = [_options(axis) for axis in spec.axes.values()]
        combos = [dict(zip(keys, c, strict=True)) for c in itertools.product(*choices)]
    else:
        rng = np.random.default_rng(spec.sample_seed)
        combos = [
            {key: _draw(rng, spec.axes[key]) for key in keys} for _ in range(spec.num_samples)
        ]
    variants = []
    for i, combo in enumerate(combos):
        name = _variant_name(labels, combo)
        if spec.search == "random":
            name = f"s{i:02d}" + ("+" + name if combo else "")
        variants.append((name, combo))
    return variants


def _options(axis: list[Any] | dict[str, Any]) -> list[Any]:
    return axis if isinstance(axis, list) else [NamedOption(k, v) for k, v in axis.items()]


@dataclass(frozen=True)
class NamedOption:
    """One option of a named axis: its name (shown in the variant) and its overrides."""

    name: str
    overrides: dict[str, Any]


def _draw(rng: np.random.Generator, axis: list[Any] | dict[str, Any]) -> Any:
    if isinstance(axis, list) or not (len(axis) == 1 and next(iter(axis)) in DISTRIBUTIONS):
        options = _options(axis)
        return options[int(rng.integers(len(options)))]
    ((kind, (low, high)),) = axis.items()
    if kind == "uniform":
        return float(rng.uniform(low, high))
    if kind == "loguniform":
        return float(np.exp(rng.uniform(np.log(low), np.log(high))))
    return int(rng.integers(low, high))


def _labels(keys: list[str]) -> dict[str, str]:
    """Shortest dotted suffix of each key that still tells the keys apart (gate, core.gate)."""
    labels = {}
    for key in keys:
        parts = key.split(".")
        for n in range(1, len(parts) + 1):
            label = ".".join(parts[-n:])
            if sum(other.split(".")[-n:] == parts[-n:] for other in keys) == 1:
                break
        labels[key] = label
    return labels


def _variant_name(labels: dict[str, str], values: dict[str, Any]) -> str:
    def show(value: Any) -> str:
        if isinstance(value, NamedOption):
            return value.name
        if isinstance(value, float):
            return f"{value:.4g}"
        if isinstance(value, dict | list):
            return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
        return str(value)

    return "+".join(f"{labels[k]}={show(v)}" for k, v in values.items()) or "base"


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=+-]", "_", name)


def _set_path(raw: dict[str, Any], key: str, value: Any, where: str) -> None:
    """``raw[a][b] = value`` for ``key = 'a.b'``; missing sections are created."""
    path = key.split(".")
    if not all(path):
        raise ConfigError(f"{where}: {key!r} is not a dotted key path")
    node = raw
    for depth, part in enumerate(path[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{where}: {'.'.join(path[: depth + 1])} is a value, not a section")
        node = child
    node[path[-1]] = copy.deepcopy(value)
