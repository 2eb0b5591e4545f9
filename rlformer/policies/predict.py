"""The stable-baselines3 ``predict`` interface for any rlformer policy.

SB3's tools (``evaluate_policy``, its callbacks, user scripts written for ``RecurrentPPO``) call
``model.predict(obs, state, episode_start, deterministic) -> (action, state)`` with batched
observations from a ``VecEnv``. :class:`Predictor` adapts a :class:`~rlformer.policies.Policy`
to that call; the state is the policy's explicit state, and ``episode_start`` resets it per row
exactly as it does during training.

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

from rlformer.config.sections.registry import load_attr, registered
from rlformer.networks.spaces import flatten_obs, leaf_spaces, tree_first
from rlformer.policies.base import Policy, PolicyState


class Predictor:
    """Wraps a policy (or a bare network an algorithm acts with, such as PPO's
    :class:`~rlformer.networks.actor_critic.ActorCritic`) with SB3's ``predict`` signature."""

    def __init__(self, policy: Any, seed: int = 0) -> None:
        self.policy: Policy = as_policy(policy)
        self.generator = torch.Generator().manual_seed(seed)
        self.observation_space = policy.observation_space
        self.action_space = policy.action_space

    @classmethod
    def from_checkpoint(cls, path: str | Path, trust: bool = False) -> Predictor:
        """Load from a run directory or checkpoint file (no config file needed)."""
        from rlformer.policies.registry import load_policy

        return cls(load_policy(path, trust))

    def predict(
        self,
        observation: Any,
        state: PolicyState | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
        reward: np.ndarray | None = None,
        action_masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, PolicyState]:
        """Actions for a batch of observations (a single unbatched observation is accepted too).

        Observations of Dict / Tuple spaces come as a VecEnv gives them (a dict / tuple of
        batched arrays). Actions are in the env's format for every action space (Box clipped
        to its bounds, MultiDiscrete / Discrete with their ``start``). ``reward`` is each row's
        reward for its last action (SB3's ``predict`` has no such argument): a policy trained
        with ``model.prev_action_reward`` reads it, a Decision Transformer needs it.
        ``action_masks`` follows sb3-contrib's ``MaskablePPO.predict``.
        """
        tree = flatten_obs(self.observation_space, observation)
        leaves = leaf_spaces(self.observation_space)
        first_path, first_space = next(iter(leaves.items()))
        first = tree[first_path] if isinstance(tree, dict) else tree
        single = first.shape == first_space.shape
        if single:
            observation = _add_batch_axis(observation)
            if action_masks is not None:
                action_masks = np.asarray(action_masks)[None]
        batch = 1 if single else tree_first(tree).shape[0]
        if state is None:
            state = self.policy.initial_state(batch)
            starts = np.ones(batch, dtype=bool)
        else:
            starts = (
                np.zeros(batch, dtype=bool) if episode_start is None else np.asarray(episode_start)
            )
        if reward is not None:
            reward = np.asarray(reward, dtype=np.float64).reshape(batch)
        action, state = self.policy.act(
            observation,
            state,
            starts.astype(bool).reshape(batch),
            reward,
            action_masks,
            deterministic,
            self.generator,
        )
        return (action[0] if single else action), state


def _add_batch_axis(observation: Any) -> Any:
    """One observation as a batch of one, nested Dict / Tuple structure kept."""
    if isinstance(observation, dict):
        return {key: _add_batch_axis(value) for key, value in observation.items()}
    if isinstance(observation, tuple):
        return tuple(_add_batch_axis(value) for value in observation)
    return np.asarray(observation)[None]


def as_policy(obj: Any) -> Policy:
    """The policy of the algorithm whose bare network ``obj`` is (networks have ``act`` methods
    of their own, with other arguments), else ``obj`` itself when it is a policy."""
    for spec in registered():
        if spec.network_policy is not None:
            policy: Policy | None = load_attr(spec.network_policy)(obj)
            if policy is not None:
                return policy
    if isinstance(obj, Policy):
        return obj
    raise TypeError(f"{type(obj).__name__} is neither a policy nor a network of an algorithm")
