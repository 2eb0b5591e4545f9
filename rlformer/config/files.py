"""Reading a run config's raw mapping: YAML files (or the configs shipped with the package, by
name) and ``--set a.b=value`` overrides, each failure a one-line :class:`ConfigError`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    """A configuration problem, phrased for the user (one line per problem, no traceback)."""


def _parse_yaml(text: str) -> Any:
    """``yaml.safe_load`` whose every failure is a one-line ValueError.

    PyYAML raises more than YAMLError: a date-like scalar that is no date (``2001-13-45``)
    escapes as a bare ValueError from ``datetime``, and very deep nesting as RecursionError.
    """
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ValueError(" ".join(str(err).split()) or type(err).__name__) from None
    except (ValueError, OverflowError, RecursionError) as err:
        raise ValueError(f"{type(err).__name__}: {err}") from None


def parse_override(item: str) -> tuple[list[str], Any]:
    """Split ``a.b=value`` into a key path and a YAML-typed value (``null`` -> None)."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(
            f"--set {item!r}: expected KEY.PATH=VALUE, e.g. --set ppo.learning_rate=1e-3"
        )
    try:
        value = _parse_yaml(raw) if raw.strip() else ""
    except ValueError as err:
        raise ConfigError(f"--set {item!r}: value is not valid YAML ({err})") from None
    return key.strip().split("."), value


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return ``raw`` with each ``a.b=value`` override set (intermediate mappings are created)."""
    for item in overrides:
        path, value = parse_override(item)
        node = raw
        for depth, part in enumerate(path[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                prefix = ".".join(path[: depth + 1])
                raise ConfigError(f"--set {item!r}: {prefix} is a value, not a section")
            node = child
        node[path[-1]] = value
    return raw


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping, turning file and syntax problems into :class:`ConfigError`."""
    path = Path(path)
    if not path.is_file():
        shipped = shipped_config(str(path))
        if shipped is None:
            names = ", ".join(shipped_config_names()[:12])
            raise ConfigError(f"{path}: config file not found (nor a shipped config: {names}, ...)")
        path = shipped
    try:
        data = _parse_yaml(path.read_text())
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file (YAML must be UTF-8)") from None
    except ValueError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror or err}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: top level must be a mapping of sections, got {type(data).__name__}"
        )
    return data


def shipped_config(name: str) -> Path | None:
    """The config of the repository's ``configs/`` that ``name`` names (``quickstart``,
    ``memory/popgym_count_recall``, with or without ``.yaml``), as installed with the package,
    so that ``rlformer train quickstart`` runs without a checkout; None when there is none."""
    from importlib import resources

    relative = name if name.endswith((".yaml", ".yml")) else f"{name}.yaml"
    if relative.startswith(("/", ".")) or "\\" in relative:
        return None
    try:
        candidate = resources.files("rlformer_configs").joinpath(relative)
    except ModuleNotFoundError:
        return None
    path = Path(str(candidate))
    return path if path.is_file() else None


def shipped_config_names() -> list[str]:
    """Names :func:`shipped_config` resolves, for error messages (the top level first)."""
    from importlib import resources

    try:
        root = Path(str(resources.files("rlformer_configs")))
    except ModuleNotFoundError:
        return []
    names = [p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*.yaml")]
    return sorted(names, key=lambda n: (n.count("/"), n))
