"""D4RL reference returns for normalised scores: ``100 * (R - random) / (expert - random)``.

A score of 0 is a uniformly random policy and 100 an expert (D4RL's SAC experts), which puts
returns of different tasks on one scale. The numbers are D4RL's published references for its
MuJoCo locomotion tasks, shared by every dataset of a task (random, medium, medium-replay,
expert, ...). A dataset is matched to them by environment name (``Hopper-v5``,
``hopper-medium-v2``, ``mujoco/hopper/expert-v0``), so scores of our own Hopper-v5 recordings are
reported on D4RL's scale — with the caveat that the v5 physics differ slightly from D4RL's v2.
"""

from __future__ import annotations

import re
from pathlib import Path

# From D4RL's d4rl/infos.py, REF_MIN_SCORE / REF_MAX_SCORE for '<task>-random-v0', which the
# v1/v2 datasets reuse (github.com/Farama-Foundation/D4RL, d4rl/infos.py at commit 0ace16de).
REFERENCE_RETURNS: dict[str, tuple[float, float]] = {
    # task: (random policy return, expert return)
    "hopper": (-20.272305, 3234.3),
    "halfcheetah": (-280.178953, 12135.0),
    "walker2d": (1.629008, 4592.3),
    "ant": (-325.6, 3879.7),
}

# Tasks named like these but with other physics and other references (PyBullet ports).
_OTHER_FAMILIES = {"bullet", "pybullet"}


def reference_for(name: str | None) -> tuple[float, float] | None:
    """The (random, expert) returns for an env id, dataset name or file name, if D4RL has them.

    The name is split into lower-case words (``HalfCheetah-v5`` -> ``halfcheetah``, ``v5``) and
    one word must be a task name; for a file path only the file name counts, so a folder named
    ``ant`` does not make every file in it an Ant dataset. ``antmaze-*`` does not match ``ant``.
    """
    if not name:
        return None
    text = str(name).removeprefix("d4rl:").removeprefix("minari:")
    if text.endswith((".hdf5", ".h5")):
        text = Path(text).stem
    words = set(re.split(r"[^a-z0-9]+", text.lower()))
    if words & _OTHER_FAMILIES:
        return None
    matches = [REFERENCE_RETURNS[w] for w in sorted(words) if w in REFERENCE_RETURNS]
    return matches[0] if len(matches) == 1 else None


def normalized_score(episode_return: float, name: str | None) -> float | None:
    """D4RL-normalised score (0 = random, 100 = expert), or None without references."""
    reference = reference_for(name)
    if reference is None:
        return None
    low, high = reference
    return 100.0 * (episode_return - low) / (high - low)
