"""Building Gymnasium envs from config, with errors that say how to fix an unknown id.

An env comes from :class:`~rlformer.config.EnvConfig` exactly as ``gymnasium.make`` builds it:

1. ``env.imports`` are imported (modules that register envs: ``popgym``, ``minigrid``, yours);
   a ``module:function`` entry also calls that function, once per process, for packages that
   register their ids only when asked (``minatar.gym:register_envs``);
2. ``env.id`` is made; ``module:EnvId`` imports ``module`` first, as ``gymnasium.make`` does;
3. ``env.wrappers`` wrap it in order, each ``{class: module:Class, kwargs: {...}}``.

Every step runs wherever envs are built (this process, local or Ray rollout workers, evaluation
from a checkpoint, ``rlformer collect``), so the config alone describes the env. Problems
(a module that does not exist, a wrapper that cannot be imported or rejects its kwargs, spaces
rlformer cannot encode) are :class:`EnvError` s with one line that names the fix.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from rlformer.config.presets import PRESETS, family_preset
from rlformer.rollout.action_masks import ActionMaskError, ActionMaskToInfo

if TYPE_CHECKING:
    from rlformer.config import EnvConfig


class EnvError(ValueError):
    """An env that cannot be built from the given id / kwargs."""


def import_module(name: str, what: str) -> Any:
    """Import ``name`` or raise :class:`EnvError` saying where it was asked for and how to fix."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        missing = err.name or name
        raise EnvError(
            f"{what}: cannot import module {name!r} (no module named {missing!r}); install the "
            "package that provides it, or add its folder to PYTHONPATH"
        ) from None
    except Exception as err:  # the module exists but fails while importing
        first = (str(err).strip().splitlines() or [""])[0]
        raise EnvError(
            f"{what}: importing module {name!r} failed with {type(err).__name__}: {first}"
        ) from None


# The ``module:function`` entries of env.imports already called in this process: registering
# twice makes Gymnasium warn about every id it overrides, and worker processes call their own.
_CALLED: set[str] = set()


def import_env_modules(imports: Sequence[str]) -> None:
    """Import the modules of ``env.imports`` (they register env ids); call the function of each
    ``module:function`` entry, once per process.

    Entries that call functions and come from a checkpoint rather than the user are refused
    before they get here (:func:`rlformer.runs.checkpoints.refuse_saved_calls`).
    """
    for name in imports:
        what = f"env.imports entry {name!r}"
        if ":" not in name:
            import_module(name, what)
        elif name not in _CALLED:
            _call_entry(name, what)
            _CALLED.add(name)


def _call_entry(entry: str, what: str) -> None:
    """Call the function ``module:function`` names, without arguments; one-line errors."""
    function = resolve_object(entry, what)
    if not callable(function):
        raise EnvError(
            f"{what}: {entry.partition(':')[2]!r} is not callable (type "
            f"{type(function).__name__}); give module:function, or the module alone to import it"
        )
    try:
        function()
    except Exception as err:  # user code fails with any exception type
        first = (str(err).strip().splitlines() or [""])[0]
        raise EnvError(f"{what}: calling it failed with {type(err).__name__}: {first}") from None


def resolve_object(path: str, what: str) -> Any:
    """The object named by ``module:Name`` (dots after the colon walk attributes)."""
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise EnvError(f"{what}: {path!r} is not of the form module:Name")
    obj = import_module(module_name, what)
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise EnvError(
                f"{what}: module {module_name!r} has no attribute {attr!r}; check the spelling"
            )
        obj = getattr(obj, part)
    return obj


def _register_own_envs() -> None:
    # Importing the package registers the rlformer/* tasks (gymnasium has no plugin hook).
    import rlformer_envs  # noqa: F401


def check_env_id(env_id: str, imports: Sequence[str] = ()) -> None:
    """Raise :class:`EnvError` naming close matches when ``env_id`` is not registered.

    ``module:EnvId`` imports ``module`` first (as ``gymnasium.make`` does), so a user package
    that registers its envs on import needs no other set-up.
    """
    _register_own_envs()
    import_env_modules(imports)
    if ":" in env_id:
        module_name, _, env_id = env_id.partition(":")
        import_module(module_name, f"env.id {module_name + ':' + env_id!r}")
    if env_id in gym.registry:
        return
    close = difflib.get_close_matches(env_id, list(gym.registry.keys()), n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    family = family_preset(env_id)
    if family is not None:
        # A family's ids exist only once its package is imported (ids are case-sensitive too).
        package = PRESETS[family]["env"]["imports"][0]
        hint += f" Its family's ids come with env.imports: [{package}] (or preset: {family})."
    elif env_id.startswith("MinAtar/"):
        hint += " MinAtar's ids come with env.imports: ['minatar.gym:register_envs']."
    raise EnvError(
        f"unknown env id {env_id!r}.{hint} List ids with "
        '`python -c "import gymnasium, rlformer_envs; gymnasium.pprint_registry()"`'
    )


def make_env(
    env_id: str,
    kwargs: dict[str, Any] | None = None,
    max_episode_steps: int | None = None,
    imports: Sequence[str] = (),
    wrappers: Sequence[Any] = (),
    action_mask: str | None = None,
) -> gym.Env:
    """``gymnasium.make`` with our tasks registered, imports, wrappers and readable errors.

    ``wrappers`` are :class:`~rlformer.config.WrapperConfig` s (``cls`` + ``kwargs``);
    ``action_mask`` (``env.action_mask``) puts the env's masks where rollouts, evaluation and
    ``collect`` read them (:mod:`rlformer.rollout.action_masks`), outside every wrapper.
    """
    check_env_id(env_id, imports)
    extra: dict[str, Any] = dict(kwargs or {})
    if max_episode_steps is not None:
        extra["max_episode_steps"] = max_episode_steps
    try:
        env = gym.make(env_id, **extra)
    except TypeError as err:
        raise EnvError(f"env {env_id!r} rejected env.kwargs {kwargs}: {err}") from None
    except Exception as err:  # constructors check their kwargs with any exception type
        detail = " ".join(str(err).split())
        raise EnvError(
            f"env {env_id!r} could not be built with env.kwargs {kwargs}: "
            f"{type(err).__name__}: {detail}"
        ) from None
    bare = [w for w in wrappers if w.unwrapped]
    if bare:
        # Some wrappers (popgym's) insist on the env class itself: wrap env.unwrapped, then put
        # gymnasium.make's time limit back around it.
        limit = env.spec.max_episode_steps if env.spec is not None else None
        env = _wrap(env.unwrapped, env_id, bare, 0)
        if limit is not None:
            env = gym.wrappers.TimeLimit(env, limit)
    env = _wrap(env, env_id, [w for w in wrappers if not w.unwrapped], len(bare))
    if action_mask is None:
        return env
    try:
        return ActionMaskToInfo(env, action_mask)
    except ActionMaskError as err:
        env.close()
        raise EnvError(f"env {env_id!r}: {err}") from None


def _wrap(env: gym.Env, env_id: str, wrappers: Sequence[Any], first_index: int) -> gym.Env:
    for index, wrapper in enumerate(wrappers, start=first_index):
        what = f"env.wrappers[{index}] ({wrapper.cls})"
        cls = resolve_object(wrapper.cls, what)
        try:
            env = cls(env, **wrapper.kwargs)
        except Exception as err:  # wrappers reject envs and kwargs with many exception types
            env.close()
            first = (str(err).strip().splitlines() or [""])[0]
            hint = ""
            if not wrapper.unwrapped and wrapper.cls.startswith("popgym."):
                hint = "; popgym's wrappers need the bare env: add `unwrapped: true` to it"
            raise EnvError(
                f"{what} could not wrap {env_id!r} with kwargs {dict(wrapper.kwargs)}: "
                f"{type(err).__name__}: {first}{hint}"
            ) from None
    return env


def env_from_config(cfg: EnvConfig) -> gym.Env:
    """One env as ``cfg`` describes it (imports, id, kwargs, time limit, wrappers)."""
    return make_env(
        cfg.id, cfg.kwargs, cfg.max_episode_steps, cfg.imports, cfg.wrappers, cfg.action_mask
    )


def vector_env_from_config(cfg: EnvConfig, num_envs: int) -> SyncVectorEnv:
    """``num_envs`` envs as ``cfg`` describes them, in one same-step-autoreset vector env."""
    return make_vector_env(
        cfg.id,
        num_envs,
        cfg.kwargs,
        cfg.max_episode_steps,
        cfg.imports,
        cfg.wrappers,
        cfg.action_mask,
    )


def describe_env(cfg: EnvConfig) -> str:
    """``env 'id'`` plus its wrappers, for error messages."""
    text = f"env {cfg.id!r}"
    if cfg.wrappers:
        text += " wrapped in " + " -> ".join(w.cls for w in cfg.wrappers)
    return text


def check_spaces(observation_space: gym.Space, action_space: gym.Space, cfg: EnvConfig) -> None:
    """Raise :class:`EnvError` when rlformer cannot encode the spaces (after the wrappers)."""
    from rlformer.networks.spaces import SpaceError, check_action_space, check_observation_space

    try:
        check_observation_space(observation_space)
        check_action_space(action_space)
    except SpaceError as err:
        raise EnvError(f"{describe_env(cfg)}: {err}") from None


def env_thunk(
    env_id: str,
    kwargs: dict[str, Any] | None,
    max_episode_steps: int | None,
    imports: Sequence[str] = (),
    wrappers: Sequence[Any] = (),
    action_mask: str | None = None,
) -> Callable[[], gym.Env]:
    """A picklable-by-closure constructor for vector envs."""
    return lambda: make_env(env_id, kwargs, max_episode_steps, imports, wrappers, action_mask)


def make_vector_env(
    env_id: str,
    num_envs: int,
    kwargs: dict[str, Any] | None = None,
    max_episode_steps: int | None = None,
    imports: Sequence[str] = (),
    wrappers: Sequence[Any] = (),
    action_mask: str | None = None,
) -> SyncVectorEnv:
    """In-process vector env that resets finished slots in the same step.

    SAME_STEP autoreset returns the first observation of the next episode together with the
    final observation in ``info["final_obs"]``, which is what truncation bootstrapping needs.
    """
    check_env_id(env_id, imports)
    return SyncVectorEnv(
        [
            env_thunk(env_id, kwargs, max_episode_steps, imports, wrappers, action_mask)
            for _ in range(num_envs)
        ],
        autoreset_mode=AutoresetMode.SAME_STEP,
    )
