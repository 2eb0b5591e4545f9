"""Run a policy for N episodes in vector envs and collect per-episode results.

Memory is reset per episode through the episode-start flags, and each slot stops being counted
once the requested number of episodes has been collected, so the result does not favour short
episodes (a slot only starts an episode when one is still needed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from rlformer.config import EnvConfig
from rlformer.models.actor_critic import ActorCritic
from rlformer.models.encoders import to_torch
from rlformer.models.spaces import flatten_obs
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


class PolicyActions:
    """Adapts an :class:`ActorCritic` to ``act(obs, episode_start) -> env actions``."""

    def __init__(
        self,
        model: ActorCritic,
        num_envs: int,
        deterministic: bool,
        seed: int,
        device: torch.device | str = "cpu",
    ) -> None:
        self.model = model.eval()
        self.state = model.initial_state(num_envs, device)
        self.deterministic, self.device = deterministic, device
        self.generator = torch.Generator().manual_seed(seed) if str(device) == "cpu" else None

    @torch.no_grad()
    def act(self, obs: Any, episode_start: np.ndarray) -> np.ndarray:
        """Actions for a vector env's batched observations (Dict / Tuple ones too)."""
        tree = flatten_obs(self.model.observation_space, obs)
        out = self.model.act(
            to_torch(tree, self.device),
            self.state,
            torch.as_tensor(episode_start, device=self.device),
            deterministic=self.deterministic,
            generator=self.generator,
        )
        self.state = out.state
        return self.model.env_action(out.action)

    def observe_reward(self, reward: np.ndarray) -> None:
        """The env's reward for the last actions (the previous-reward input, when enabled)."""
        self.state = self.state.with_reward(self.model.scale_rewards(reward))


class ActionSource(Protocol):
    """Anything that picks actions for a batch of env slots and resets memory at episode starts."""

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray: ...


def run_episodes(
    model: ActorCritic,
    env_cfg: EnvConfig,
    episodes: int,
    num_envs: int = 8,
    deterministic: bool = True,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> EpisodeResults:
    """Play ``episodes`` full episodes with ``model`` (seeded: slot i starts from seed + i)."""
    slots = max(1, min(num_envs, episodes))
    source = PolicyActions(model, slots, deterministic, seed, device)
    return run_source_episodes(source, env_cfg, episodes, slots, seed)


def run_source_episodes(
    source: ActionSource, env_cfg: EnvConfig, episodes: int, num_envs: int, seed: int = 0
) -> EpisodeResults:
    """Play ``episodes`` full episodes with any action source (rlformer or stable-baselines3)."""
    num_envs = max(1, min(num_envs, episodes))
    envs = vector_env_from_config(env_cfg, num_envs)
    observe_reward = getattr(source, "observe_reward", None)
    obs, _ = envs.reset(seed=[seed + i for i in range(num_envs)])
    episode_start = np.ones(num_envs, dtype=bool)
    running = np.zeros(num_envs)
    lengths = np.zeros(num_envs, dtype=np.int64)
    started = num_envs  # episodes begun so far
    active = np.ones(num_envs, dtype=bool)
    results = EpisodeResults()
    while active.any():
        obs, reward, term, trunc, info = envs.step(source.act(obs, episode_start))
        if observe_reward is not None:
            observe_reward(reward)
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
            results.successes.append(float(final_info["is_success"][slot]) if reported else None)
            if started < episodes:
                started += 1
            else:
                active[slot] = False
        running[done] = 0.0
        lengths[done] = 0
        episode_start = done
    envs.close()
    return results
