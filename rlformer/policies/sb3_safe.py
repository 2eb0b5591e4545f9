"""Loading stable-baselines3 model zips without letting them run code.

An SB3 zip stores its weights as tensors (SB3 reads those with ``weights_only=True``) but its
``data`` entry holds cloudpickled objects (spaces, the policy class, schedules, buffer
classes), which SB3 unpickles unrestricted: a crafted zip runs any code on ``load``. SB3 lets the
caller replace such entries through ``custom_objects``; :func:`safe_custom_objects` decodes every
pickled entry here with an unpickler that resolves only an allow-list of harmless globals
(gymnasium spaces, numpy array and dtype constructors, SB3's own policy, buffer, schedule and
feature-extractor classes, torch activations and optimisers) and hands the results to SB3, so
SB3 itself never unpickles anything.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import pickle
import zipfile
from pathlib import Path
from typing import Any

from rlformer.policies.errors import PolicyError

# Exact globals that rebuild numpy arrays, scalars, generators and plain containers (no side
# effects beyond the object built).
_EXACT_GLOBALS = (
    {
        f"{core}.{name}"
        for core in ("numpy.core.numeric", "numpy._core.numeric")
        for name in ("_frombuffer",)
    }
    | {
        f"{core}.{name}"
        for core in ("numpy.core.multiarray", "numpy._core.multiarray")
        for name in ("_reconstruct", "scalar")
    }
    | {
        "numpy.dtype",
        "numpy.ndarray",
        "numpy.random._pickle.__generator_ctor",
        "numpy.random._pickle.__bit_generator_ctor",
        "numpy.random._pickle.__randomstate_ctor",
        "collections.OrderedDict",
        "collections.deque",
        "builtins.set",
        "builtins.frozenset",
    }
)


def _allowed_class(obj: Any) -> bool:
    """Classes whose construction has no effect outside the object being built."""
    import gymnasium as gym
    import torch
    from stable_baselines3.common.buffers import BaseBuffer
    from stable_baselines3.common.policies import BasePolicy
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
    from stable_baselines3.common.type_aliases import TrainFreq, TrainFrequencyUnit
    from stable_baselines3.common.utils import ConstantSchedule, FloatSchedule, LinearSchedule

    if not isinstance(obj, type):
        return False
    harmless = (
        gym.Space,
        BasePolicy,
        BaseBuffer,
        BaseFeaturesExtractor,
        ConstantSchedule,
        FloatSchedule,
        LinearSchedule,
        TrainFreq,
        TrainFrequencyUnit,
        torch.optim.Optimizer,
    )
    if issubclass(obj, harmless):
        return True
    return obj.__module__ == "torch.nn.modules.activation" and issubclass(obj, torch.nn.Module)


def _is_random_state_class(module: str, name: str) -> bool:
    import numpy as np

    obj = getattr(__import__(module, fromlist=[name]), name, None)
    random_types = (np.random.BitGenerator, np.random.Generator, np.random.SeedSequence)
    return isinstance(obj, type) and issubclass(obj, random_types)


class _AllowListUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        qualified = f"{module}.{name}"
        if qualified in _EXACT_GLOBALS:
            return super().find_class(module, name)
        if module.startswith("numpy.random.") and (
            name.startswith("__pyx_unpickle_") or _is_random_state_class(module, name)
        ):  # seeded spaces carry their Generator / SeedSequence state
            return super().find_class(module, name)
        root = module.split(".")[0]
        if root in {"gymnasium", "stable_baselines3", "sb3_contrib", "torch"}:
            obj = super().find_class(module, name)  # importing these packages is harmless
            if _allowed_class(obj):
                return obj
        raise pickle.UnpicklingError(f"refused global {qualified}")


def _decode(key: str, entry: dict[str, Any], path: Path) -> Any:
    try:
        blob = base64.b64decode(str(entry[":serialized:"]).encode(), validate=True)
    except (binascii.Error, ValueError) as err:
        raise PolicyError(f"{path}: entry {key!r} of its data is not base64 ({err})") from None
    try:
        return _AllowListUnpickler(io.BytesIO(blob)).load()
    except Exception as err:  # any unpickling failure, refusals included
        raise PolicyError(
            f"{path}: entry {key!r} needs unpickling of Python objects this loader does not "
            f"allow ({err}); loading it could run code. If you trust the file, pass "
            "--trust-checkpoint"
        ) from None


def safe_custom_objects(path: Path) -> dict[str, Any]:
    """Every pickled entry of an SB3 zip's ``data``, decoded with the allow-list unpickler."""
    try:
        with zipfile.ZipFile(path) as archive:
            data = json.loads(archive.read("data"))
    except (OSError, KeyError, zipfile.BadZipFile, json.JSONDecodeError, UnicodeDecodeError) as err:
        raise PolicyError(f"{path}: not a stable-baselines3 model zip ({err})") from None
    if not isinstance(data, dict):
        raise PolicyError(f"{path}: not a stable-baselines3 model zip (data is not a mapping)")
    return {
        key: _decode(key, entry, path)
        for key, entry in data.items()
        if isinstance(entry, dict) and ":serialized:" in entry
    }
