"""``rlformer collect``: record a dataset in the D4RL layout from any policy.

Transitions come from an in-process vector env with same-step autoreset, so the true final
observation of an episode is kept as its last ``next_observation``. Episodes still running
when the step budget is spent are kept and marked truncated: no transition is lost, and the
D4RL reader splits the file back into exactly these episodes.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from tqdm import tqdm

from rlformer.config import EnvConfig
from rlformer.core.version import VERSION
from rlformer.data.d4rl_format import write_d4rl
from rlformer.data.episodes import Dataset, Episode
from rlformer.networks.spaces import Tree, flatten_obs, is_composite, tree_stack
from rlformer.policies import Policy, load_policy
from rlformer.policies.simple import NoisyPolicy, RandomPolicy
from rlformer.rollout.action_masks import vector_masks
from rlformer.rollout.env_factory import EnvError, vector_env_from_config


def recording_policy(policy: str, envs: Any, seed: int, trust: bool = False) -> Policy:
    """``random`` | ``sb3:PATH.zip`` | an rlformer run directory or checkpoint file (any
    algorithm's: a Decision Transformer aims at its first configured target return)."""
    if policy == "random":
        return RandomPolicy(envs.single_observation_space, envs.single_action_space, seed)
    return load_policy(policy, trust)


@dataclass
class _Track:
    """Transitions of one env slot's running episode."""

    obs: list[Tree] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    next_obs: list[Tree] = field(default_factory=list)

    def episode(self, terminated: bool) -> Episode:
        return Episode(
            observations=tree_stack(self.obs),
            actions=np.stack(self.actions),
            rewards=np.asarray(self.rewards, dtype=np.float32),
            terminated=terminated,
            truncated=not terminated,
            next_observations=tree_stack(self.next_obs),
        )


class _Progress:
    """A tqdm bar on a terminal; otherwise a plain line per tenth of the work (logs, CI)."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.done = total, 0
        self.interactive = enabled and sys.stderr.isatty()
        self.plain = enabled and not self.interactive
        self.bar = tqdm(total=total, unit="step", disable=not self.interactive)
        self.tenths_reported = 0

    def update(self, count: int, episodes: int) -> None:
        self.done += count
        self.bar.update(count)
        tenths = 10 * self.done // self.total
        if self.plain and tenths > self.tenths_reported:
            print(
                f"collected {self.done}/{self.total} steps, {episodes} episodes finished",
                file=sys.stderr,
                flush=True,
            )
            self.tenths_reported = tenths

    def close(self) -> None:
        self.bar.close()


def collect_dataset(
    policy: str,
    env_id: str,
    steps: int,
    out: str | Path,
    seed: int = 0,
    num_envs: int = 8,
    noise: float = 0.0,
    random_fraction: float = 0.0,
    env_kwargs: dict[str, Any] | None = None,
    progress: bool = True,
    deterministic: bool = True,
    trust: bool = False,
    env_cfg: EnvConfig | None = None,
) -> Dataset:
    """Record ``steps`` transitions (over ``num_envs`` slots) and write them to ``out``.

    Args:
        policy: ``random``, ``sb3:PATH.zip`` or an rlformer run directory / checkpoint.
        env_id: Gymnasium id (rlformer's own tasks included).
        steps: Transitions to record in total.
        out: HDF5 file to write (D4RL layout, with metadata attributes).
        seed: Seeds env slot ``i`` with ``seed + i``, the random policy and the action noise.
        num_envs: Env slots stepped together.
        noise: Gaussian noise (x half the action range) for Box, epsilon for Discrete.
        random_fraction: Probability of replacing an action by a uniformly random one.
        env_kwargs: Extra ``gymnasium.make`` arguments.
        progress: Show a progress bar (plain lines when stderr is not a terminal).
        deterministic: Greedy / mean actions of trained policies (False samples them).
        trust: Load a checkpoint or SB3 zip even if it needs unpickling (trusted files only).
        env_cfg: Imports and wrappers to build the env with (``env_id`` and ``env_kwargs``
            take precedence over its id and kwargs); an rlformer policy's training env config
            when recording from a run.

    Dict / Tuple observations are stored leaf by leaf, as groups of the HDF5 file (images
    compressed; :mod:`rlformer.data.d4rl_format`).

    Returns:
        The recorded dataset, as the D4RL reader will read it back.
    """
    base = env_cfg or EnvConfig(id=env_id)
    update: dict[str, Any] = {"id": env_id, "kwargs": dict(env_kwargs or {})}
    if env_id != base.id:
        update["max_episode_steps"] = None  # the training env's time limit is not this env's
    cfg = base.model_copy(update=update)
    envs = vector_env_from_config(cfg, num_envs)
    try:
        _check_storable(envs.single_observation_space, env_id)
        actor: Policy = recording_policy(policy, envs, seed, trust)
        if noise > 0 or random_fraction > 0:
            actor = NoisyPolicy(actor, noise, random_fraction, seed)
        generator = None if deterministic else torch.Generator().manual_seed(seed)
        episodes = _record(
            envs, actor, steps, seed, num_envs, _Progress(steps, progress), generator
        )
    finally:
        envs.close()
    metadata = {
        "env_id": env_id,
        "policy": policy,
        "seed": seed,
        "num_envs": num_envs,
        "noise": noise,
        "random_fraction": random_fraction,
        "deterministic": deterministic,
        "env_kwargs": env_kwargs or {},
        "episode_returns": [e.episode_return for e in episodes],
        "rlformer_version": VERSION,
    }
    write_d4rl(out, episodes, metadata)
    return Dataset(episodes, source=str(out), metadata=metadata)


def _flattenable(space: gym.Space) -> bool:
    try:
        return bool(space.is_np_flattenable)
    except NotImplementedError:  # gymnasium's Text, Graph, Sequence spaces
        return False


def _check_storable(space: gym.Space, env_id: str) -> None:
    """:class:`EnvError` naming the parts of ``space`` a D4RL file's arrays cannot hold
    (MiniGrid's mission text, say), with how to drop them, before any step is taken."""
    if _flattenable(space):
        return
    if isinstance(space, gym.spaces.Dict | gym.spaces.Tuple):
        items = space.spaces.items() if isinstance(space, gym.spaces.Dict) else enumerate(space)
        parts = ", ".join(
            f"{key} ({type(sub).__name__})" for key, sub in items if not _flattenable(sub)
        )
    else:
        parts = type(space).__name__
    raise EnvError(
        f"{env_id}'s observations have parts a D4RL file cannot store ({parts}); drop them "
        "with a wrapper: a family preset such as --set preset=minigrid, or env.wrappers in a "
        "config given with --config"
    )


def _record(
    envs: Any,
    policy: Policy,
    steps: int,
    seed: int,
    num_envs: int,
    progress: _Progress,
    generator: torch.Generator | None,
) -> list[Episode]:
    obs, info = envs.reset(seed=[seed + i for i in range(num_envs)])
    space = envs.single_observation_space
    state = policy.initial_state(num_envs)
    rewards: np.ndarray | None = None

    def row(batched: Any, i: int) -> Tree:
        """Slot i's observation; Dict / Tuple ones as trees (leaf path -> array)."""
        if is_composite(space):
            return flatten_obs(space, _slot(batched, i))
        return np.asarray(batched[i])

    starts = np.ones(num_envs, dtype=bool)
    tracks = [_Track() for _ in range(num_envs)]
    episodes: list[Episode] = []
    recorded = 0
    try:
        while recorded < steps:
            masks = vector_masks(info, num_envs, envs.single_action_space)
            actions, state = policy.act(
                obs, state, starts, rewards, masks, generator is None, generator
            )
            next_obs, rewards, term, trunc, info = envs.step(actions)
            done = term | trunc
            take = min(num_envs, steps - recorded)  # the last step may record only some slots
            for i in range(take):
                track = tracks[i]
                track.obs.append(row(obs, i))
                track.actions.append(np.asarray(actions[i]))
                track.rewards.append(float(rewards[i]))
                if done[i]:
                    final = info["final_obs"][i]
                    track.next_obs.append(
                        flatten_obs(space, final) if is_composite(space) else np.asarray(final)
                    )
                else:
                    track.next_obs.append(row(next_obs, i))
                if done[i]:
                    episodes.append(track.episode(terminated=bool(term[i])))
                    tracks[i] = _Track()
            recorded += take
            progress.update(take, len(episodes))
            obs, starts = next_obs, done
    finally:
        progress.close()
    return episodes + [t.episode(terminated=False) for t in tracks if t.rewards]


def _slot(batched: Any, i: int) -> Any:
    """Row ``i`` of a vector env's (nested dict / tuple) batched observation."""
    if isinstance(batched, dict):
        return {key: _slot(value, i) for key, value in batched.items()}
    if isinstance(batched, tuple):
        return tuple(_slot(value, i) for value in batched)
    return batched[i]
