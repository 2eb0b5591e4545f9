"""A rollout worker: one vector env, a CPU copy of the policy, each slot's memory across fragments.

The same class runs in-process (local backend) and inside a Ray actor (Ray backend), so both
backends return identical data for identical seeds and weights. Everything that determines the
next fragment (env states, last observations, memory, action-sampling RNG) can be exported with
:meth:`RolloutWorker.get_state` and restored, which is how a resumed run continues exactly.
"""

from __future__ import annotations

import os
import pickle
import time
from typing import Any

import cloudpickle  # a gymnasium dependency; pickles wrappers that hold lambdas
import numpy as np
import torch

from rlformer.config import EnvConfig, ModelConfig
from rlformer.models.actor_critic import ActorCritic, AgentState
from rlformer.models.encoders import to_torch
from rlformer.models.normalization import Moments, moments
from rlformer.models.spaces import flatten_obs, tree_map, tree_set, tree_stack
from rlformer.rollout.env_factory import vector_env_from_config
from rlformer.rollout.fragment import Fragment


def worker_seed(base_seed: int, worker_index: int) -> int:
    """Distinct, reproducible seed per worker (env slot i of worker w gets seed + i)."""
    return base_seed + 10_007 * (worker_index + 1)


class RolloutWorker:
    """Collects fixed-length :class:`Fragment` s with the latest weights it was given."""

    def __init__(
        self,
        env_cfg: EnvConfig,
        model_cfg: ModelConfig,
        num_envs: int,
        fragment_length: int,
        seed: int,
        worker_index: int = 0,
    ) -> None:
        torch.set_num_threads(1)
        self.worker_index = worker_index
        self.fragment_length = fragment_length
        self.envs = vector_env_from_config(env_cfg, num_envs)
        self.obs_space = self.envs.single_observation_space
        self.model = ActorCritic(
            self.envs.single_observation_space, self.envs.single_action_space, model_cfg
        )
        self.model.eval()
        self.policy_version = -1
        wseed = worker_seed(seed, worker_index)
        self.generator = torch.Generator().manual_seed(wseed)
        obs, _ = self.envs.reset(seed=[wseed + i for i in range(num_envs)])
        self.envs.action_space.seed(wseed)
        self.obs = flatten_obs(self.obs_space, obs)
        self.episode_start = np.ones(num_envs, dtype=bool)
        self.state: AgentState = self.model.initial_state(num_envs)
        self.running_return = np.zeros(num_envs, dtype=np.float64)
        self.running_length = np.zeros(num_envs, dtype=np.int64)
        # Discounted return per slot whose spread scales rewards (model.normalize_reward).
        self.reward_return = np.zeros(num_envs, dtype=np.float64)
        self.reward_gamma = model_cfg.normalize_gamma

    # ------------------------------------------------------------ weights
    def set_weights(self, weights: dict[str, torch.Tensor], version: int) -> None:
        self.model.load_state_dict(weights)
        self.policy_version = version

    def process_id(self) -> int:
        """PID of the process running this worker (the Ray backend's tests kill it)."""
        return os.getpid()

    def node_id(self) -> str:
        """Ray node this worker runs on ("local" outside Ray)."""
        try:
            import ray

            return str(ray.get_runtime_context().get_node_id())
        except Exception:  # not inside Ray
            return "local"

    # ------------------------------------------------------------ sampling
    def sample(self) -> Fragment:
        """Step every slot ``fragment_length`` times and return the fragment."""
        started = time.perf_counter()
        length, num_envs = self.fragment_length, self.envs.num_envs
        obs_buf = tree_map(lambda a: np.zeros((length, *a.shape), dtype=a.dtype), self.obs)
        dist = self.model.dist
        actions = np.zeros(
            (length, num_envs, *dist.action_shape),
            dtype=np.float32 if dist.action_dtype.is_floating_point else np.int64,
        )
        discounted = np.zeros((length, num_envs), dtype=np.float64)
        log_probs = np.zeros((length, num_envs), dtype=np.float32)
        values = np.zeros((length, num_envs), dtype=np.float32)
        rewards = np.zeros((length, num_envs), dtype=np.float32)
        terminated = np.zeros((length, num_envs), dtype=bool)
        truncated = np.zeros((length, num_envs), dtype=bool)
        episode_start = np.zeros((length, num_envs), dtype=bool)
        truncation_values = np.zeros((length, num_envs), dtype=np.float32)
        start_state = self.state
        returns: list[float] = []
        lengths: list[int] = []
        successes: list[float] = []

        for t in range(length):
            tree_set(obs_buf, t, self.obs)
            episode_start[t] = self.episode_start
            out = self.model.act(
                to_torch(self.obs),
                self.state,
                torch.as_tensor(self.episode_start),
                generator=self.generator,
            )
            actions[t] = out.action.numpy()
            log_probs[t] = out.log_prob.numpy()
            values[t] = out.value.numpy()
            next_obs, reward, term, trunc, info = self.envs.step(self.model.env_action(out.action))
            terminated[t], truncated[t] = term, trunc
            rewards[t] = self.model.scale_rewards(reward)
            self.reward_return = self.reward_return * self.reward_gamma + reward
            discounted[t] = self.reward_return
            state_after = out.state.with_reward(rewards[t])
            self.running_return += reward
            self.running_length += 1
            done = term | trunc
            if done.any():
                self.reward_return[done] = 0.0
                self._bootstrap_truncated(t, term, trunc, info, state_after, truncation_values)
                for slot in np.flatnonzero(done):
                    returns.append(float(self.running_return[slot]))
                    lengths.append(int(self.running_length[slot]))
                    final_info = info.get("final_info", {})
                    if "is_success" in final_info and final_info.get("_is_success", [True])[slot]:
                        successes.append(float(final_info["is_success"][slot]))
                self.running_return[done] = 0.0
                self.running_length[done] = 0
            self.obs = flatten_obs(self.obs_space, next_obs)
            self.state, self.episode_start = state_after, done

        last = self.model.act(
            to_torch(self.obs),
            self.state,
            torch.as_tensor(self.episode_start),
            deterministic=True,
        )
        return Fragment(
            obs=obs_buf,
            actions=actions,
            log_probs=log_probs,
            values=values,
            rewards=rewards,
            terminated=terminated,
            truncated=truncated,
            episode_start=episode_start,
            truncation_values=truncation_values,
            last_value=last.value.numpy(),
            state=start_state,
            policy_version=self.policy_version,
            worker_index=self.worker_index,
            episode_returns=returns,
            episode_lengths=lengths,
            episode_successes=successes,
            sample_seconds=time.perf_counter() - started,
            statistics=self._statistics(obs_buf, discounted),
        )

    def _statistics(self, obs_buf: Any, discounted: np.ndarray) -> dict[str, Moments]:
        """Moments of what this fragment saw, for the running statistics (normalization.py)."""
        stats: dict[str, Moments] = {}
        for path, rms in self.model.encoder.normalized_leaves().items():
            leaf = obs_buf[path] if isinstance(obs_buf, dict) else obs_buf
            stats[f"obs/{path}"] = moments(leaf, tuple(rms.mean.shape))
        if self.model.reward_norm is not None:
            stats["reward"] = moments(discounted)
        return stats

    def _bootstrap_truncated(
        self,
        t: int,
        term: np.ndarray,
        trunc: np.ndarray,
        info: dict[str, Any],
        state_after: AgentState,
        truncation_values: np.ndarray,
    ) -> None:
        """Value of the final observation of time-limited episodes, with their memory intact."""
        rows = np.flatnonzero(trunc & ~term)
        if rows.size == 0:
            return
        final_obs = tree_stack([flatten_obs(self.obs_space, info["final_obs"][r]) for r in rows])
        index = torch.as_tensor(rows)
        out = self.model.act(
            to_torch(final_obs),
            state_after.index(index),
            torch.zeros(rows.size, dtype=torch.bool),
            deterministic=True,
        )
        truncation_values[t, rows] = out.value.numpy()

    # ------------------------------------------------------------ resume
    def get_state(self) -> bytes:
        """Everything that determines future fragments, pickled (envs included)."""
        return cloudpickle.dumps(
            {
                "envs": [env for env in self.envs.envs],
                "obs": self.obs,
                "episode_start": self.episode_start,
                "state": self.state,
                "generator": self.generator.get_state(),
                "running_return": self.running_return,
                "running_length": self.running_length,
                "reward_return": self.reward_return,
            }
        )

    def set_state(self, blob: bytes) -> None:
        data = pickle.loads(blob)
        self.envs.envs = data["envs"]
        self.obs = data["obs"]
        self.episode_start = data["episode_start"]
        self.state = data["state"]
        self.generator.set_state(data["generator"])
        self.running_return = data["running_return"]
        self.running_length = data["running_length"]
        self.reward_return = data["reward_return"]
