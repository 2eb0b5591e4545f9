"""The optional parts of rlformer and the extra that installs each.

The core install trains and evaluates on one machine (PyTorch, Gymnasium, an embedded Ray,
TensorBoard, stable-baselines3). Serving, export, Minari datasets, MuJoCo / Box2D tasks, the
task families and the peers' packages are extras, ``pip install 'rlformer[NAME]'``; what needs
one that is missing stops with one line naming it, instead of an ImportError's traceback.
"""

from __future__ import annotations

import importlib.util

EXTRAS: dict[str, tuple[str, ...]] = {
    "serve": ("ray.serve", "starlette", "requests"),
    "export": ("onnx", "onnxruntime", "onnxscript"),
    "minari": ("minari",),
    "peers": ("sb3_contrib",),
}
"""Modules each extra provides that rlformer's code imports (pyproject.toml lists them)."""


class MissingExtra(ImportError):
    """A feature needs an extra that is not installed; the message names the pip command."""


def missing_modules(extra: str, modules: tuple[str, ...] | None = None) -> list[str]:
    """The modules of ``extra`` (or those of them in ``modules``) that cannot be imported."""
    missing = []
    for module in modules or EXTRAS[extra]:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a parent package missing, or a broken one
            found = False
        if not found:
            missing.append(module)
    return missing


def require(extra: str, feature: str, modules: tuple[str, ...] | None = None) -> None:
    """Raise :class:`MissingExtra` unless every module of ``extra`` imports.

    Args:
        extra: A key of :data:`EXTRAS`.
        feature: What needs it, as the user knows it (``rlformer export``, ``minari:`` datasets).
        modules: Only these of the extra's modules (running an export needs onnxruntime
            alone, writing one all three).
    """
    missing = missing_modules(extra, modules)
    if missing:
        raise MissingExtra(
            f"{feature} needs the {extra!r} extra ({', '.join(missing)} not installed): "
            f"pip install 'rlformer[{extra}]'"
        )
