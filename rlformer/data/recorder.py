"""``rlformer collect``: record a dataset in the D4RL layout from any action source."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

import rlformer
from rlformer.data.d4rl_format import write_d4rl
from rlformer.data.episodes import Dataset, Episode
from rlformer.data.policies import (
    ActionSource,
    NoisyPolicy,
    RandomPolicy,
    RlformerPolicy,
    SB3Policy,
)
from rlformer.rollout.env_factory import make_vector_env


def make_source(policy: str, envs: Any, num_envs: int, seed: int) -> ActionSource:
    """``random`` | ``sb3:PATH.zip`` | an rlformer run directory or checkpoint."""
    if policy == "random":
        return RandomPolicy(envs.single_action_space, num_envs, seed)
    if policy.startswith("sb3:"):
        return SB3Policy(policy.removeprefix("sb3:"))
    return RlformerPolicy(policy, num_envs, seed)


class _Track:
    """Transitions of one env slot's running episode."""

    def __init__(self) -> None:
        self.obs: list[np.ndarray] = []
        self.actions: list[np.ndarray] = []
        self.rewards: list[float] = []
        self.next_obs: list[np.ndarray] = []

    def episode(self, terminated: bool) -> Episode:
        return Episode(
            observations=np.stack(self.obs),
            actions=np.stack(self.actions),
            rewards=np.asarray(self.rewards, dtype=np.float32),
            terminated=terminated,
            truncated=not terminated,
            next_observations=np.stack(self.next_obs),
        )


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
) -> Dataset:
    """Record ``steps`` transitions (split over ``num_envs`` slots) and write them to ``out``.

    Episodes still running at the end are kept as truncated, so no transition is lost.
    """
    envs = make_vector_env(env_id, num_envs, env_kwargs)
    source: ActionSource = make_source(policy, envs, num_envs, seed)
    if noise > 0 or random_fraction > 0:
        source = NoisyPolicy(source, envs.single_action_space, noise, random_fraction, seed)
    obs, _ = envs.reset(seed=[seed + i for i in range(num_envs)])
    starts = np.ones(num_envs, dtype=bool)
    tracks = [_Track() for _ in range(num_envs)]
    episodes: list[Episode] = []
    bar = tqdm(total=steps, unit="step", disable=not (progress and sys.stderr.isatty()))
    recorded = 0
    while recorded < steps:
        actions = source.act(obs, starts)
        next_obs, rewards, term, trunc, info = envs.step(actions)
        done = term | trunc
        for i, track in enumerate(tracks):
            if recorded >= steps:
                break
            final = info["final_obs"][i] if done[i] else next_obs[i]
            track.obs.append(obs[i])
            track.actions.append(np.asarray(actions[i]))
            track.rewards.append(float(rewards[i]))
            track.next_obs.append(np.asarray(final))
            recorded += 1
            if done[i]:
                episodes.append(track.episode(terminated=bool(term[i])))
                tracks[i] = _Track()
        bar.update(min(num_envs, steps - bar.n))
        obs, starts = next_obs, done
    bar.close()
    envs.close()
    episodes += [t.episode(terminated=False) for t in tracks if t.rewards]
    metadata = {
        "env_id": env_id,
        "policy": policy,
        "seed": seed,
        "noise": noise,
        "random_fraction": random_fraction,
        "env_kwargs": env_kwargs or {},
        "episode_returns": [e.episode_return for e in episodes],
        "rlformer_version": rlformer.__version__,
    }
    write_d4rl(out, episodes, metadata)
    return Dataset(episodes, source=str(out), metadata=metadata)
