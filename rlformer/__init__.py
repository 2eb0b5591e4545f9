"""rlformer: reinforcement-learning agents with Transformer memory.

GTrXL policies trained online with PPO and Decision Transformers trained offline, both on one
memory-enabled attention core (:mod:`rlformer.core`).
"""

__version__ = "0.2.0"

from rlformer import moved_paths as _moved_paths  # noqa: E402

_moved_paths.install()  # import paths of earlier layouts keep working, with a warning

import rlformer_envs as _register_tasks  # noqa: E402, F401  (registers the rlformer/* env ids)
