"""A team's export: one ONNX graph per policy group, each the group's actor with its memory in
and out (PPO's export step: :mod:`rlformer.algos.ppo.export`), and ``team.json`` naming each
group's agents and the task, so that the team can be played from the exports alone.

The actor reads only the agent's own observation (and its index in the group): a centralised
critic's input is not an input of the graph, so a deployed team needs no global state.
``rlformer eval EXPORT_DIR`` plays the team from the graphs on its task (onnxruntime acting, the
same seeded episodes as a run's evaluation).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from rlformer.algos.mappo.config import MAPPOConfig, mappo_section
from rlformer.algos.mappo.evaluation import TeamResults
from rlformer.algos.mappo.masks import AgentMasks, group_masks, split_masks
from rlformer.algos.mappo.observations import group_observations
from rlformer.algos.mappo.team import build_team, make_parallel_env, presence
from rlformer.algos.mappo.worker import TeamEpisode
from rlformer.evaluation.report import EvaluationReport, seed_offset
from rlformer.evaluation.statistics import summarize_scores
from rlformer.networks.actor_critic import ActorCritic
from rlformer.policies.base import PolicyInfo
from rlformer.policies.registry import MULTI_GRAPH_EXPORT
from rlformer.runs.checkpoints import CheckpointError

TEAM_FILE = MULTI_GRAPH_EXPORT  # team.json


def export_team(policy: Any, out: str | Path, fmt: str = "onnx") -> Path:
    """Write ``out/<group>/`` (graph + ``policy.json``) per group and ``out/team.json``."""
    from rlformer.algos.mappo.algorithm import describe_team
    from rlformer.algos.ppo.policy import ActorCriticPolicy
    from rlformer.export.writer import export_policy

    team, model = describe_team(policy.cfg)
    model.load_state_dict(policy.weights)
    out = Path(out)
    for group in team.groups:
        info = PolicyInfo(f"{policy.info.name} ({group.name})", "ppo")
        network = cast(ActorCritic, model[group.name])
        export_policy(ActorCriticPolicy(network, info), out / group.name, fmt)
        name_group_agents(out / group.name, group.name, group.agents)
    meta = {
        "format": "rlformer-team",
        "kind": "mappo",
        "mappo": mappo_section(policy.cfg).model_dump(mode="json"),
        "groups": {g.name: list(g.agents) for g in team.groups},
        "critic_input": team.critic_input,
    }
    (out / TEAM_FILE).write_text(json.dumps(meta, indent=1) + "\n")
    return out


def name_group_agents(directory: Path, group: str, agents: tuple[str, ...]) -> None:
    """Add to a group's ``policy.json`` which agents it acts for: its ``team`` entry, with each
    agent's row index (the one-hot ``obs.agent_id`` input where the run has one)."""
    path = directory / "policy.json"
    meta = json.loads(path.read_text())
    meta["team"] = {"group": group, "agents": {agent: k for k, agent in enumerate(agents)}}
    path.write_text(json.dumps(meta, indent=1, allow_nan=False) + "\n")


class ExportedTeam:
    """A team export played with onnxruntime: each group's graph acts for its agents' rows."""

    def __init__(self, export_dir: str | Path) -> None:
        from rlformer.export.onnx_policy import ExportedPolicy

        name = str(export_dir)
        try:
            meta = json.loads((Path(export_dir) / TEAM_FILE).read_text())
            self.cfg = MAPPOConfig.model_validate(meta["mappo"])
            groups = dict(meta["groups"])
        except (OSError, KeyError, TypeError, ValueError) as err:
            raise CheckpointError(f"{name}: not a readable rlformer team export ({err})") from None
        self.info = PolicyInfo(name, "mappo")
        self.policies = {g: ExportedPolicy(Path(export_dir) / g) for g in groups}

    def play(self, episodes: int, seed: int, num_envs: int, deterministic: bool) -> TeamResults:
        """``episodes`` episodes from env seeds ``seed``, ``seed + 1``, ... (as
        :func:`rlformer.algos.mappo.evaluation.play_team` seeds them)."""
        envs = [make_parallel_env(self.cfg) for _ in range(max(1, min(num_envs, episodes)))]
        team = build_team(self.cfg, envs[0])
        generator = torch.Generator().manual_seed(seed)
        first = [split_masks(team, *env.reset(seed=seed + e)) for e, env in enumerate(envs)]
        observations: list[dict[str, Any]] = [obs for obs, _ in first]
        masks: list[AgentMasks] = [agent_masks for _, agent_masks in first]
        seeds = [seed + e for e in range(len(envs))]
        returns: list[dict[str, float]] = [{} for _ in envs]
        lengths = [0] * len(envs)
        next_seed = seed + len(envs)
        rows = {g.name: len(envs) * g.size for g in team.groups}
        states = {name: self.policies[name].initial_state(n) for name, n in rows.items()}
        starts = {name: np.ones(n, dtype=bool) for name, n in rows.items()}
        present = {g.name: presence(g, envs) for g in team.groups}
        played: dict[int, TeamEpisode] = {}
        while len(played) < episodes:
            actions: list[dict[str, Any]] = [{} for _ in envs]
            for g in team.groups:
                obs = nested(group_observations(team, g, envs, observations))
                acted, states[g.name] = self.policies[g.name].act(
                    obs, states[g.name], starts[g.name],
                    action_mask=group_masks(team, g, masks, present[g.name]),
                    deterministic=deterministic, generator=generator,
                )  # fmt: skip
                for row in np.flatnonzero(present[g.name]):
                    e, k = divmod(int(row), g.size)
                    actions[e][g.agents[k]] = acted[row]
            steps = [env.step(a) for env, a in zip(envs, actions, strict=True)]
            for e, (env, (obs, rewards, _, _, infos)) in enumerate(zip(envs, steps, strict=True)):
                lengths[e] += 1
                for agent, reward in rewards.items():
                    returns[e][agent] = returns[e].get(agent, 0.0) + float(reward)
                obs, agent_masks = split_masks(team, obs, infos)
                observations[e] = {a: obs[a] for a in env.agents if a in obs}
                masks[e] = {a: agent_masks[a] for a in env.agents if a in agent_masks}
                if env.agents:
                    continue
                success = [i["is_success"] for i in infos.values() if "is_success" in i]
                if seeds[e] < seed + episodes:
                    played[seeds[e]] = TeamEpisode(
                        dict(returns[e]), lengths[e], float(any(success)) if success else None,
                        seeds[e],
                    )  # fmt: skip
                observations[e], masks[e] = split_masks(team, *env.reset(seed=next_seed))
                seeds[e], returns[e], lengths[e], next_seed = next_seed, {}, 0, next_seed + 1
            for g in team.groups:
                was, now = present[g.name], presence(g, envs)
                ended = np.array(
                    [
                        bool(steps[e][2].get(a, False) or steps[e][3].get(a, False))
                        for e in range(len(envs))
                        for a in g.agents
                    ]
                )
                starts[g.name] = now & (ended | ~was)
                present[g.name] = now
        for env in envs:
            env.close()
        return TeamResults([played[s] for s in sorted(played)])

    def serving_steps(self) -> Any:
        """How ``rlformer serve`` steps this team, from the graphs
        (:mod:`rlformer.algos.mappo.serving`)."""
        from rlformer.algos.mappo.serving import TeamSteps

        env = make_parallel_env(self.cfg)
        try:
            team = build_team(self.cfg, env)
        finally:
            env.close()
        return TeamSteps(team, dict(self.policies), self.info.name, self.cfg.env)

    def evaluate_own_task(
        self, episodes: int, seeds: int, num_envs: int, deterministic: bool
    ) -> list[EvaluationReport]:
        """As :meth:`rlformer.algos.mappo.policy.TeamPolicy.evaluate_own_task`, from the graphs."""
        return team_reports(self, episodes, seeds, num_envs, deterministic)


def nested(tree: Any) -> Any:
    """A flat leaf dict (``{"obs/observation": ...}``, as the rollout worker stores rows) as
    the nested observation an exported graph's runner reads, as a user passes it."""
    if not isinstance(tree, dict):
        return tree
    out: dict[str, Any] = {}
    for path, value in tree.items():
        *parents, leaf = path.split("/")
        node = out
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return out


def team_reports(
    team: Any, episodes: int, seeds: int, num_envs: int, deterministic: bool
) -> list[EvaluationReport]:
    """One report over ``seeds`` x ``episodes`` episodes of a team (seed ``s`` plays env seeds
    ``1000 s``, ``1000 s + 1``, ...): the agents' mean return per episode, with the team's
    summed return and each agent's return in the episode rows."""
    rows: list[dict[str, float]] = []
    returns, successes = [], []
    for s in range(seeds):
        results = team.play(episodes, seed_offset(s), num_envs, deterministic)
        for i, episode in enumerate(results.episodes):
            row = {
                "seed": s,
                "episode": i,
                "return": episode.mean_return,
                "team_return": episode.team_return,
                "length": episode.length,
                **{f"return/{a}": r for a, r in episode.agent_returns.items()},
            }
            if episode.success is not None:
                row["success"] = episode.success
                successes.append(episode.success)
            rows.append(row)
            returns.append(episode.mean_return)
    summary = summarize_scores(returns, successes or None)
    task = team.cfg.env if isinstance(team.cfg, MAPPOConfig) else mappo_section(team.cfg).env
    return [EvaluationReport(team.info.name, task, task, deterministic, summary, rows)]
