"""Each agent's action mask in a team (``mappo.action_mask``): read where the env puts it (a
key of the agent's Dict observation, or of its info), taken out of what the network reads, and
stacked into a group's ``[rows, n]`` array (components concatenated for MultiDiscrete actions,
as for a single agent), which rollouts, evaluation and exported teams hand to the group's
policy. Absent agents' rows allow every action: they are not acted on.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlformer.algos.mappo.team import Group, Team, presence
from rlformer.rollout.action_masks import ActionMaskError, mask_size, rows_without_valid_action

AgentMasks = dict[str, np.ndarray]  # agent -> its mask for the observation it holds now


def split_masks(
    team: Team, observations: dict[str, Any], infos: dict[str, Any] | None
) -> tuple[dict[str, Any], AgentMasks]:
    """The agents' observations as their networks read them, and the masks the env gave with
    them (none without ``mappo.action_mask``; an agent whose info lacks the key has none)."""
    if team.action_mask is None:
        return observations, {}
    kind, key = team.action_mask
    if kind == "obs":
        kept = {a: {k: v for k, v in obs.items() if k != key} for a, obs in observations.items()}
        return kept, {a: np.asarray(obs[key]) for a, obs in observations.items()}
    infos = infos or {}
    masks = {a: np.asarray(infos[a][key]) for a in observations if key in infos.get(a, {})}
    return observations, masks


def group_masks(
    team: Team, g: Group, masks: list[AgentMasks], present: np.ndarray
) -> np.ndarray | None:
    """Group ``g``'s masks, env-major rows like its batch (``masks``: one dict per env), or
    None without ``mappo.action_mask``; a present agent without a mask, of the wrong size or
    allowing no action is a one-line :class:`ActionMaskError`."""
    if team.action_mask is None:
        return None
    size = mask_size(g.action_space)
    out = np.ones((len(masks) * g.size, size), dtype=bool)
    source = ":".join(team.action_mask)
    for row in np.flatnonzero(present):
        e, k = divmod(int(row), g.size)
        agent = g.agents[k]
        if agent not in masks[e]:
            raise ActionMaskError(f"mappo.action_mask {source}: agent {agent!r} has no mask")
        mask = masks[e][agent].reshape(-1)
        if mask.size != size:
            raise ActionMaskError(
                f"mappo.action_mask {source}: agent {agent!r}'s mask has {mask.size} entries; "
                f"its action space needs {size}"
            )
        out[row] = mask.astype(bool)
    empty = rows_without_valid_action(out, g.action_space)
    if empty.size:
        agent = g.agents[int(empty[0]) % g.size]
        raise ActionMaskError(
            f"mappo.action_mask {source}: agent {agent!r}'s mask allows no action"
        )
    return out


def check_first_masks(team: Team, env: Any, seed: int) -> None:
    """Read every group's masks after one reset of ``env``: a missing key or a wrong size is
    an error before the run starts rather than in its first rollout."""
    observations, infos = env.reset(seed=seed)
    _, masks = split_masks(team, observations, infos)
    for g in team.groups:
        group_masks(team, g, [masks], presence(g, [env]))
