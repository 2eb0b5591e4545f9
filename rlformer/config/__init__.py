"""Typed, validated run configuration.

A run is described by one YAML file validated into :class:`TrainConfig`. Every field has a default
that runs and a one-line description (shown by ``rlformer config-doc``); an unknown key, a value
of the wrong type or one out of range is a :class:`ConfigError` naming the key path, the bad
value and what is allowed. ``--set a.b=1`` overrides are applied to the raw mapping *before*
validation, so they obey exactly the same rules as the file.

:class:`TrainConfig` is assembled from declarations: the shared sections
(:mod:`rlformer.config.sections.shared`) and, per algorithm, its own section and the shared ones
it reads (:mod:`rlformer.config.sections.registry`, which says how to add an algorithm). A key
set in a section the chosen algorithm never reads is refused with the reason its declaration
gives.

Example:
    >>> cfg = load_config(None, ["ppo.learning_rate=1e-3", "env.id=CartPole-v1"])
    >>> cfg.ppo.learning_rate
    0.001
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, get_args

import yaml
from pydantic import BaseModel, Field, ValidationError, create_model, model_validator

from rlformer.config.files import (
    ConfigError,
    apply_overrides,
    parse_override,
    read_yaml,
    shipped_config,
    shipped_config_names,
)
from rlformer.config.presets import OFFLINE_SECTIONS, PRESETS, UnknownPresetError, apply_preset
from rlformer.config.sections.base import Section, StrictModel
from rlformer.config.sections.env import EnvConfig, WrapperConfig
from rlformer.config.sections.evaluation import EvalConfig
from rlformer.config.sections.learner import LearnerConfig
from rlformer.config.sections.model import ModelConfig
from rlformer.config.sections.registry import registered, unread_paths
from rlformer.config.sections.rollout import RolloutConfig
from rlformer.config.sections.run import RunConfig
from rlformer.config.sections.shared import SHARED_SECTIONS
from rlformer.config.sections.spec import AlgorithmSpec
from rlformer.config.sections.suggest import suggest_key
from rlformer.moved_paths import moved_name

# The shared section models stay importable from here; an algorithm's own lives in its package.
__all__ = [
    "ConfigError",
    "EnvConfig",
    "EvalConfig",
    "ModelConfig",
    "RolloutConfig",
    "RunConfig",
    "StrictModel",
    "TrainConfig",
    "WrapperConfig",
    "apply_overrides",
    "algo_field",
    "build_config",
    "changed_keys",
    "check_sections_read",
    "declare_train_config",
    "describe_fields",
    "dump_config",
    "format_validation_error",
    "load_config",
    "load_saved_config",
    "offline_env_config",
    "parse_override",
    "preset_field",
    "read_yaml",
    "reference_lines",
    "section_field",
    "set_keys",
    "shipped_config",
    "shipped_config_names",
    "train_config_model",
]


class TrainConfigBase(StrictModel):
    """The rules of every run config; the fields (``algo``, ``preset`` and one per section) are
    those of the model :func:`train_config_model` returns: the declared
    :class:`rlformer.TrainConfig`, or one assembled from the registered algorithms."""

    specs: ClassVar[dict[str, AlgorithmSpec]] = {}
    """The algorithms the model was assembled from, by name."""

    if TYPE_CHECKING:
        # What every run config has; the declared model (rlformer.TrainConfig) also types the
        # sections of the built-in algorithms.
        algo: str = Field("")
        preset: str | None = Field("auto")
        run: RunConfig = Field(default_factory=RunConfig)
        env: EnvConfig = Field(default_factory=EnvConfig)
        rollout: RolloutConfig = Field(default_factory=RolloutConfig)
        model: ModelConfig = Field(default_factory=ModelConfig)
        eval: EvalConfig = Field(default_factory=EvalConfig)
        learner: LearnerConfig = Field(default_factory=LearnerConfig)

    @model_validator(mode="after")
    def _algorithm_rules(self) -> TrainConfigBase:
        specs = type(self).specs or _specs_of(type(self))
        spec = specs[self.algo]
        if self.rollout.async_sampling and not spec.async_sampling:
            able = _words(name for name, other in specs.items() if other.async_sampling)
            raise ValueError(
                f"rollout.async_sampling is for algo {able} only, not {self.algo}; remove it"
            )
        if spec.check is not None:
            spec.check(self)
        return self

    def resolved(self) -> TrainConfigBase:
        """This config as a run uses it: the keys set in it (given to the constructor or
        assigned since) validated by :func:`build_config`, as a YAML file of those keys would
        be: laid over the preset it names, and refused for a key its algorithm never reads."""
        return build_config(set_keys(self))


def _words(items: Iterable[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    items = list(items)
    return " and ".join(filter(None, [", ".join(items[:-1]), *items[-1:]]))


def _preset_doc(specs: tuple[AlgorithmSpec, ...]) -> str:
    """The description of ``preset``: the presets, and what each algorithm takes of them."""
    whole = _words(spec.name for spec in specs if spec.preset_sections is None)
    text = (
        f"Tuned settings of a task family laid under a loaded config: {', '.join(PRESETS)}, "
        f"auto (by env.id, {whole or 'no algo'} only) or null (none); the config's keys and "
        "--set win."
    )
    takers: dict[tuple[str, ...], list[str]] = {}
    for spec in specs:
        if spec.preset_sections is not None:
            takers.setdefault(tuple(spec.preset_sections), []).append(spec.name)
    for sections, names in takers.items():
        part = f"only the {_words(sections)} section" if sections else "nothing"
        text += f" For {_words(names)} a named preset sets {part}{'s' * (len(sections) > 1)}."
    return text


def algo_field(specs: tuple[AlgorithmSpec, ...]) -> Any:
    """The ``algo`` field of a run config of ``specs``: the first is the default."""
    algo_doc = "; ".join(f"{spec.name}: {spec.summary}" for spec in specs) + "."
    return Field(specs[0].name, description=algo_doc)


def preset_field(specs: tuple[AlgorithmSpec, ...]) -> Any:
    """The ``preset`` field of a run config of ``specs``."""
    return Field("auto", description=_preset_doc(specs))


def section_field(section: Section | None) -> Any:
    """The field of one section: its model's defaults, and its description."""
    if section is None:
        raise ValueError("an algorithm without a section of its own has no field")
    return Field(default_factory=section.model, description=section.doc)


def _assemble(
    specs: tuple[AlgorithmSpec, ...], base: type[TrainConfigBase] = TrainConfigBase
) -> type[TrainConfigBase]:
    """The run config model of ``specs``: ``algo`` (the first is the default), ``preset``, the
    shared sections, then each algorithm's own section under its name. On a declared ``base``
    whose algorithms come first in ``specs``, only the others' sections are added."""
    names = tuple(spec.name for spec in specs)
    sections = {**SHARED_SECTIONS, **{s.name: s.section for s in specs if s.section is not None}}
    model: type[TrainConfigBase] = create_model(  # type: ignore[call-overload]
        "TrainConfig",
        __base__=base,
        __module__=__name__,
        __doc__="Everything one ``rlformer train`` run needs.",
        algo=(Literal[names], algo_field(specs)),
        preset=(str | None, preset_field(specs)),
        **{
            key: (section.model, section_field(section))
            for key, section in sections.items()
            if key not in base.model_fields
        },
    )
    model.specs = {spec.name: spec for spec in specs}
    return model


_MODELS: dict[tuple[AlgorithmSpec, ...], type[TrainConfigBase]] = {}
_DECLARED: list[type[TrainConfigBase]] = []


def declare_train_config(model: type[TrainConfigBase]) -> type[TrainConfigBase]:
    """Make ``model``, a run config declared in source (:class:`rlformer.TrainConfig`), the one
    :func:`train_config_model` returns while the registered algorithms are those its ``algo``
    names, in that order; an algorithm registered after them adds its section on a subclass."""
    _DECLARED[:] = [model]
    _MODELS.clear()
    return model


def _declared_algorithms(model: type[TrainConfigBase]) -> tuple[str, ...]:
    return tuple(get_args(model.model_fields["algo"].annotation))


def _fits(model: type[TrainConfigBase], specs: tuple[AlgorithmSpec, ...]) -> bool:
    """Whether ``model`` declares exactly the fields the first of ``specs`` assemble."""
    names = _declared_algorithms(model)
    own = specs[: len(names)]
    if tuple(spec.name for spec in own) != names:
        return False
    sections = {**SHARED_SECTIONS, **{s.name: s.section for s in own if s.section is not None}}
    fields = model.model_fields
    return list(fields) == ["algo", "preset", *sections] and all(
        fields[key].annotation is section.model for key, section in sections.items()
    )


def _model_of(specs: tuple[AlgorithmSpec, ...]) -> type[TrainConfigBase]:
    for declared in _DECLARED:
        if _fits(declared, specs):
            names = _declared_algorithms(declared)
            declared.specs = {spec.name: spec for spec in specs[: len(names)]}
            return declared if len(specs) == len(names) else _assemble(specs, declared)
    return _assemble(specs)


def _specs_of(model: type[TrainConfigBase]) -> dict[str, AlgorithmSpec]:
    """The algorithms of a declared model built before any config was validated."""
    train_config_model()
    return model.specs


def train_config_model() -> type[TrainConfigBase]:
    """The run config model of the algorithms registered now: the declared
    :class:`rlformer.TrainConfig` for the built-in ones, a subclass of it that adds the
    sections of algorithms registered after them, or (when the built-in ones are not all
    registered first) a model assembled from the registered ones alone."""
    specs = registered()
    if specs not in _MODELS:
        _MODELS[specs] = _model_of(specs)
    return _MODELS[specs]


if TYPE_CHECKING:
    TrainConfig = TrainConfigBase
    """The run config model of the installed algorithms; at run time :func:`train_config_model`
    assembles it on first use (after the algorithms' declarations have loaded)."""
"""Everything one ``rlformer train`` run needs, for the shipped algorithms."""


def format_validation_error(err: ValidationError, model: type[BaseModel] | None = None) -> str:
    """One line per problem: ``key.path: got VALUE; what is allowed``. Given the ``model`` that
    was validated, an unknown key names the key it most likely meant."""
    lines = []
    for problem in err.errors():
        path = ".".join(str(p) for p in problem["loc"]) or "<top level>"
        message = problem["msg"]
        if problem["type"] == "extra_forbidden":
            meant = suggest_key(model, problem["loc"]) if model is not None else None
            hint = f"did you mean {meant}? " if meant else "check spelling; "
            lines.append(f"{path}: unknown key ({hint}`rlformer config-doc` lists all keys)")
            continue
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        if problem["type"] in ("bool_parsing", "bool_type"):
            message = "expected true or false"
        got = problem.get("input")
        shown = "" if isinstance(got, dict) else f"got {got!r}; "
        lines.append(f"{path}: {shown}{message}")
    return "\n".join(lines)


def changed_keys(new: Mapping[str, Any], old: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Dotted keys whose value differs between two config dumps (or a dump and its defaults),
    depth first; a key present in only one of them counts as changed."""
    changed = []
    for key in dict.fromkeys([*new, *old]):
        value, before = new.get(key), old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            changed += changed_keys(value, before, f"{prefix}{key}.")
        elif value != before:
            changed.append(f"{prefix}{key}")
    return changed


def set_keys(model: BaseModel, default: BaseModel | None = None) -> dict[str, Any]:
    """The keys set in ``model`` as the raw mapping a YAML file of them would be: those given to
    its constructor or assigned since. ``default``: ``model`` is that default value, changed
    since; only the keys it changes count (a section's validators set some keys themselves)."""
    values = model.model_dump(mode="json")
    before = default.model_dump(mode="json") if default is not None else {}
    fresh = default if default is not None else type(model)()
    raw: dict[str, Any] = {}
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            given = default is None and name in model.model_fields_set
            inner = set_keys(value, None if given else getattr(fresh, name))
            if inner or given:
                raw[name] = inner
        elif name in model.model_fields_set and (
            default is None or name not in default.model_fields_set or values[name] != before[name]
        ):
            raw[name] = values[name]
    return raw


def _unread_of(cfg: TrainConfigBase) -> dict[str, str]:
    """The sections and keys ``cfg``'s algorithm never reads, with the reasons."""
    specs = type(cfg).specs
    return unread_paths(specs[cfg.algo], tuple(specs.values()))


def _refuse_unread(algo: str, unread: dict[str, str], key: str) -> None:
    """ConfigError if the dotted ``key`` is, or lies in, one of ``algo``'s ``unread`` paths."""
    for path, instead in unread.items():
        if key == path:
            raise ConfigError(
                f"{key} is set, but algo {algo} never reads it ({instead}); remove it"
            )
        if key.startswith(f"{path}."):
            what = path if "." in path else f"the {path} section"
            raise ConfigError(
                f"{key} is set, but algo {algo} never reads {what} ({instead}); remove it"
            )


def check_sections_read(cfg: TrainConfigBase) -> None:
    """Refuse a key that the chosen algorithm would ignore, such as ``model.core.n_layers`` for a
    DT (its network is ``dt.core``), instead of training something other than what was asked.

    A key counts as set when its value differs from the algorithm's default.
    """
    unread = _unread_of(cfg)
    values = cfg.model_dump(mode="json")
    defaults = type(cfg)(algo=cfg.algo).model_dump(mode="json")
    for section in dict.fromkeys(path.partition(".")[0] for path in unread):
        for key in changed_keys(values[section], defaults[section], f"{section}."):
            _refuse_unread(cfg.algo, unread, key)


def _preset_sections(model: type[TrainConfigBase], raw: dict[str, Any]) -> tuple[str, ...] | None:
    """What the algorithm ``raw`` names takes of a named preset; nothing for a name that is no
    algorithm (validation then says so)."""
    algo = raw.get("algo", model.model_fields["algo"].default)
    spec = model.specs.get(algo) if isinstance(algo, str) else None
    return spec.preset_sections if spec is not None else ()


def _validated(raw: dict[str, Any], preset_sections: tuple[str, ...] | None) -> TrainConfigBase:
    """``raw`` laid over its preset (taking ``preset_sections`` of it) and validated."""
    try:
        raw = apply_preset(raw, preset_sections)
    except UnknownPresetError as err:
        raise ConfigError(str(err)) from None
    model = train_config_model()
    try:
        return model.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, model)) from None


def build_config(raw: dict[str, Any], check_unread: bool = True) -> TrainConfigBase:
    """Validate a raw mapping, laid over the preset it names, into a :class:`TrainConfig` or
    raise :class:`ConfigError` (with ``check_unread``, also for keys the algorithm ignores)."""
    cfg = _validated(raw, _preset_sections(train_config_model(), raw))
    if check_unread:
        check_sections_read(cfg)
    return cfg


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> TrainConfigBase:
    """Load ``path`` (or the defaults when None), apply ``--set`` overrides and validate."""
    raw = read_yaml(path) if path is not None else {}
    return build_config(apply_overrides(raw, list(overrides or [])))


def offline_env_config(path: str | Path | None, overrides: list[str] | None = None) -> EnvConfig:
    """The env that an offline algorithm's (dt, odt) run of ``path`` plus ``overrides`` builds.

    ``rlformer collect --config/--set`` records data through it, so the data fits the DT that
    trains on it: ``preset: auto`` adds nothing, a named preset only its
    :data:`~rlformer.config.presets.OFFLINE_SECTIONS`. The file may be a config of any algorithm;
    keys that algorithm would not read are not refused.
    """
    raw = read_yaml(path) if path is not None else {}
    return _validated(apply_overrides(raw, list(overrides or [])), OFFLINE_SECTIONS).env


def load_saved_config(path: str | Path, overrides: list[str] | None = None) -> TrainConfigBase:
    """A run directory's resolved config plus ``--set`` overrides, for ``--resume``.

    The saved config is taken as it is: it was checked when the run started, and it lists every
    section, including those the algorithm never read at their defaults of that time. Only the
    overrides are checked for keys the algorithm ignores.
    """
    cfg = build_config(apply_overrides(read_yaml(path), list(overrides or [])), False)
    for item in overrides or []:
        _refuse_unread(cfg.algo, _unread_of(cfg), ".".join(parse_override(item)[0]))
    return cfg


def dump_config(cfg: TrainConfigBase) -> str:
    """The fully resolved config as YAML, suitable to re-load with :func:`load_config`."""
    text: str = yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
    return text


def describe_fields(
    model: type[BaseModel] | None = None, prefix: str = "", defaults: BaseModel | None = None
) -> list[tuple[str, str, str]]:
    """Every leaf key of ``model`` (the run config when None) as ``(path, default,
    description)``, for ``rlformer config-doc``.

    Defaults are read from the parent's default instance, not from the nested class, because a
    section may override its class's defaults (``dt.core`` is a 3-layer DT core, not a
    generic ``CoreConfig``).
    """
    model = model or train_config_model()
    rows: list[tuple[str, str, str]] = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        default = (
            getattr(defaults, name)
            if defaults is not None
            else field.get_default(call_default_factory=True)
        )
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            rows.extend(describe_fields(annotation, prefix=f"{path}.", defaults=default))
            continue
        rows.append((path, repr(default), field.description or ""))
    return rows


def reference_lines() -> list[str]:
    """``rlformer config-doc``'s lines (also the body of docs/guides/configs.md): the shared
    sections, then each registered algorithm's section under its name."""
    return [f"{path:32s} {default:14s} {doc}" for path, default, doc in describe_fields()]


def __getattr__(name: str) -> object:
    """``TrainConfig``, assembled on first use: the algorithms' declarations import the shared
    sections, which runs this module, so it cannot be built while this module loads. Also the
    algorithms' section models, read from here in earlier layouts."""
    if name == "TrainConfig":
        return train_config_model()
    return moved_name(__name__, name)
