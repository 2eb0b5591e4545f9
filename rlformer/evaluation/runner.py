"""Run a policy for N episodes in vector envs and collect per-episode results.

Memory is reset per episode through the episode-start flags, and each slot stops being counted
once the requested number of episodes has been collected, so the result does not favour short
episodes (a slot only starts an episode when one is still needed).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from rlformer.config import EnvConfig
from rlformer.models.actor_critic import ActorCritic
from rlformer.rollout.env_factory import make_vector_env


@dataclass
class EpisodeResults:
    """Per-episode returns and lengths; successes where the env reports ``is_success``."""

    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    successes: list[float] = field(default_factory=list)

    @property
    def success_rate(self) -> float | None:
        return float(np.mean(self.successes)) if self.successes else None

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


@torch.no_grad()
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
    num_envs = max(1, min(num_envs, episodes))
    envs = make_vector_env(env_cfg.id, num_envs, env_cfg.kwargs, env_cfg.max_episode_steps)
    generator = torch.Generator().manual_seed(seed)
    model.eval()
    obs, _ = envs.reset(seed=[seed + i for i in range(num_envs)])
    state = model.initial_state(num_envs, device)
    episode_start = np.ones(num_envs, dtype=bool)
    running = np.zeros(num_envs)
    lengths = np.zeros(num_envs, dtype=np.int64)
    started = num_envs  # episodes begun so far
    active = np.ones(num_envs, dtype=bool)
    results = EpisodeResults()
    while active.any():
        out = model.act(
            torch.as_tensor(obs, device=device),
            state,
            torch.as_tensor(episode_start, device=device),
            deterministic=deterministic,
            generator=generator if str(device) == "cpu" else None,
        )
        obs, reward, term, trunc, info = envs.step(model.env_action(out.action))
        running += reward
        lengths += 1
        done = term | trunc
        final_info = info.get("final_info", {})
        for slot in np.flatnonzero(done & active):
            results.returns.append(float(running[slot]))
            results.lengths.append(int(lengths[slot]))
            if (
                "is_success" in final_info
                and final_info.get("_is_success", np.ones(num_envs, bool))[slot]
            ):
                results.successes.append(float(final_info["is_success"][slot]))
            if started < episodes:
                started += 1
            else:
                active[slot] = False
        running[done] = 0.0
        lengths[done] = 0
        state, episode_start = out.state, done
    envs.close()
    return results
