"""The ``rlformer_test/*`` env ids, registered without importing the envs' module.

Every worker of the tests' shared Ray runs :func:`register_test_envs` as it starts
(tests/conftest.py), Serve's controller and proxy included: registering by entry-point string
keeps torch and rlformer out of the processes that never make one of these envs (about 2 s of
CPU and 300 MB each).
"""

from __future__ import annotations

import gymnasium as gym

ENVS_MODULE = "tests.reliability.tiny"


def register_test_envs() -> None:
    """Register ``rlformer_test/*`` ids in this process (idempotent)."""
    if "rlformer_test/Faulty-v0" not in gym.registry:
        gym.register("rlformer_test/Faulty-v0", entry_point=f"{ENVS_MODULE}:FaultyEnv")
        gym.register("rlformer_test/Locked-v0", entry_point=f"{ENVS_MODULE}:make_locked_cartpole")
