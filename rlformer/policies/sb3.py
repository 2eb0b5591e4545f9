"""stable-baselines3 / sb3-contrib models (RecurrentPPO and MaskablePPO included) as a
:class:`~rlformer.policies.Policy`, driven through their own ``predict``.

A recurrent model's state is SB3's own LSTM state tuple, returned to the caller like every
policy's state; ``predict`` resets it where ``episode_start`` is True.
"""

from __future__ import annotations

import inspect
import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlformer.extras import missing_modules
from rlformer.policies.base import PolicyInfo
from rlformer.policies.errors import PolicyError

# Policy module named in the zip's ``data`` json -> algorithm that can load it. Algorithms that
# share a policy class predict identically whichever of them loads the file: PPO, A2C and TRPO
# all save stable_baselines3.common.policies.ActorCriticPolicy.
SB3_ALGORITHMS: tuple[tuple[str, str, str], ...] = (
    ("sb3_contrib.common.recurrent.", "sb3_contrib", "RecurrentPPO"),
    ("sb3_contrib.common.maskable.", "sb3_contrib", "MaskablePPO"),
    ("sb3_contrib.tqc.", "sb3_contrib", "TQC"),
    ("sb3_contrib.qrdqn.", "sb3_contrib", "QRDQN"),
    ("stable_baselines3.sac.", "stable_baselines3", "SAC"),
    ("stable_baselines3.td3.", "stable_baselines3", "TD3"),
    ("stable_baselines3.dqn.", "stable_baselines3", "DQN"),
    ("stable_baselines3.common.policies", "stable_baselines3", "PPO"),
)


def _algorithm(package: str, name: str) -> Any:
    return getattr(__import__(package, fromlist=[name]), name)


def sb3_policy_module(path: Path) -> str:
    """The module of the policy class recorded in an SB3 zip (``''`` when not recorded)."""
    try:
        with zipfile.ZipFile(path) as archive:
            data = json.loads(archive.read("data"))
    except (OSError, KeyError, zipfile.BadZipFile, json.JSONDecodeError) as err:
        raise PolicyError(f"{path}: not a stable-baselines3 model zip ({err})") from None
    policy = data.get("policy_class", {})
    return str(policy.get("__module__", "")) if isinstance(policy, dict) else ""


def load_sb3_model(path: Path, trust: bool = False) -> Any:
    """Load an SB3 / sb3-contrib model, choosing the class from the zip's policy module.

    An unknown module (a custom policy) falls back to trying every known algorithm in turn.
    Unless ``trust``, the zip's pickled entries are decoded with an allow-list first
    (:mod:`rlformer.policies.sb3_safe`), so a crafted file cannot run code.
    """
    module = sb3_policy_module(path)
    for prefix, package, name in SB3_ALGORITHMS:
        if package == "sb3_contrib" and module.startswith(prefix):
            from rlformer.extras import require

            require("peers", f"{path} (an sb3-contrib {name} model)")
    options: dict[str, Any] = {"device": "cpu"}
    if not trust:
        from rlformer.policies.sb3_safe import safe_custom_objects

        options["custom_objects"] = safe_custom_objects(path)
    for prefix, package, name in SB3_ALGORITHMS:
        if module.startswith(prefix):
            return _algorithm(package, name).load(path, **options)
    failures = []
    for _, package, name in SB3_ALGORITHMS:
        if package == "sb3_contrib" and missing_modules("peers"):
            continue
        try:
            return _algorithm(package, name).load(path, **options)
        except Exception as err:  # each algorithm rejects foreign files its own way
            failures.append(f"{name}: {type(err).__name__}")
    raise PolicyError(
        f"{path}: no stable-baselines3 algorithm could load it (policy module {module!r}; "
        f"tried {', '.join(failures)})"
    )


class SB3Policy:
    """A stable-baselines3 model, loaded from ``sb3:PATH.zip`` or handed over in memory.

    ``preprocess`` turns the env's batched observations into what the model saw in training
    (a wrapper's flattening, ``VecNormalize``'s frozen statistics), when that differs.
    """

    def __init__(
        self,
        model: Any,
        name: str,
        preprocess: Callable[[Any], Any] | None = None,
        observation_space: Any = None,
    ) -> None:
        self.model = model
        self.preprocess = preprocess
        self.observation_space = observation_space or model.observation_space
        self.action_space = model.action_space
        self.info = PolicyInfo(name, "sb3")
        self._seeded_by: torch.Generator | None = None

    def initial_state(self, n: int, target_return: float | None = None) -> Any:
        return None  # SB3's predict starts recurrent models from zeros

    def act(
        self,
        obs: Any,
        state: Any,
        episode_start: np.ndarray,
        reward: np.ndarray | None = None,
        action_mask: np.ndarray | None = None,
        deterministic: bool = True,
        generator: torch.Generator | None = None,
    ) -> tuple[np.ndarray, Any]:
        """``predict`` for all rows. SB3 samples from its own RNG: a new ``generator`` reseeds
        it with that generator's seed, so a sampled evaluation repeats exactly."""
        if generator is not None and generator is not self._seeded_by:
            self.model.set_random_seed(generator.initial_seed())
            self._seeded_by = generator
        if self.preprocess is not None:
            obs = self.preprocess(obs)
        options: dict[str, Any] = {}
        if action_mask is not None:
            if "action_masks" not in inspect.signature(self.model.predict).parameters:
                raise ValueError(f"{self.info.name}: this model does not take action masks")
            options["action_masks"] = action_mask
        action, state = self.model.predict(
            obs,
            state=state,
            episode_start=np.asarray(episode_start),
            deterministic=deterministic,
            **options,
        )
        return np.asarray(action), state


def sb3_policy(spec: str, trust: bool = False) -> SB3Policy:
    """``sb3:PATH.zip`` as a policy."""
    file = Path(spec.removeprefix("sb3:"))
    if not file.is_file():
        raise PolicyError(f"{file}: stable-baselines3 model file not found")
    return SB3Policy(load_sb3_model(file, trust), spec)
