"""``rlformer export``: a trained policy as an ONNX graph of one ``act`` step plus ``policy.json``.

The graph (``policy.onnx``, written by PyTorch's ``torch.export``-based ONNX exporter with a
dynamic batch dimension) holds the model and every rule that turns observations into actions
(normalisation, resets at episode starts, action masks, the env's action format), so a runner
needs only onnxruntime and numpy (:mod:`rlformer.export.onnx_runner`). ``policy.json`` says
how to feed it: inputs and outputs, each state's initial value, each optional input's default,
the spaces, the training env, how to sample, the normaliser statistics (for information: they
are constants of the graph). Its ``format_version`` (:data:`FORMAT_VERSION`) says which of
these a runner finds (:mod:`rlformer.export.metadata`); runners read every version.

What the step computes: :mod:`rlformer.algos.ppo.export` (PPO actors, every torso) and
:mod:`rlformer.algos.dt.export` (Decision Transformers, plain and memory).
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from rlformer.config.sections.registry import load_attr, registered, spec_for_kind
from rlformer.core.version import VERSION
from rlformer.export.space_codec import SpaceCodecError
from rlformer.export.spec import BATCH, TensorSpec, observation_examples
from rlformer.policies.base import Policy

FORMAT_VERSION = 2  # what export_meta.py describes; runners read 1 and 2
FORMATS = {"onnx": "policy.onnx", "torch-export": "policy.pt2"}
EXAMPLE_BATCH = 3  # not 0 or 1, which torch.export would specialise on
CHECK_TOLERANCE = 1e-4


class ExportError(ValueError):
    """A policy that cannot be exported, or an export that failed; one line: what and why."""


class StepModule(Protocol):
    """What an algorithm's export step returns: a ``torch.nn.Module`` that computes one policy
    step from flat tensors, and describes its tensors and its ``policy.json``."""

    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    leaves: Any
    """The observation's leaves (paths and spaces) in input order."""

    def mask_components(self) -> list[int]: ...

    def metadata(self, policy: Any) -> dict[str, Any]: ...

    def __call__(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The outputs from the inputs, in :attr:`inputs` order (``forward(*tensors)``: the
        exporter gives the batch dimension of every input as one variadic argument)."""
        ...


def export_step(policy: Policy) -> StepModule:
    """The traceable one-step module of a policy: its algorithm's export step, found by the
    policy's kind (:class:`ExportError` for policies no algorithm exports)."""
    info = getattr(policy, "info", None)
    name = getattr(info, "name", type(policy).__name__)
    kind = getattr(info, "kind", "unknown")
    spec = spec_for_kind(kind)
    if spec is not None and spec.export_step is not None:
        try:
            return load_attr(spec.export_step)(policy)
        except TypeError:
            pass  # a policy of that kind that is not the algorithm's own class
    able = sorted({s.kind for s in registered() if s.export_step is not None})
    raise ExportError(
        f"{name}: {kind} policies ({type(policy).__name__}) cannot be exported: rlformer exports "
        f"its own policies of kind {', '.join(able)}"
    )


def on_cpu(policy: Policy) -> Policy:
    """``policy``, or a CPU copy of one loaded onto a GPU: exports are traced on the CPU, and
    the caller's policy stays where it is."""
    device = getattr(policy, "device", None)
    if device is None or torch.device(device).type == "cpu":
        return policy
    return copy.deepcopy(policy).to("cpu")  # type: ignore[attr-defined]


def example_inputs(step: StepModule, batch: int = EXAMPLE_BATCH) -> tuple[torch.Tensor, ...]:
    """Valid inputs of ``batch`` rows: sampled observations, mixed episode starts, no mask."""
    observations = dict(zip(step.leaves, observation_examples(step.leaves, batch), strict=True))
    out = []
    for spec in step.inputs:
        if spec.role == "observation":
            value = observations[spec.leaf].to(spec.example(batch).dtype)
        elif spec.role == "episode_start":
            value = torch.arange(batch) % 2 == 0
        elif spec.role == "action_mask":
            value = torch.ones_like(spec.example(batch))
        elif spec.initial == "target_return":
            value = torch.ones(batch)
        else:
            value = spec.example(batch)
        out.append(value)
    return tuple(out)


def export_policy(policy: Policy, out_dir: str | Path, format: str = "onnx") -> Path:
    """Write ``out_dir/policy.onnx`` (or ``policy.pt2``) and ``out_dir/policy.json``.

    Raises :class:`ExportError` (one line) for a policy or format that cannot be exported.
    """
    if format not in FORMATS:
        raise ExportError(f"unknown export format {format!r}: use {' or '.join(FORMATS)}")
    policy = on_cpu(policy)
    step = export_step(policy)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} exists and is not a directory")
    try:
        meta = step.metadata(policy)
    except SpaceCodecError as err:
        raise ExportError(f"{policy.info.name}: its spaces cannot be written down: {err}") from None
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "policy.json").touch()  # fail now, not after the export, if it cannot be written
    except OSError as err:
        raise ExportError(f"cannot write to {out}: {err.strerror or err}") from None
    path = out / FORMATS[format]
    examples = example_inputs(step)
    if format == "onnx":
        opset = _write_onnx(step, examples, path, policy.info.name)
        meta["opset"] = opset
    else:
        _write_torch_export(step, examples, path, policy.info.name)
    meta = {
        "format": "rlformer-policy",
        "format_version": FORMAT_VERSION,
        "rlformer_version": VERSION,
        "model_file": path.name,
        **meta,
    }
    (out / "policy.json").write_text(_dumps(meta))
    return out


def _dynamic_shapes(step: StepModule) -> tuple[tuple[dict[int, Any], ...]]:
    """Dimension 0 of every input is the batch (one symbol); everything else is fixed."""
    batch = torch.export.Dim("batch", min=1, max=1 << 20)
    return (tuple({0: batch} if spec.shape[:1] == (BATCH,) else {} for spec in step.inputs),)


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    """The exporter logs and warns about things irrelevant here (absent torchvision ops, the
    constant folding of a statistics ``where`` with a 0/0 branch it never takes)."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _write_onnx(step: StepModule, examples: tuple[torch.Tensor, ...], path: Path, name: str) -> int:
    """Export with ``torch.onnx.export(dynamo=True)``, then check onnxruntime agrees with the
    module on the example inputs; returns the opset written."""
    try:
        with torch.no_grad(), _quiet_exporter():
            program = torch.onnx.export(
                step,
                examples,
                input_names=[s.name for s in step.inputs],
                output_names=[s.name for s in step.outputs],
                dynamic_shapes=_dynamic_shapes(step),
                dynamo=True,
                external_data=False,
                verbose=False,
            )
            program.save(str(path), external_data=False)
    except Exception as err:  # noqa: BLE001 - the exporter raises many kinds; report one line
        raise ExportError(f"{name}: torch.onnx could not export it: {_first_line(err)}") from err
    _check_onnx(step, examples, path, name)
    return int(next(o.version for o in program.model_proto.opset_import if o.domain == ""))


def _check_onnx(
    step: StepModule, examples: tuple[torch.Tensor, ...], path: Path, name: str
) -> None:
    """Fail loudly rather than ship a graph that computes something else than the model."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feed = {s.name: t.numpy() for s, t in zip(step.inputs, examples, strict=True)}
    got = session.run([s.name for s in step.outputs], feed)
    with torch.no_grad():
        expected = step(*examples)
    for spec, value, reference in zip(step.outputs, got, expected, strict=True):
        reference = reference.detach().numpy()
        close = (
            np.allclose(value, reference, rtol=CHECK_TOLERANCE, atol=CHECK_TOLERANCE)
            if reference.dtype.kind == "f"
            else np.array_equal(value, reference)
        )
        if value.shape != reference.shape or not close:
            raise ExportError(
                f"{name}: onnxruntime's {spec.name} differs from PyTorch's on the check inputs; "
                "the export is not trustworthy"
            )


def _write_torch_export(
    step: StepModule, examples: tuple[torch.Tensor, ...], path: Path, name: str
) -> None:
    """The ``torch.export`` program itself (``torch.export.load(path).module()`` runs it)."""
    try:
        with torch.no_grad(), _quiet_exporter():
            program = torch.export.export(step, examples, dynamic_shapes=_dynamic_shapes(step))
    except Exception as err:  # noqa: BLE001 - report one line
        raise ExportError(f"{name}: torch.export could not trace it: {_first_line(err)}") from err
    torch.export.save(program, path)


def _dumps(meta: dict[str, Any]) -> str:
    """Strict JSON, indented, with lists of numbers or strings on one line each."""
    text = json.dumps(meta, indent=1, allow_nan=False)
    # A newline never occurs inside a JSON string, so only layout whitespace is removed.
    flat = re.sub(
        r"\[([^\[\]{}]*)\]", lambda m: "[" + re.sub(r"\n\s*", " ", m[1]).strip() + "]", text
    )
    return flat + "\n"


def _first_line(err: BaseException) -> str:
    cause = err.__cause__ or err
    lines = [line.strip() for line in str(cause).splitlines() if line.strip()]
    return f"{type(cause).__name__}: {lines[0] if lines else ''}"
