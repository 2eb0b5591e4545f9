"""The stable-baselines3 ``predict`` interface for rlformer policies.

SB3's tools (``evaluate_policy``, its callbacks, user scripts written for ``RecurrentPPO``) call
``model.predict(obs, state, episode_start, deterministic) -> (action, state)`` with batched
observations from a ``VecEnv``. :class:`Predictor` adapts an :class:`ActorCritic` to that call; the
recurrent state is the policy's memory, opaque to the caller, and ``episode_start`` resets it per
env slot exactly as it does during training.

Example:
    >>> from stable_baselines3.common.evaluation import evaluate_policy
    >>> predictor = Predictor.from_checkpoint("runs/my-run")        # doctest: +SKIP
    >>> mean, std = evaluate_policy(predictor, vec_env, n_eval_episodes=10)  # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from rlformer.models.actor_critic import ActorCritic, AgentState


class Predictor:
    """Wraps a trained :class:`ActorCritic` with SB3's ``predict`` signature."""

    def __init__(
        self, model: ActorCritic, device: torch.device | str = "cpu", seed: int = 0
    ) -> None:
        self.model = model.to(device).eval()
        self.device = torch.device(device)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.observation_space = model.observation_space
        self.action_space = model.action_space

    @classmethod
    def from_checkpoint(cls, path: str | Path, device: str = "cpu") -> Predictor:
        """Load from a run directory or checkpoint file (no config file needed)."""
        from rlformer.training import load_agent

        model, _, _ = load_agent(path, device)
        return cls(model, device)

    def predict(
        self,
        observation: np.ndarray,
        state: AgentState | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, AgentState]:
        """Actions for a batch of observations (a single unbatched observation is accepted too)."""
        obs = np.asarray(observation)
        single = obs.shape == self.observation_space.shape
        if single:
            obs = obs[None]
        batch = obs.shape[0]
        if state is None:
            state = self.model.initial_state(batch, self.device)
            starts = np.ones(batch, dtype=bool)
        else:
            starts = (
                np.zeros(batch, dtype=bool) if episode_start is None else np.asarray(episode_start)
            )
        out = self.model.act(
            torch.as_tensor(obs, device=self.device),
            state,
            torch.as_tensor(starts.astype(bool).reshape(batch), device=self.device),
            deterministic=deterministic,
            generator=self.generator,
        )
        action = self.model.env_action(out.action)
        return (action[0] if single else action), out.state
