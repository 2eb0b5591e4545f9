"""An ``rlformer export`` directory as a :class:`~rlformer.policies.Policy`.

The acting is the reference runner's (:mod:`rlformer.export.onnx_runner`, onnxruntime only);
this adapter adds what rlformer's tools read: the spaces (decoded with the checkpoints' codec)
and :class:`PolicyInfo` with the training env, so ``rlformer eval EXPORT_DIR`` evaluates on the
env, seeds and targets that ``rlformer eval RUN_DIR`` uses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from pydantic import ValidationError

from rlformer.config import EnvConfig
from rlformer.export.space_codec import SpaceCodecError
from rlformer.export.spec import space_from_json
from rlformer.policies.base import PolicyDistribution, PolicyInfo
from rlformer.runs.checkpoints import CheckpointError

MODEL_FILE, META_FILE = "policy.onnx", "policy.json"


def is_export_dir(path: str | Path) -> bool:
    """A directory holding an ONNX export (``policy.json`` and ``policy.onnx``)."""
    path = Path(path)
    return (path / META_FILE).is_file() and (path / MODEL_FILE).is_file()


class ExportedPolicy:
    """Acts with onnxruntime; sampling draws from a numpy RNG seeded once per torch generator
    (its ``initial_seed()``), so a sampled evaluation repeats exactly.

    ``policy.json`` and the model file are read once, at load; a pickled copy carries both and
    builds its own onnxruntime session (Ray ships policies by pickle), so it acts even where
    the export directory no longer exists. Rows that cannot be acted on (a non-finite
    observation value, an action mask allowing no action) raise
    :class:`~rlformer.export.onnx_runner.InvalidRowsError`, a ``ValueError``.
    """

    def __init__(self, export_dir: str | Path) -> None:
        name = str(export_dir)
        try:
            meta = json.loads((Path(export_dir) / META_FILE).read_text())
            model = (Path(export_dir) / meta["model_file"]).read_bytes()
        except (OSError, KeyError, TypeError, ValueError) as err:
            raise CheckpointError(f"{name}: not a readable rlformer export ({err})") from None
        self._build(name, meta, model)

    def _build(self, name: str, meta: dict[str, Any], model: bytes) -> None:
        from rlformer.extras import require

        require("export", f"{name} (an rlformer export)", ("onnxruntime",))
        from rlformer.export.onnx_runner import OnnxPolicy

        try:
            self.runner = OnnxPolicy.from_bytes(meta, model)
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

    def __getstate__(self) -> dict[str, Any]:
        return {"name": self.info.name, "meta": self.runner.meta, "model": self.runner.model}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._build(state["name"], state["meta"], state["model"])

    def initial_state(self, n: int, target_return: float | None = None) -> dict[str, np.ndarray]:
        if target_return is None and self.info.return_conditioned and not self.info.default_targets:
            raise ValueError("a Decision Transformer needs a target return to act")
        return self.runner.initial_state(n, target_return)

    def invalid_rows(self, obs: Any, action_mask: np.ndarray | None = None) -> dict[int, str]:
        """``{row: reason}`` for the rows :meth:`act` would refuse (empty when all are fine)."""
        return self.runner.invalid_rows(obs, action_mask)

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

    def distribution(
        self,
        obs: Any,
        state: dict[str, np.ndarray],
        episode_start: np.ndarray,
        reward: np.ndarray | None = None,
        action_mask: np.ndarray | None = None,
    ) -> PolicyDistribution:
        meta = self.runner.meta
        out = self.runner.run(obs, state, episode_start, reward, action_mask)
        next_state = {name: out["next_" + name] for name in state}
        sampling = meta["sampling"] or {}
        kind = sampling.get("distribution")
        if kind == "noise_input":
            kind = _NOISE_DISTRIBUTIONS[sampling["noise_kind"]]
        if "mean" in out:
            return PolicyDistribution(
                kind or "diag_gaussian", next_state, mean=out["mean"], log_std=out["log_std"]
            )
        if "prediction" in out:
            return PolicyDistribution("deterministic", next_state, mean=out["prediction"])
        sizes = meta.get("action_mask_components") or sampling.get("nvec")
        logits = out["logits"]
        if kind == "categorical" and sizes:
            parts = tuple(np.split(logits, np.cumsum(sizes)[:-1], axis=1))
            return PolicyDistribution("categorical", next_state, logits=parts)
        return PolicyDistribution(kind or "categorical", next_state, logits=(logits,))

    def _rng(self, generator: torch.Generator) -> np.random.Generator:
        """The numpy RNG of a torch generator: made on first use from its seed, then kept."""
        key = id(generator)
        if key not in self._rngs:
            self._rngs[key] = (generator, np.random.default_rng(generator.initial_seed()))
        return self._rngs[key][1]


# a DT's noise input says which distribution its graph samples
_NOISE_DISTRIBUTIONS = {"gumbel": "categorical", "logistic": "bernoulli", "normal": "tanh_gaussian"}
