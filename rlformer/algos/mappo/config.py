"""Multi-agent PPO's part of the run config: the ``mappo`` section (the task, the agents'
groups, the critic), and what it reads of the others (the PPO objective is ``ppo``'s, the
network ``model``'s, the rollout sizes ``rollout``'s).

The algorithm itself is :mod:`rlformer.algos.mappo.algorithm`; this module stays free of torch
and of the algorithm's code, since :mod:`rlformer.config` imports it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from rlformer.algos.ppo.config import PPOConfig
from rlformer.config.sections.base import StrictModel

_FACTORY = r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$"


class MAPPOConfig(StrictModel):
    """Multi-agent PPO (``algo: mappo``) on a PettingZoo Parallel env: agents of one group share
    one network and keep one memory each (they are rows of the batch, as env slots are)."""

    env: str = Field(
        "rlformer_envs.relay:parallel_env",
        pattern=_FACTORY,
        description="The task's Parallel-API factory as module:function, e.g. "
        "mpe2.simple_spread_v3:parallel_env, or a user's own.",
    )
    env_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="Keyword arguments of the factory, e.g. {N: 3, max_cycles: 25}.",
    )
    groups: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Policy groups: group name -> its agents (each group one network, shared "
        "by its agents); {}: agents grouped by name without a trailing _<number> "
        "(speaker_0 -> speaker, agent_0..agent_2 -> agent).",
    )
    critic: Literal["central", "independent"] = Field(
        "central",
        description="central (MAPPO): each agent's value reads the global state; independent "
        "(IPPO): each agent's value reads its own observation, like its policy.",
    )
    critic_input: Literal["auto", "state", "observations"] = Field(
        "auto",
        description="What a central critic reads: state (the env's state()), observations "
        "(every agent's observation, concatenated), auto (state where the env has one).",
    )
    agent_id: bool = Field(
        True,
        description="Give each agent its index in its group (one-hot) as an input, so that "
        "agents sharing a network can still act apart.",
    )
    action_mask: str | None = Field(
        None,
        pattern=r"^(obs|info):.+$",
        description="Where each agent's action mask comes from: obs:KEY (a key of its Dict "
        "observation, removed from what its network reads; PettingZoo's convention is "
        "obs:action_mask) or info:KEY (its info entry); Discrete and MultiDiscrete actions. "
        "null: no masks.",
    )
    total_steps: int = Field(
        1_000_000,
        ge=1,
        description="Env steps to train for (one step of one env, whatever its number of agents).",
    )


def mappo_section(cfg: Any) -> MAPPOConfig:
    """A run config's ``mappo`` section, typed (the generic run config model does not declare
    the sections of the algorithms)."""
    section: MAPPOConfig = cfg.mappo
    return section


def check_config(cfg: Any) -> None:
    """Rules across sections for a run of ``algo: mappo``."""
    if cfg.ppo.total_steps != PPOConfig.model_fields["total_steps"].default:
        raise ValueError("ppo.total_steps: a mappo run's budget is mappo.total_steps")
    if cfg.ppo.memory_gradient_steps:
        raise ValueError("ppo.memory_gradient_steps: mappo recomputes no memory prefix; set 0")
    if cfg.learner.num_learners > 1 or cfg.learner.accumulate > 1:
        raise ValueError(
            "learner.num_learners / learner.accumulate: mappo updates on one learner, in one "
            "chunk per minibatch; set both to 1"
        )
    if cfg.env.action_mask is not None:
        raise ValueError(
            "env.action_mask: a mappo run reads its agents' masks from mappo.action_mask; "
            "leave env.action_mask null"
        )


def planned_iterations(cfg: Any) -> int:
    """Rollout-and-update iterations of a run: its env steps over the steps of one rollout."""
    r = cfg.rollout
    return -(-cfg.mappo.total_steps // (r.num_workers * r.envs_per_worker * r.fragment_length))
