"""Building Gymnasium envs from config, with errors that say how to fix an unknown id."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode, SyncVectorEnv


class EnvError(ValueError):
    """An env that cannot be built from the given id / kwargs."""


def _register_own_envs() -> None:
    # Importing the package registers the rlformer/* tasks (gymnasium has no plugin hook).
    import rlformer_envs  # noqa: F401


def check_env_id(env_id: str) -> None:
    """Raise :class:`EnvError` naming close matches when ``env_id`` is not registered."""
    _register_own_envs()
    if env_id in gym.registry:
        return
    close = difflib.get_close_matches(env_id, list(gym.registry.keys()), n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise EnvError(
        f"unknown env id {env_id!r}.{hint} List ids with "
        '`python -c "import gymnasium, rlformer_envs; gymnasium.pprint_registry()"`'
    )


def make_env(
    env_id: str, kwargs: dict[str, Any] | None = None, max_episode_steps: int | None = None
) -> gym.Env:
    """``gymnasium.make`` with our tasks registered and readable errors."""
    check_env_id(env_id)
    extra: dict[str, Any] = dict(kwargs or {})
    if max_episode_steps is not None:
        extra["max_episode_steps"] = max_episode_steps
    try:
        return gym.make(env_id, **extra)
    except TypeError as err:
        raise EnvError(f"env {env_id!r} rejected env.kwargs {kwargs}: {err}") from None
    except Exception as err:  # constructors check their kwargs with any exception type
        detail = " ".join(str(err).split())
        raise EnvError(
            f"env {env_id!r} could not be built with env.kwargs {kwargs}: "
            f"{type(err).__name__}: {detail}"
        ) from None


def env_thunk(
    env_id: str, kwargs: dict[str, Any] | None, max_episode_steps: int | None
) -> Callable[[], gym.Env]:
    """A picklable-by-closure constructor for vector envs."""
    return lambda: make_env(env_id, kwargs, max_episode_steps)


def make_vector_env(
    env_id: str,
    num_envs: int,
    kwargs: dict[str, Any] | None = None,
    max_episode_steps: int | None = None,
) -> SyncVectorEnv:
    """In-process vector env that resets finished slots in the same step.

    SAME_STEP autoreset returns the first observation of the next episode together with the
    final observation in ``info["final_obs"]``, which is what truncation bootstrapping needs.
    """
    check_env_id(env_id)
    return SyncVectorEnv(
        [env_thunk(env_id, kwargs, max_episode_steps) for _ in range(num_envs)],
        autoreset_mode=AutoresetMode.SAME_STEP,
    )
