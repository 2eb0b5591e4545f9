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
from typing import Any

import numpy as np
import torch

from rlformer.models.actor_critic import ActorCritic, AgentState
from rlformer.models.encoders import to_torch
from rlformer.models.spaces import flatten_obs, leaf_spaces, tree_first, tree_map


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
        observation: Any,
        state: AgentState | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
        reward: np.ndarray | None = None,
    ) -> tuple[np.ndarray, AgentState]:
        """Actions for a batch of observations (a single unbatched observation is accepted too).

        Observations of Dict / Tuple spaces come as a VecEnv gives them (a dict / tuple of
        batched arrays). Actions are in the env's format for every action space (Box clipped
        to its bounds, MultiDiscrete / Discrete with their ``start``). A policy trained with
        ``model.prev_action_reward`` takes its previous action from ``state``; its previous
        reward is ``reward`` (the rewards of the last step, SB3's ``predict`` has no such
        argument) and 0 when not given.
        """
        tree = flatten_obs(self.observation_space, observation)
        leaves = leaf_spaces(self.observation_space)
        first_path, first_space = next(iter(leaves.items()))
        first = tree[first_path] if isinstance(tree, dict) else tree
        single = first.shape == first_space.shape
        if single:
            tree = tree_map(lambda a: a[None], tree)
        batch = tree_first(tree).shape[0]
        if state is None:
            state = self.model.initial_state(batch, self.device)
            starts = np.ones(batch, dtype=bool)
        else:
            starts = (
                np.zeros(batch, dtype=bool) if episode_start is None else np.asarray(episode_start)
            )
        if reward is not None:
            state = state.with_reward(self.model.scale_rewards(np.asarray(reward).reshape(batch)))
        out = self.model.act(
            to_torch(tree, self.device),
            state,
            torch.as_tensor(starts.astype(bool).reshape(batch), device=self.device),
            deterministic=deterministic,
            generator=self.generator,
        )
        action = self.model.env_action(out.action)
        return (action[0] if single else action), out.state
