"""Play a policy for N episodes in vector envs and collect per-episode results.

Memory is reset per episode through the episode-start flags, and each slot stops being counted
once the requested number of episodes has been collected, so the result does not favour short
episodes (a slot only starts an episode when one is still needed).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from rlformer.config import EnvConfig
from rlformer.moved_paths import moved_name
from rlformer.policies.base import Policy
from rlformer.rollout.action_masks import vector_masks
from rlformer.rollout.env_factory import vector_env_from_config


@dataclass
class EpisodeResults:
    """Per-episode returns, lengths and ``is_success`` (None where the env did not report it),
    all three in the same episode order."""

    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    successes: list[float | None] = field(default_factory=list)

    def success_values(self) -> list[float] | None:
        """One value per episode, or None if no episode reported ``is_success``.

        An episode that ended without reporting it (e.g. cut by a time limit shorter than the
        task's own) counts as a failure, so the rate is not taken over the lucky ones only.
        """
        if all(s is None for s in self.successes):
            return None
        return [0.0 if s is None else s for s in self.successes]

    @property
    def success_rate(self) -> float | None:
        values = self.success_values()
        return None if values is None else float(np.mean(values))

    def summary(self) -> dict[str, float]:
        out = {
            "episodes": float(len(self.returns)),
            "return_mean": float(np.mean(self.returns)),
            "return_std": float(np.std(self.returns)),
            "length_mean": float(np.mean(self.lengths)),
        }
        if self.success_rate is not None:
            out["success_rate"] = self.success_rate
        return out


def run_policy_episodes(
    policy: Policy,
    env_cfg: EnvConfig,
    episodes: int,
    num_envs: int = 8,
    seed: int = 0,
    deterministic: bool = True,
    target_return: float | None = None,
) -> EpisodeResults:
    """Play ``episodes`` full episodes with any policy (rlformer, stable-baselines3, exported).

    Slot i starts from seed ``seed + i``; sampled actions (``deterministic=False``) come from a
    generator seeded with ``seed``, so a sampled evaluation repeats exactly. Action masks that
    the env gives (``env.action_mask``) reach the policy. Return-conditioned policies aim each
    episode at ``target_return`` (their default when None).
    """
    num_envs = max(1, min(num_envs, episodes))
    envs = vector_env_from_config(env_cfg, num_envs)
    generator = None if deterministic else torch.Generator().manual_seed(seed)
    state = policy.initial_state(num_envs, target_return)
    obs, info = envs.reset(seed=[seed + i for i in range(num_envs)])
    episode_start = np.ones(num_envs, dtype=bool)
    reward: np.ndarray | None = None
    running = np.zeros(num_envs)
    lengths = np.zeros(num_envs, dtype=np.int64)
    started = num_envs  # episodes begun so far
    active = np.ones(num_envs, dtype=bool)
    results = EpisodeResults()
    try:
        while active.any():
            masks = vector_masks(info, num_envs, envs.single_action_space)
            actions, state = policy.act(
                obs, state, episode_start, reward, masks, deterministic, generator
            )
            obs, reward, term, trunc, info = envs.step(actions)
            running += reward
            lengths += 1
            done = term | trunc
            final_info = info.get("final_info", {})
            for slot in np.flatnonzero(done & active):
                results.returns.append(float(running[slot]))
                results.lengths.append(int(lengths[slot]))
                reported = (
                    "is_success" in final_info
                    and final_info.get("_is_success", np.ones(num_envs, bool))[slot]
                )
                results.successes.append(
                    float(final_info["is_success"][slot]) if reported else None
                )
                if started < episodes:
                    started += 1
                else:
                    active[slot] = False
            running[done] = 0.0
            lengths[done] = 0
            episode_start = done
    finally:
        envs.close()
    return results


def __getattr__(name: str) -> object:
    """Names an algorithm's package holds now, read from here in earlier layouts."""
    return moved_name(__name__, name)
