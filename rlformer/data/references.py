"""D4RL reference returns for normalised scores: ``100 * (R - random) / (expert - random)``.

Values are D4RL's published per-environment references (``REF_MIN_SCORE`` / ``REF_MAX_SCORE`` in
the d4rl package's ``infos.py``) for its MuJoCo locomotion tasks. We match a dataset to them by
environment name (``Hopper-v5``, ``hopper-medium-v2`` ...), so scores of our own Hopper-v5
recordings are on D4RL's scale — with the caveat that v5 physics differ slightly from v2.
"""

from __future__ import annotations

REFERENCE_RETURNS: dict[str, tuple[float, float]] = {
    # name: (random policy return, expert return)
    "hopper": (-20.272305, 3234.3),
    "halfcheetah": (-280.178953, 12135.0),
    "walker2d": (1.629008, 4592.3),
    "ant": (-325.6, 3879.7),
}


def reference_for(env_name: str | None) -> tuple[float, float] | None:
    """The (random, expert) references for an env id or D4RL dataset name, if known."""
    if not env_name:
        return None
    stem = env_name.split("/")[-1].lower().replace("_", "").split("-")[0]
    return REFERENCE_RETURNS.get(stem)


def normalized_score(episode_return: float, env_name: str | None) -> float | None:
    """D4RL-normalised score (0 = random, 100 = expert), or None without references."""
    reference = reference_for(env_name)
    if reference is None:
        return None
    low, high = reference
    return 100.0 * (episode_return - low) / (high - low)
