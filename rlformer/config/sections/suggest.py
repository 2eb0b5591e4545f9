"""Which config key a user probably meant when they typed one that does not exist.

Users arrive with other libraries' names in their fingers (SB3's ``n_steps``, CleanRL's
``num_envs``, RLlib's ``lambda``, everyone's ``lr``), so a plain "unknown key" sends them to the
reference for every one. The unknown key is matched, in this order, against the keys of its own
section (a close spelling, or the initials of a snake_case key: ``lr`` -> ``learning_rate``) and
then against a table of other libraries' names for the same setting. A suggestion is only made
for a key path that exists in the model being validated.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

# Another library's name for a setting -> rlformer's key path. SB3 / sb3-contrib, CleanRL and
# RLlib spell these differently; only names that mean the same thing are listed.
PEER_NAMES: dict[str, str] = {
    "lr": "ppo.learning_rate",
    "total_timesteps": "ppo.total_steps",
    "n_steps": "rollout.fragment_length",
    "num_steps": "rollout.fragment_length",
    "rollout_fragment_length": "rollout.fragment_length",
    "n_envs": "rollout.envs_per_worker",
    "num_envs": "rollout.envs_per_worker",
    "num_envs_per_env_runner": "rollout.envs_per_worker",
    "num_env_runners": "rollout.num_workers",
    "num_rollout_workers": "rollout.num_workers",
    "n_epochs": "ppo.update_epochs",
    "num_epochs": "ppo.update_epochs",
    "clip_range": "ppo.clip_coef",
    "clip_param": "ppo.clip_coef",
    "entropy_coeff": "ppo.ent_coef",
    "vf_loss_coeff": "ppo.vf_coef",
    "lambda": "ppo.gae_lambda",
    "lambda_": "ppo.gae_lambda",
    "grad_clip": "ppo.max_grad_norm",
    "kl_target": "ppo.target_kl",
    "seed": "run.seed",
    "env_id": "env.id",
}


def _initials(key: str) -> str:
    return "".join(word[0] for word in key.split("_") if word)


def _model_inside(annotation: Any) -> tuple[type[BaseModel] | None, int]:
    """The pydantic model an annotation holds (through Optional, unions, lists and dicts), and
    how many location parts its containers add before the model's own keys (a list's index,
    a dict's key)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, 0
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            model, skip = _model_inside(arg)
            if model is not None:
                return model, skip
    elif origin in (list, tuple, Sequence) and args:
        model, skip = _model_inside(args[0])
        return model, skip + 1
    elif origin is dict and len(args) == 2:
        model, skip = _model_inside(args[1])
        return model, skip + 1
    return None, 0


def _field_names(model: type[BaseModel]) -> dict[str, str]:
    """Each key a model accepts (its alias where it has one) -> its attribute name."""
    return {field.alias or name: name for name, field in model.model_fields.items()}


def section_at(model: type[BaseModel], path: Sequence[str | int]) -> type[BaseModel] | None:
    """The model that validates the mapping at ``path`` below ``model``, or None where the path
    leaves pydantic models (a free-form mapping) or names no field."""
    current: type[BaseModel] | None = model
    skip = 0
    for part in path:
        if skip:
            skip -= 1
            continue
        if current is None or isinstance(part, int):
            return None
        name = _field_names(current).get(str(part))
        if name is None:
            return None
        current, skip = _model_inside(current.model_fields[name].annotation)
    return current if not skip else None


def _exists(model: type[BaseModel], dotted: str) -> bool:
    *parents, last = dotted.split(".")
    section = section_at(model, parents)
    return section is not None and last in _field_names(section)


def suggest_key(model: type[BaseModel], loc: Sequence[str | int]) -> str | None:
    """The key path the user most likely meant by the unknown key at ``loc``, or None."""
    if not loc:
        return None
    *parents, typed = loc
    typed = str(typed)
    section = section_at(model, parents)
    prefix = "".join(f"{part}." for part in parents)
    if section is not None:
        keys = list(_field_names(section))
        by_initials = [key for key in keys if "_" in key and _initials(key) == typed]
        close = by_initials or difflib.get_close_matches(typed, keys, n=1, cutoff=0.75)
        if close:
            return prefix + close[0]
    peer = PEER_NAMES.get(typed)
    if peer is not None and _exists(model, peer):
        return peer
    return None
