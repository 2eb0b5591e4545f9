"""The content of ``policy.json`` beside an exported graph: everything a runner must know.

Sampling is written as data a runner can follow without rlformer:

* ``categorical`` (Discrete, MultiDiscrete): split ``logits`` by ``nvec``; per component draw
  ``i ~ softmax(logits_k)`` (the masked logits of invalid actions are the lowest float: never
  drawn); the env action is ``i + start_k``, shaped ``shape`` (``[]`` for Discrete);
* ``diag_gaussian`` (Box): ``sample = mean + exp(log_std) * N(0, 1)``; the env action is the
  sample clipped to ``[low, high]`` and reshaped to ``shape``;
* ``bernoulli`` (MultiBinary): bit ``j`` is 1 with probability ``sigmoid(logits_j)``;
* ``noise_input`` (Decision Transformers): the graph samples itself from its ``noise`` input:
  standard Gumbel noise (Discrete, MultiDiscrete), standard logistic noise (MultiBinary) or
  standard normal noise (online DT, Box); zeros act deterministically.

With ``model_action_state`` set, the runner writes its sampled action (before ``start`` / clipping)
into that next state (the previous-action input of the next step).

Format 2 (``format_version``) adds to format 1: the ``memory_kv`` state of GTrXL policies (the
memory's attention keys and values), the ``input_valid`` output, a ``default`` on every input
that is not per-step data (``action_mask``: True, ``reward``: 0, ``noise``: 0) and
``action_mask_components`` (the sizes of the mask's components, side by side in its last
dimension; null when the policy takes no mask). A runner refuses the rows ``input_valid``
marks False rather than act on them.
"""

from __future__ import annotations

from typing import Any

from rlformer.export.spec import space_to_json, to_json
from rlformer.moved_paths import moved_name


def common_metadata(policy: Any, step: Any, kind: str) -> dict[str, Any]:
    """The entries of every ``policy.json``; ``step`` is the traced step module (its
    ``inputs``, ``outputs`` and ``mask_components()``)."""
    info = policy.info
    return {
        "kind": kind,
        "name": info.name,
        "inputs": [spec.to_json() for spec in step.inputs],
        "outputs": [spec.to_json() for spec in step.outputs],
        "observation_space": space_to_json(policy.observation_space),
        "action_space": space_to_json(policy.action_space),
        "training_env": None
        if info.training_env is None
        else info.training_env.model_dump(mode="json"),
        "return_conditioned": info.return_conditioned,
        "default_targets": [float(t) for t in info.default_targets],
        "default_target_return": float(info.default_targets[0]) if info.default_targets else None,
        "dataset_returns": to_json(info.dataset_returns),
        "sampling_problem": info.sampling_problem,
        "action_mask_components": mask_components(step),
    }


def mask_components(step: Any) -> list[int] | None:
    """The sizes of the action mask's components (one for Discrete), or None without a mask."""
    if not any(spec.role == "action_mask" for spec in step.inputs):
        return None
    return step.mask_components()


def __getattr__(name: str) -> object:
    """Names an algorithm's package holds now, read from here in earlier layouts."""
    return moved_name(__name__, name)
