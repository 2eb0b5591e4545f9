"""An ``rlformer export`` directory as a :class:`~rlformer.policies.Policy`.

The acting is the reference runner's (:mod:`rlformer.policies.onnx_runner`, onnxruntime only);
this adapter adds what rlformer's tools read: the spaces (decoded with the checkpoints' codec)
and :class:`PolicyInfo` with the training env, so ``rlformer eval EXPORT_DIR`` evaluates on the
env, seeds and targets that ``rlformer eval RUN_DIR`` uses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from pydantic import ValidationError

from rlformer.checkpoints import CheckpointError
from rlformer.config import EnvConfig
from rlformer.policies.base import PolicyInfo
from rlformer.policies.export_spec import space_from_json
from rlformer.spaces_codec import SpaceCodecError

MODEL_FILE, META_FILE = "policy.onnx", "policy.json"


def is_export_dir(path: str | Path) -> bool:
    """A directory holding an ONNX export (``policy.json`` and ``policy.onnx``)."""
    path = Path(path)
    return (path / META_FILE).is_file() and (path / MODEL_FILE).is_file()


class ExportedPolicy:
    """Acts with onnxruntime; sampling draws from a numpy RNG seeded once per torch generator
    (its ``initial_seed()``), so a sampled evaluation repeats exactly."""

    def __init__(self, export_dir: str | Path) -> None:
        from rlformer.policies.onnx_runner import OnnxPolicy

        name = str(export_dir)
        try:
            self.runner = OnnxPolicy(export_dir)
            meta = self.runner.meta
            self.observation_space: gym.Space = space_from_json(meta["observation_space"])
            self.action_space: gym.Space = space_from_json(meta["action_space"])
            env = meta.get("training_env")
            self.info = PolicyInfo(
                name,
                "onnx",
                training_env=None if env is None else EnvConfig.model_validate(env),
                return_conditioned=bool(meta["return_conditioned"]),
                default_targets=[float(t) for t in meta["default_targets"]],
                dataset_returns=meta.get("dataset_returns"),
                sampling_problem=meta.get("sampling_problem"),
            )
        except (OSError, KeyError, TypeError, ValueError, SpaceCodecError, ValidationError) as err:
            raise CheckpointError(f"{name}: not a readable rlformer export ({err})") from None
        except Exception as err:  # noqa: BLE001 - onnxruntime's load errors have no common base
            raise CheckpointError(f"{name}: onnxruntime cannot load it ({err})") from None
        # keyed by id(); the generator is kept beside its RNG so that its id is never reused
        # (torch 2.11 cannot weak-reference a Generator)
        self._rngs: dict[int, tuple[torch.Generator, np.random.Generator]] = {}

    def initial_state(self, n: int, target_return: float | None = None) -> dict[str, np.ndarray]:
        if target_return is None and self.info.return_conditioned and not self.info.default_targets:
            raise ValueError("a Decision Transformer needs a target return to act")
        return self.runner.initial_state(n, target_return)

    def act(
        self,
        obs: Any,
        state: dict[str, np.ndarray],
        episode_start: np.ndarray,
        reward: np.ndarray | None = None,
        action_mask: np.ndarray | None = None,
        deterministic: bool = True,
        generator: torch.Generator | None = None,
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        rng = None if deterministic else self._rng(generator or torch.default_generator)
        return self.runner.act(obs, state, episode_start, reward, action_mask, deterministic, rng)

    def _rng(self, generator: torch.Generator) -> np.random.Generator:
        """The numpy RNG of a torch generator: made on first use from its seed, then kept."""
        key = id(generator)
        if key not in self._rngs:
            self._rngs[key] = (generator, np.random.default_rng(generator.initial_seed()))
        return self._rngs[key][1]
