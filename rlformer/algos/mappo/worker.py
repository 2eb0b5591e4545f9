"""A multi-agent rollout worker: ``E`` copies of a Parallel env, one network per group, one
memory per agent.

Each group's agents are rows of its batch, env-major (row ``e * size + k`` is agent ``k`` of
the group in env ``e``), so the single-agent machinery applies row by row: a row's memory lives
across fragments and restarts (``episode_start``) when its agent starts an episode, joins late
or comes back; a row whose agent is absent (not yet joined, or finished before the others) is
marked invalid for that step, which the PPO loss skips (``Fragment.valid``), and is marked
terminated so that GAE never reads across the gap. An env is reset when its last agent leaves.

The worker follows :class:`~rlformer.rollout.worker_spec.WorkerSpec`'s protocol, so both
collector backends run it, and its :meth:`get_state` / :meth:`set_state` carry everything a
resumed run needs to continue exactly (envs, observations, memories, RNG).
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass, field
from typing import Any, cast

import cloudpickle
import numpy as np
import torch
from torch import nn

from rlformer.algos.mappo.config import MAPPOConfig
from rlformer.algos.mappo.masks import AgentMasks, group_masks, split_masks
from rlformer.algos.mappo.observations import critic_states, group_observations, row_observation
from rlformer.algos.mappo.team import Group, Team, build_team, make_parallel_env, presence
from rlformer.config import ModelConfig
from rlformer.networks.actor_critic import ActorCritic, AgentState
from rlformer.networks.encoders import to_torch
from rlformer.networks.normalization import moments
from rlformer.networks.spaces import Tree, tree_set, tree_stack
from rlformer.rollout.fragment import Fragment
from rlformer.rollout.worker import (
    FragmentBuffers,
    WorkerProcess,
    pickled_envs,
    rebuilt_on_unpickling,
    worker_seed,
)


def build_team_model(team: Team, model_cfg: ModelConfig) -> nn.ModuleDict:
    """One actor-critic per group (its weights shared by the group's agents)."""
    return nn.ModuleDict(
        {
            g.name: ActorCritic(g.observation_space, g.action_space, model_cfg, g.critic_view)
            for g in team.groups
        }
    )


@dataclass
class TeamEpisode:
    """One finished episode of one env: each agent's return, its length in env steps, whether
    it succeeded (where the env reports ``is_success``), and its reset seed (evaluation)."""

    agent_returns: dict[str, float]
    length: int
    success: float | None = None
    seed: int | None = None

    @property
    def mean_return(self) -> float:
        """The agents' mean return: the figure MARL papers and BenchMARL report."""
        values = list(self.agent_returns.values())
        return float(np.mean(values)) if values else 0.0

    @property
    def team_return(self) -> float:
        """The agents' returns summed."""
        return float(sum(self.agent_returns.values()))


@dataclass
class TeamFragment:
    """One rollout of every group: a :class:`Fragment` per group (rows = envs x agents) and the
    team's finished episodes."""

    fragments: dict[str, Fragment]
    policy_version: int
    worker_index: int
    sample_seconds: float = 0.0
    episodes: list[TeamEpisode] = field(default_factory=list)
    num_envs: int = 0

    @property
    def episode_returns(self) -> list[float]:
        return [episode.mean_return for episode in self.episodes]

    @property
    def episode_successes(self) -> list[float]:
        return [e.success for e in self.episodes if e.success is not None]

    @staticmethod
    def concat(parts: list[TeamFragment]) -> TeamFragment:
        """Merge workers' rollouts group by group (rows in worker order)."""
        merged = TeamFragment(
            {
                name: Fragment.concat([p.fragments[name] for p in parts])
                for name in parts[0].fragments
            },
            parts[0].policy_version,
            -1,
            max(p.sample_seconds for p in parts),
            [episode for p in parts for episode in p.episodes],
            sum(p.num_envs for p in parts),
        )
        return merged


@dataclass
class _Episodes:
    """Running returns of one env's current episode, per agent."""

    returns: dict[str, float] = field(default_factory=dict)
    length: int = 0
    seed: int | None = None


class MultiAgentWorker(WorkerProcess):
    """Collects :class:`TeamFragment` s of ``fragment_length`` steps from ``num_envs`` envs."""

    def __init__(
        self,
        cfg: MAPPOConfig,
        model_cfg: ModelConfig,
        num_envs: int,
        fragment_length: int,
        seed: int,
        worker_index: int = 0,
        evaluation: bool = False,
        deterministic: bool = False,
    ) -> None:
        """``evaluation``: episode ``i`` of this worker resets with seed ``seed + i`` (envs take
        the next unplayed one), so that evaluations play the same episodes whatever the number
        of envs; ``deterministic``: the policies' most likely actions."""
        torch.set_num_threads(1)
        self.worker_index = worker_index
        self.fragment_length = fragment_length
        self.num_envs = num_envs
        self.envs = [make_parallel_env(cfg) for _ in range(num_envs)]
        self.team = build_team(cfg, self.envs[0])
        self.models = build_team_model(self.team, model_cfg)
        self.models.eval()
        self.reward_gamma = model_cfg.normalize_gamma
        self.policy_version = -1
        self.deterministic = deterministic
        self.evaluation = evaluation
        self.seed = seed if evaluation else worker_seed(seed, worker_index)
        self.generator = torch.Generator().manual_seed(self.seed)
        self.next_seed = self.seed
        self._start_episodes(self.seed)

    # ------------------------------------------------------------ episodes
    def _start_episodes(self, seed: int) -> None:
        self.observations: list[dict[str, Any]] = []
        self.masks: list[AgentMasks] = []  # with mappo.action_mask: those of the observations
        self.episodes = [_Episodes() for _ in self.envs]
        for e, env in enumerate(self.envs):
            obs, masks = self._reset(e, env, seed + e)
            self.observations.append(obs)
            self.masks.append(masks)
        self.next_seed = seed + len(self.envs)
        self.states: dict[str, AgentState] = {}
        self.starts: dict[str, np.ndarray] = {}
        self.present: dict[str, np.ndarray] = {}
        self.reward_return: dict[str, np.ndarray] = {}
        for g in self.team.groups:
            rows = self.num_envs * g.size
            self.states[g.name] = self._model(g.name).initial_state(rows)
            self.starts[g.name] = np.ones(rows, dtype=bool)
            self.present[g.name] = self._presence(g)
            self.reward_return[g.name] = np.zeros(rows, dtype=np.float64)

    def _model(self, group: str) -> ActorCritic:
        return cast(ActorCritic, self.models[group])

    def _reset(self, e: int, env: Any, seed: int | None) -> tuple[dict[str, Any], AgentMasks]:
        """Start env ``e``'s next episode, from ``seed`` (None: the env's own RNG goes on):
        its first observations and action masks."""
        self.episodes[e] = _Episodes(seed=seed)
        obs, infos = env.reset(seed=seed)
        return split_masks(self.team, obs, infos)

    def _presence(self, g: Group) -> np.ndarray:
        return presence(g, self.envs)

    def _row_obs(
        self, g: Group, agent_index: int, agent_obs: Any, state: np.ndarray | None
    ) -> Tree:
        return row_observation(g, agent_index, agent_obs, state)

    def _group_obs(
        self,
        g: Group,
        observations: list[dict[str, Any]],
        states: list[np.ndarray | None] | None = None,
    ) -> Tree:
        return group_observations(self.team, g, self.envs, observations, states)

    def _critic_states(
        self, observations: list[dict[str, Any]], where: list[bool] | None = None
    ) -> list[np.ndarray | None]:
        return critic_states(self.team, self.envs, observations, where)

    # ------------------------------------------------------------ weights
    def set_weights(self, weights: dict[str, torch.Tensor], version: int) -> None:
        self.models.load_state_dict(weights)
        self.policy_version = version

    def close(self) -> None:
        for env in self.envs:
            env.close()

    # ------------------------------------------------------------ sampling
    def sample(self) -> TeamFragment:
        """Step every env ``fragment_length`` times and return each group's fragment."""
        started = time.perf_counter()
        length = self.fragment_length
        groups = self.team.groups
        states = self._critic_states(self.observations)  # once for every group
        obs = {g.name: self._group_obs(g, self.observations, states) for g in groups}
        bufs = {
            g.name: FragmentBuffers.empty(
                obs[g.name],
                self._model(g.name).dist,
                group_masks(self.team, g, self.masks, self.present[g.name]),
                length,
                self.num_envs * g.size,
            )
            for g in groups
        }
        valid = {g.name: np.zeros((length, self.num_envs * g.size), dtype=bool) for g in groups}
        start_states = dict(self.states)
        result = TeamFragment({}, self.policy_version, self.worker_index, num_envs=self.num_envs)
        for t in range(length):
            obs = self._step(t, obs, bufs, valid, result)
        fragments = {}
        for g in groups:
            buf, model = bufs[g.name], self._model(g.name)
            last = self._values(g, obs[g.name], self.states[g.name], self.starts[g.name])
            last[~self.present[g.name]] = 0.0
            stats = model.observation_moments(buf.obs, rows=valid[g.name])
            if model.reward_norm is not None:
                stats["reward"] = moments(buf.discounted[valid[g.name]])
            fragments[g.name] = Fragment(
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
                last_value=last,
                state=start_states[g.name],
                policy_version=self.policy_version,
                worker_index=self.worker_index,
                statistics=stats,
                valid=valid[g.name],
                action_masks=buf.action_masks,
            )
        result.fragments = fragments
        result.sample_seconds = time.perf_counter() - started
        return result

    def _values(self, g: Group, obs: Tree, state: AgentState, starts: np.ndarray) -> np.ndarray:
        """The values of ``obs`` (no sampling, so the action RNG is untouched)."""
        out = self._model(g.name).act(
            to_torch(obs), state, torch.as_tensor(starts), deterministic=True
        )
        return out.value.numpy().astype(np.float32)

    def _step(
        self,
        t: int,
        obs: dict[str, Tree],
        bufs: dict[str, FragmentBuffers],
        valid: dict[str, np.ndarray],
        result: TeamFragment,
    ) -> dict[str, Tree]:
        """Act for every present agent, step every env once, record step ``t``; the next
        observations by group."""
        groups = self.team.groups
        actions: list[dict[str, Any]] = [{} for _ in self.envs]
        outs = {}
        for g in groups:
            buf, model, present = bufs[g.name], self._model(g.name), self.present[g.name]
            tree_set(buf.obs, t, obs[g.name])
            buf.episode_start[t] = self.starts[g.name]
            valid[g.name][t] = present
            mask = group_masks(self.team, g, self.masks, present)
            if mask is not None:
                cast(np.ndarray, buf.action_masks)[t] = mask
            out = model.act(
                to_torch(obs[g.name]),
                self.states[g.name],
                torch.as_tensor(self.starts[g.name]),
                deterministic=self.deterministic,
                generator=self.generator,
                action_mask=None if mask is None else torch.as_tensor(mask),
            )
            outs[g.name] = out
            buf.actions[t] = out.action.numpy()
            buf.log_probs[t] = out.log_prob.numpy()
            buf.values[t] = out.value.numpy()
            env_actions = model.env_action(out.action)
            for row in np.flatnonzero(present):
                e, k = divmod(int(row), g.size)
                actions[e][g.agents[k]] = env_actions[row]
        steps = [env.step(a) for env, a in zip(self.envs, actions, strict=True)]
        step_masks = []
        for e, step in enumerate(steps):  # observations as the networks read them
            observations, masks = split_masks(self.team, step[0], step[4])
            steps[e] = (observations, *step[1:])
            step_masks.append(masks)
        # The central critic's input where an agent's episode was cut short, before any reset
        # (env.state() can cost as much as the observations: only where it is needed).
        cut = [any(s[3].values()) for s in steps]
        final_states = self._critic_states([s[0] for s in steps], where=cut)
        ended = self._finish_steps(steps, result)
        next_observations, next_masks = [], []
        for e, env in enumerate(self.envs):
            if e in ended:
                seed = None
                if self.evaluation:  # every episode seeded: the next one not yet played
                    seed, self.next_seed = self.next_seed, self.next_seed + 1
                env_obs, env_masks = self._reset(e, env, seed)
            else:
                env_obs = {a: steps[e][0][a] for a in env.agents if a in steps[e][0]}
                env_masks = {a: step_masks[e][a] for a in env.agents if a in step_masks[e]}
            next_observations.append(env_obs)
            next_masks.append(env_masks)
        next_states = self._critic_states(next_observations)  # once for every group
        next_obs = {}
        for g in groups:
            next_obs[g.name] = self._record(
                g, t, steps, outs[g.name], bufs[g.name], final_states, next_observations,
                next_states,
            )  # fmt: skip
        self.observations, self.masks = next_observations, next_masks
        return next_obs

    def _record(
        self,
        g: Group,
        t: int,
        steps: list[tuple[dict, ...]],
        out: Any,
        buf: FragmentBuffers,
        final_states: list[np.ndarray | None],
        next_observations: list[dict[str, Any]],
        next_states: list[np.ndarray | None],
    ) -> Tree:
        """Store one group's rewards and episode ends of step ``t``; bootstrap its truncated
        agents; advance its memory and presence. Returns its next observations."""
        rows = self.num_envs * g.size
        present = self.present[g.name]
        reward = np.zeros(rows, dtype=np.float32)
        term = np.ones(rows, dtype=bool)  # absent rows: GAE must not read across them
        trunc = np.zeros(rows, dtype=bool)
        for row in np.flatnonzero(present):
            e, k = divmod(int(row), g.size)
            _, rewards, terminations, truncations, _ = steps[e]
            agent = g.agents[k]
            reward[row] = float(rewards.get(agent, 0.0))
            term[row] = bool(terminations.get(agent, False))
            trunc[row] = bool(truncations.get(agent, False)) and not term[row]
        model = self._model(g.name)
        buf.env_rewards[t], buf.terminated[t], buf.truncated[t] = reward, term, trunc
        buf.rewards[t] = model.scale_rewards(reward)
        discounted = self.reward_return[g.name] * self.reward_gamma + reward
        self.reward_return[g.name] = np.where(present, discounted, 0.0)
        buf.discounted[t] = self.reward_return[g.name]
        state_after = out.state.with_reward(buf.rewards[t])
        cut = np.flatnonzero(trunc)
        if cut.size:
            finals = []
            for row in cut:
                e, k = divmod(int(row), g.size)
                finals.append(self._row_obs(g, k, steps[e][0][g.agents[k]], final_states[e]))
            index = torch.as_tensor(cut)
            buf.truncation_values[t, cut] = self._values(
                g, tree_stack(finals), state_after.index(index), np.zeros(cut.size, dtype=bool)
            )
        now_present = self._presence(g)
        done = (term | trunc) & present
        self.starts[g.name] = now_present & (done | ~present)
        self.reward_return[g.name][done] = 0.0
        self.present[g.name] = now_present
        self.states[g.name] = state_after
        return self._group_obs(g, next_observations, next_states)

    def _finish_steps(self, steps: list[tuple[dict, ...]], result: TeamFragment) -> set[int]:
        """Add each env's rewards to its episode; the envs whose episode ended (no agent
        left), with their episodes logged into ``result``."""
        ended = set()
        for e, (env, step) in enumerate(zip(self.envs, steps, strict=True)):
            _, rewards, _, _, infos = step
            episode = self.episodes[e]
            episode.length += 1
            for agent, reward in rewards.items():
                episode.returns[agent] = episode.returns.get(agent, 0.0) + float(reward)
            if env.agents:
                continue
            ended.add(e)
            success = [info["is_success"] for info in infos.values() if "is_success" in info]
            result.episodes.append(
                TeamEpisode(
                    dict(episode.returns),
                    episode.length,
                    float(any(success)) if success else None,
                    episode.seed,
                )
            )
        return ended

    # ------------------------------------------------------------ resume
    def get_state(self) -> dict[str, Any]:
        """Everything that determines future rollouts, pickled (envs with cloudpickle)."""
        envs, problem = pickled_envs(self.envs)
        blob = cloudpickle.dumps(
            {
                "envs": envs,
                "observations": self.observations,
                "masks": self.masks,
                "episodes": self.episodes,
                "states": self.states,
                "starts": self.starts,
                "present": self.present,
                "reward_return": self.reward_return,
                "generator": self.generator.get_state(),
                "next_seed": self.next_seed,
            }
        )
        return {"state": blob, "unpicklable_envs": problem}

    def set_state(self, saved: dict[str, Any]) -> None:
        """Restore :meth:`get_state`'s output (from a trusted checkpoint only: it unpickles)."""
        data = pickle.loads(saved["state"])
        self.generator.set_state(data["generator"])
        envs = None if data["envs"] is None else pickle.loads(data["envs"])
        if envs is None or rebuilt_on_unpickling(envs) is not None:
            self._start_episodes(self.seed + 1_000_003)  # fresh episodes (see pickled_envs)
            return
        self.envs = envs
        self.observations = data["observations"]
        self.masks = data.get("masks", [{} for _ in envs])  # a checkpoint from before masks
        self.episodes = data["episodes"]
        self.states = data["states"]
        self.starts = data["starts"]
        self.present = data["present"]
        self.reward_return = data["reward_return"]
        self.next_seed = data["next_seed"]
