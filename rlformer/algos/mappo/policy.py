"""A trained team from a ``mappo`` checkpoint, as ``rlformer eval`` takes it.

A team is evaluated on its own task only (the env its config names): its groups and spaces are
that task's. The factory of the task (``mappo.env``) is built the way a checkpoint's wrappers
are, from a package installed here; the weights are read without unpickling.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import torch

from rlformer.algos.mappo.algorithm import describe_team
from rlformer.algos.mappo.config import mappo_section
from rlformer.algos.mappo.evaluation import TeamResults, play_team
from rlformer.algos.mappo.export import export_team, team_reports
from rlformer.algos.mappo.serving import TeamSteps
from rlformer.config import TrainConfig
from rlformer.evaluation.report import EvaluationReport
from rlformer.networks.actor_critic import ActorCritic
from rlformer.policies.base import Policy, PolicyInfo
from rlformer.runs.checkpoints import checkpoint_config, load_weights


class TeamPolicy:
    """Every group's network of one run, with the config that built them."""

    def __init__(self, weights: dict[str, torch.Tensor], cfg: TrainConfig, name: str) -> None:
        self.weights = weights
        self.cfg = cfg
        self.info = PolicyInfo(name, "mappo")

    @property
    def task(self) -> str:
        return mappo_section(self.cfg).env

    def play(self, episodes: int, seed: int, num_envs: int, deterministic: bool) -> TeamResults:
        """``episodes`` episodes from env seeds ``seed``, ``seed + 1``, ..."""
        return play_team(self.weights, self.cfg, episodes, num_envs, seed, deterministic)

    def evaluate_own_task(
        self, episodes: int, seeds: int, num_envs: int, deterministic: bool
    ) -> list[EvaluationReport]:
        """One report over ``seeds`` x ``episodes`` episodes (:func:`team_reports`)."""
        return team_reports(self, episodes, seeds, num_envs, deterministic)

    def serving_steps(self) -> TeamSteps:
        """How ``rlformer serve`` steps this team (:mod:`rlformer.algos.mappo.serving`)."""
        from rlformer.algos.ppo.policy import ActorCriticPolicy

        team, model = describe_team(self.cfg)
        model.load_state_dict(self.weights)
        policies: dict[str, Policy] = {
            g.name: ActorCriticPolicy(cast(ActorCritic, model[g.name]), self.info)
            for g in team.groups
        }
        return TeamSteps(team, policies, self.info.name, self.task)

    def export_to(self, out: str | Path, fmt: str = "onnx") -> Path:
        """One graph per group and ``team.json`` (:mod:`rlformer.algos.mappo.export`)."""
        return export_team(self, out, fmt)


def team_policy(payload: dict[str, Any], name: str) -> TeamPolicy:
    """The team a ``mappo`` checkpoint holds; weights that do not fit its task's networks are
    a one-line :class:`~rlformer.runs.checkpoints.CheckpointError`."""
    cfg = checkpoint_config(payload, name)
    _, model = describe_team(cfg)
    load_weights(model, payload, Path(name))
    return TeamPolicy({k: v.detach().cpu() for k, v in model.state_dict().items()}, cfg, name)
