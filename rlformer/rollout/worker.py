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
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import cloudpickle  # a gymnasium dependency; pickles wrappers that hold lambdas
import numpy as np
import torch

from rlformer.config import EnvConfig, ModelConfig
from rlformer.networks.actor_critic import ActorCritic, ActOutput, AgentState
from rlformer.networks.distributions import ActionDistribution
from rlformer.networks.encoders import to_torch
from rlformer.networks.normalization import Moments, moments
from rlformer.networks.spaces import Tree, flatten_obs, tree_map, tree_set, tree_stack
from rlformer.rollout.action_masks import rows_without_valid_action, vector_masks
from rlformer.rollout.env_factory import vector_env_from_config
from rlformer.rollout.env_guard import EnvDataError, EnvGuard, first_nonfinite_slot
from rlformer.rollout.fragment import Fragment, Prefix


class PendingBootstrap(NamedTuple):
    """Time-limited episodes of step ``t`` whose final observations still need a value."""

    t: int
    rows: np.ndarray  # env slots
    final_obs: Any  # their final observations (a tree, batch first)
    state: AgentState  # their memory before the reset


@dataclass
class FinishedEpisodes:
    """Return, length and (where the env reports one) success of each episode a fragment ends."""

    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    successes: list[float] = field(default_factory=list)


@dataclass
class FragmentBuffers:
    """The time-major ``[T, E, ...]`` arrays a fragment's steps fill, one row per step."""

    obs: Tree
    actions: np.ndarray
    discounted: np.ndarray  # each slot's discounted return, for the reward statistics
    log_probs: np.ndarray
    values: np.ndarray
    rewards: np.ndarray  # as the model saw them (scaled)
    env_rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    episode_start: np.ndarray
    truncation_values: np.ndarray
    action_masks: np.ndarray | None

    @classmethod
    def empty(
        cls,
        obs: Tree,
        dist: ActionDistribution,
        masks: np.ndarray | None,
        length: int,
        num_envs: int,
    ) -> FragmentBuffers:
        """Zeroed buffers of ``length`` steps for observations like ``obs``, the actions of
        ``dist`` and, when the env gives them, action masks like ``masks``."""

        def steps(dtype: Any) -> np.ndarray:
            return np.zeros((length, num_envs), dtype=dtype)

        return cls(
            obs=tree_map(lambda a: np.zeros((length, *a.shape), dtype=a.dtype), obs),
            actions=np.zeros(
                (length, num_envs, *dist.action_shape),
                dtype=np.float32 if dist.action_dtype.is_floating_point else np.int64,
            ),
            discounted=steps(np.float64),
            log_probs=steps(np.float32),
            values=steps(np.float32),
            rewards=steps(np.float32),
            env_rewards=steps(np.float32),
            terminated=steps(bool),
            truncated=steps(bool),
            episode_start=steps(bool),
            truncation_values=steps(np.float32),
            action_masks=None if masks is None else np.zeros((length, *masks.shape), dtype=bool),
        )


def pickled_envs(envs: list[Any]) -> tuple[bytes | None, str | None]:
    """``envs`` pickled with cloudpickle, or None and why they cannot be (open files, locks,
    simulator handles, or an env that pickling rebuilds fresh): a resumed worker then starts
    fresh episodes instead."""
    rebuilt = rebuilt_on_unpickling(envs)
    if rebuilt is not None:
        return None, rebuilt
    try:
        return cloudpickle.dumps(envs), None
    except Exception as err:  # pickling raises TypeError, AttributeError, PicklingError ...
        return None, f"{type(err).__name__}: {err}"


def rebuilt_on_unpickling(envs: list[Any]) -> str | None:
    """Why ``envs`` would come back from a pickle as new, never-reset envs (None: they would
    not): an env inside them that pickles through gymnasium's ``EzPickle`` (Box2D, MuJoCo and
    MPE envs, among others) is rebuilt from its constructor's arguments, its episode lost,
    while the wrappers around it keep theirs; stepping such a pair fails or goes wrong."""
    from gymnasium.utils.ezpickle import EzPickle

    for env in envs:
        seen: set[int] = set()
        layer: Any = env
        while layer is not None and id(layer) not in seen:
            seen.add(id(layer))
            if isinstance(layer, EzPickle):
                return (
                    f"{type(layer).__name__} pickles through gymnasium's EzPickle, which "
                    "rebuilds it fresh: its episode cannot be saved"
                )
            # the next layer in: a gymnasium or PettingZoo wrapper's env, a Parallel view's AEC
            layer = getattr(layer, "aec_env", None) or getattr(layer, "__dict__", {}).get("env")
    return None


def worker_seed(base_seed: int, worker_index: int) -> int:
    """Distinct, reproducible seed per worker (env slot i of worker w gets seed + i)."""
    return base_seed + 10_007 * (worker_index + 1)


class WorkerProcess:
    """Where a worker runs: what the Ray backend's failure handling and tests ask every worker."""

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


class RolloutWorker(WorkerProcess):
    """Collects fixed-length :class:`Fragment` s with the latest weights it was given."""

    def __init__(
        self,
        env_cfg: EnvConfig,
        model_cfg: ModelConfig,
        num_envs: int,
        fragment_length: int,
        seed: int,
        prefix_length: int = 0,
        worker_index: int = 0,
        compile_act: bool = False,
    ) -> None:
        torch.set_num_threads(1)
        self.worker_index = worker_index
        self.fragment_length = fragment_length
        self.prefix_length = prefix_length  # ppo.memory_gradient_steps
        self.env_id = env_cfg.id
        self.envs = vector_env_from_config(env_cfg, num_envs)
        # Each env reports its slot and this worker when it raises (see env_guard).
        self.envs.envs = [
            EnvGuard(env, slot, f"rollout worker {worker_index}")
            for slot, env in enumerate(self.envs.envs)
        ]
        self.obs_space = self.envs.single_observation_space
        self.model = ActorCritic(
            self.envs.single_observation_space, self.envs.single_action_space, model_cfg
        )
        self.model.eval()
        if compile_act:
            self.model.compile_step()
        self.policy_version = -1
        self.reward_gamma = model_cfg.normalize_gamma
        self.seed = worker_seed(seed, worker_index)
        self.generator = torch.Generator().manual_seed(self.seed)
        self.envs.action_space.seed(self.seed)
        self._start_episodes(self.seed)

    def _start_episodes(self, seed: int) -> None:
        """Reset every slot (seeded) and clear memory and episode statistics."""
        num_envs = self.envs.num_envs
        obs, info = self.envs.reset(seed=[seed + i for i in range(num_envs)])
        steps = np.zeros(num_envs, dtype=np.int64)
        self._check_finite(obs, None, episode_steps=steps)
        self.masks = self._read_masks(info, steps)
        self.obs = flatten_obs(self.obs_space, obs)
        self.episode_start = np.ones(num_envs, dtype=bool)
        self.state: AgentState = self.model.initial_state(num_envs)
        self.running_return = np.zeros(num_envs, dtype=np.float64)
        self.running_length = np.zeros(num_envs, dtype=np.int64)
        # Discounted return per slot whose spread scales rewards (model.normalize_reward).
        self.reward_return = np.zeros(num_envs, dtype=np.float64)
        self.prefix: Prefix | None = None  # the last fragment's tail, once there is one

    def _check_finite(self, obs: Any, reward: np.ndarray | None, episode_steps: np.ndarray) -> None:
        """Stop at NaN/inf env data, naming the env, this worker, the slot and the step."""
        for what, values in (("reward", reward), ("observation", obs)):
            if values is None:
                continue
            slot = first_nonfinite_slot(values)
            if slot is not None:
                raise EnvDataError(
                    f"env {self.env_id!r} returned a non-finite {what} on rollout worker "
                    f"{self.worker_index}, env slot {slot}, at step {int(episode_steps[slot])} "
                    "of its episode; fix the env or wrap it to sanitise its output"
                )

    def _read_masks(self, info: dict[str, Any], episode_steps: np.ndarray) -> np.ndarray | None:
        """The action masks for the observations just returned (``env.action_mask``), checked
        to leave every slot at least one valid action."""
        masks = vector_masks(info, self.envs.num_envs, self.envs.single_action_space)
        if masks is None:
            return None
        empty = rows_without_valid_action(masks, self.envs.single_action_space)
        if empty.size:
            slot = int(empty[0])
            raise EnvDataError(
                f"env {self.env_id!r} gave an action mask with no valid action on rollout "
                f"worker {self.worker_index}, env slot {slot}, at step {int(episode_steps[slot])} "
                "of its episode"
            )
        return masks

    # ------------------------------------------------------------ weights
    def set_weights(self, weights: dict[str, torch.Tensor], version: int) -> None:
        self.model.load_state_dict(weights)
        self.policy_version = version

    def close(self) -> None:
        self.envs.close()

    # ------------------------------------------------------------ sampling
    def sample(self) -> Fragment:
        """Step every slot ``fragment_length`` times and return the fragment."""
        started = time.perf_counter()
        length = self.fragment_length
        buf = FragmentBuffers.empty(
            self.obs, self.model.dist, self.masks, length, self.envs.num_envs
        )
        start_state = self.state
        prefix_start = length - self.prefix_length
        prefix_state = start_state
        finished = FinishedEpisodes()
        pending: PendingBootstrap | None = None
        for t in range(length):
            if t == prefix_start:
                prefix_state = self.state  # the memory the next fragment's prefix starts from
            pending = self._step_slots(buf, t, pending, finished)

        last = self._act(pending, buf.truncation_values, deterministic=True)
        prefix = None
        if self.prefix_length > 0:
            prefix = self.prefix or self._blank_prefix(buf.obs, buf.actions, start_state)
            self.prefix = self._tail_prefix(
                buf.obs, buf.actions, buf.rewards, buf.episode_start, prefix_state
            )
        return Fragment(
            obs=buf.obs,
            actions=buf.actions,
            log_probs=buf.log_probs,
            values=buf.values,
            rewards=buf.rewards,
            env_rewards=buf.env_rewards,
            terminated=buf.terminated,
            truncated=buf.truncated,
            episode_start=buf.episode_start,
            truncation_values=buf.truncation_values,
            last_value=last.value.numpy(),
            state=start_state,
            policy_version=self.policy_version,
            worker_index=self.worker_index,
            episode_returns=finished.returns,
            episode_lengths=finished.lengths,
            episode_successes=finished.successes,
            sample_seconds=time.perf_counter() - started,
            statistics=self._statistics(buf.obs, buf.discounted),
            prefix=prefix,
            action_masks=buf.action_masks,
        )

    def _step_slots(
        self,
        buf: FragmentBuffers,
        t: int,
        pending: PendingBootstrap | None,
        finished: FinishedEpisodes,
    ) -> PendingBootstrap | None:
        """Act in every slot and step the envs once, recording step ``t`` into ``buf`` and the
        episodes that end into ``finished``; what the next step's call to :meth:`_act` must
        bootstrap (``pending`` is this step's)."""
        tree_set(buf.obs, t, self.obs)
        buf.episode_start[t] = self.episode_start
        if buf.action_masks is not None:
            buf.action_masks[t] = self.masks
        out = self._act(pending, buf.truncation_values, generator=self.generator)
        buf.actions[t] = out.action.numpy()
        buf.log_probs[t] = out.log_prob.numpy()
        buf.values[t] = out.value.numpy()
        next_obs, reward, term, trunc, info = self.envs.step(self.model.env_action(out.action))
        self._check_finite(next_obs, reward, self.running_length + 1)
        buf.terminated[t], buf.truncated[t] = term, trunc
        buf.rewards[t] = self.model.scale_rewards(reward)
        buf.env_rewards[t] = reward
        self.reward_return = self.reward_return * self.reward_gamma + reward
        buf.discounted[t] = self.reward_return
        state_after = out.state.with_reward(buf.rewards[t])
        self.running_return += reward
        self.running_length += 1
        done = term | trunc
        if done.any():
            pending = self._pending_bootstrap(t, term, trunc, info, state_after)
            self._finish_episodes(done, info, finished)
        else:
            pending = None
        self.obs = flatten_obs(self.obs_space, next_obs)
        self.state, self.episode_start = state_after, done
        self.masks = self._read_masks(info, self.running_length)
        return pending

    def _finish_episodes(
        self, done: np.ndarray, info: dict[str, Any], finished: FinishedEpisodes
    ) -> None:
        """Log the return, length and success of the slots whose episode ended at this step and
        clear their running sums."""
        final_info = info.get("final_info", {})
        for slot in np.flatnonzero(done):
            finished.returns.append(float(self.running_return[slot]))
            finished.lengths.append(int(self.running_length[slot]))
            if "is_success" in final_info and final_info.get("_is_success", [True])[slot]:
                finished.successes.append(float(final_info["is_success"][slot]))
        self.reward_return[done] = 0.0
        self.running_return[done] = 0.0
        self.running_length[done] = 0

    def _tail_prefix(
        self,
        obs_buf: Any,
        actions: np.ndarray,
        rewards: np.ndarray,
        episode_start: np.ndarray,
        state: AgentState,
    ) -> Prefix:
        """The next fragment's prefix: this fragment's last ``prefix_length`` steps and the
        memory (``state``) from before them."""
        tail = slice(self.fragment_length - self.prefix_length, self.fragment_length)
        return Prefix(
            tree_map(lambda a: a[tail].copy(), obs_buf),
            actions[tail].copy(),
            rewards[tail].copy(),
            episode_start[tail].copy(),
            state,
        )

    def _blank_prefix(self, obs_buf: Any, actions: np.ndarray, state: AgentState) -> Prefix:
        """The prefix before a slot's first fragment: episode starts only, so the recomputed
        memory is empty, exactly as the rollout's was."""
        steps = self.prefix_length
        return Prefix(
            tree_map(lambda a: np.zeros_like(a[:steps]), obs_buf),
            np.zeros_like(actions[:steps]),
            np.zeros((steps, self.envs.num_envs), dtype=np.float32),
            np.ones((steps, self.envs.num_envs), dtype=bool),
            state,
        )

    def _statistics(self, obs_buf: Any, discounted: np.ndarray) -> dict[str, Moments]:
        """Moments of what this fragment saw, for the running statistics (normalization.py)."""
        stats = self.model.observation_moments(obs_buf)
        if self.model.reward_norm is not None:
            stats["reward"] = moments(discounted)
        return stats

    def _pending_bootstrap(
        self,
        t: int,
        term: np.ndarray,
        trunc: np.ndarray,
        info: dict[str, Any],
        state_after: AgentState,
    ) -> PendingBootstrap | None:
        """What the value of step ``t``'s time-limited episodes needs: their final observations
        and their memory before the reset. :meth:`_act` computes it with the next step."""
        rows = np.flatnonzero(trunc & ~term)
        if rows.size == 0:
            return None
        final_obs = tree_stack([flatten_obs(self.obs_space, info["final_obs"][r]) for r in rows])
        return PendingBootstrap(t, rows, final_obs, state_after.index(torch.as_tensor(rows)))

    def _act(
        self,
        pending: PendingBootstrap | None,
        truncation_values: np.ndarray,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
    ) -> ActOutput:
        """The policy's step for every slot, plus the values ``pending`` asks for.

        The final observations of truncated episodes ride in the same batched call as extra
        rows (with their own memory, never an episode start), instead of a call of their own:
        on tasks where many episodes hit a time limit, such as POPGym's MineSweeper, that
        second call cost about a tenth of the rollout. Only the first ``num_envs`` rows' state
        and actions are kept.
        """
        starts = torch.as_tensor(self.episode_start)
        masks = None if self.masks is None else torch.as_tensor(self.masks)
        if pending is None:
            return self.model.act(
                to_torch(self.obs), self.state, starts, deterministic, generator, masks
            )
        num_envs = self.envs.num_envs
        if masks is not None:  # the final observations' rows only need a value
            masks = torch.cat([masks, torch.ones(pending.rows.size, masks.shape[1], dtype=bool)])
        out = self.model.act(
            to_torch(tree_stack([self.obs, pending.final_obs], np.concatenate)),
            AgentState.cat([self.state, pending.state]),
            torch.cat([starts, torch.zeros(pending.rows.size, dtype=torch.bool)]),
            deterministic,
            generator,
            masks,
        )
        truncation_values[pending.t, pending.rows] = out.value[num_envs:].numpy()
        slots = slice(0, num_envs)
        return ActOutput(
            out.action[slots], out.log_prob[slots], out.value[slots], out.state.index(slots)
        )

    # ------------------------------------------------------------ resume
    def get_state(self) -> dict[str, Any]:
        """Everything that determines future fragments, pickled, plus whether envs were included.

        Envs are pickled with cloudpickle, which also handles wrappers holding lambdas (e.g.
        gymnasium's ``FlattenObservation``). An env that still cannot be pickled (open files,
        locks, simulator handles) is left out: ``unpicklable_envs`` then says why, and
        :meth:`set_state` starts fresh episodes instead of continuing the saved ones.
        """
        envs, problem = pickled_envs(list(self.envs.envs))
        blob = cloudpickle.dumps(
            {
                "envs": envs,
                "obs": self.obs,
                "episode_start": self.episode_start,
                "state": self.state,
                "generator": self.generator.get_state(),
                "running_return": self.running_return,
                "running_length": self.running_length,
                "reward_return": self.reward_return,
                "prefix": self.prefix,
                "masks": self.masks,
            }
        )
        return {"state": blob, "unpicklable_envs": problem}

    def set_state(self, saved: dict[str, Any]) -> None:
        """Restore :meth:`get_state`'s output (from a trusted checkpoint only: it unpickles)."""
        data = pickle.loads(saved["state"])
        self.generator.set_state(data["generator"])
        envs = None if data["envs"] is None else pickle.loads(data["envs"])
        if envs is None or rebuilt_on_unpickling(envs) is not None:
            # The envs could not be saved (or a checkpoint holds envs that came back new): start
            # new episodes, seeded apart from the first ones.
            self._start_episodes(self.seed + 1_000_003)
            return
        self.envs.envs = envs
        self.obs = data["obs"]
        self.episode_start = data["episode_start"]
        self.state = data["state"]
        self.running_return = data["running_return"]
        self.running_length = data["running_length"]
        self.reward_return = data["reward_return"]
        self.prefix = data.get("prefix")
        self.masks = data.get("masks")
