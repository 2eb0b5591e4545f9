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

import numpy as np

from rlformer.models.distributions import Bernoulli, Categorical, DiagGaussian, MultiCategorical
from rlformer.models.recurrent import RecurrentTorso
from rlformer.models.torso import GTrXLTorso
from rlformer.policies.actor_critic import ActorCriticPolicy
from rlformer.policies.decision_transformer import DTPolicy
from rlformer.policies.export_dt import DTStepModule
from rlformer.policies.export_ppo import ActorStep
from rlformer.policies.export_spec import space_to_json, to_json


def _common(policy: Any, step: ActorStep | DTStepModule, kind: str) -> dict[str, Any]:
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


def mask_components(step: ActorStep | DTStepModule) -> list[int] | None:
    """The sizes of the action mask's components (one for Discrete), or None without a mask."""
    if not any(spec.role == "action_mask" for spec in step.inputs):
        return None
    model = step.model
    if isinstance(step, ActorStep):
        dist = model.dist
        return [dist.n] if isinstance(dist, Categorical) else list(dist.nvec)
    return list(model.action_nvec) if step.kind == "multidiscrete" else [model.act_dim]


def ppo_metadata(policy: ActorCriticPolicy, step: ActorStep) -> dict[str, Any]:
    model = policy.model
    torso = model.actor_torso
    name = "gtrxl" if isinstance(torso, GTrXLTorso) else "mlp"
    if isinstance(torso, RecurrentTorso):
        name = torso.kind
    normalization: dict[str, Any] = {
        f"obs/{path}": {
            "count": float(rms.count),
            "mean": to_json(rms.mean.numpy()),
            "var": to_json(rms.var().numpy()),
            "clip": float(model.encoder.clip),
        }
        for path, rms in model.encoder.normalized_leaves().items()
    }
    if step.reward_scale is not None:
        scale, clip = step.reward_scale
        normalization["reward"] = {"scale": scale, "clip": clip}
    return {
        **_common(policy, step, "ppo"),
        "torso": name,
        "normalization": normalization,
        "sampling": _ppo_sampling(model, "prev_action" if model.prev_action_reward else None),
    }


def _ppo_sampling(model: Any, model_action_state: str | None) -> dict[str, Any]:
    dist, space = model.dist, model.action_space
    dtype = np.dtype(space.dtype if space.dtype is not None else np.int64).name
    if isinstance(dist, Categorical):
        dtype = "int64"  # what ActorCriticPolicy returns for Discrete actions
    common = {"shape": list(space.shape), "dtype": dtype, "model_action_state": model_action_state}
    if isinstance(dist, Categorical):
        return {
            "distribution": "categorical",
            "logits": "logits",
            "nvec": [dist.n],
            "start": [dist.start],
            **common,
        }
    if isinstance(dist, MultiCategorical):
        return {
            "distribution": "categorical",
            "logits": "logits",
            "nvec": list(dist.nvec),
            "start": [int(s) for s in dist.start],
            **common,
        }
    if isinstance(dist, DiagGaussian):
        return {
            "distribution": "diag_gaussian",
            "mean": "mean",
            "log_std": "log_std",
            "low": to_json(space.low.astype(np.float64).reshape(-1).tolist()),
            "high": to_json(space.high.astype(np.float64).reshape(-1).tolist()),
            **common,
        }
    assert isinstance(dist, Bernoulli)
    return {"distribution": "bernoulli", "logits": "logits", **common}


NOISE_KINDS = {
    "discrete": "gumbel",  # Gumbel-max: argmax(logits + G) is a softmax sample
    "multidiscrete": "gumbel",  # per component
    "multibinary": "logistic",  # logit + L > 0 with probability sigmoid(logit)
    "box": "normal",  # the online DT's Gaussian before tanh
}


def dt_metadata(policy: DTPolicy, step: DTStepModule) -> dict[str, Any]:
    sampling = None
    if step.sampled:
        sampling = {
            "distribution": "noise_input",
            "noise": "noise",
            "noise_kind": NOISE_KINDS[step.kind],
            "model_action_state": None,
        }
    normalization = {
        "state_mean": to_json(np.asarray(policy.state_mean)),
        "state_std": to_json(np.asarray(policy.state_std)),
        "return_scale": step.return_scale,
        "action_low": to_json(policy.action_low),
        "action_high": to_json(policy.action_high),
    }
    if not step.layout.flat:  # the statistics cover these leaves' values, in this order
        normalization["standardized_leaves"] = list(step.layout.vector)
    return {
        **_common(policy, step, "dt"),
        "window": step.window,
        "carry_memory": step.carry_memory,
        "normalization": normalization,
        "sampling": sampling,
    }
