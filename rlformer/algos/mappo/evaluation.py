"""Playing a team for whole episodes and scoring it: the agents' mean return (what MARL papers
and BenchMARL report), the team's summed return, each agent's return and the success rate, with
IQM and bootstrap confidence intervals (:mod:`rlformer.evaluation.statistics`).

Episode ``i`` starts from seed ``seed + i`` whatever the number of envs, so two evaluations of
the same seed play the same episodes (a peer library can be scored on them too).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from rlformer.algos.mappo.config import mappo_section
from rlformer.algos.mappo.worker import MultiAgentWorker, TeamEpisode
from rlformer.config import TrainConfig
from rlformer.evaluation.statistics import summarize_scores

_STEPS_PER_SAMPLE = 32


@dataclass
class TeamResults:
    """The episodes of one evaluation, in seed order."""

    episodes: list[TeamEpisode]

    def summary(self) -> dict[str, float]:
        """Flat figures, ready to log: ``return_*`` are the agents' mean return per episode."""
        returns = [e.mean_return for e in self.episodes]
        successes = [e.success for e in self.episodes if e.success is not None]
        scores = summarize_scores(returns, successes or None)
        out = {
            "episodes": float(scores.episodes),
            "return_mean": scores.mean,
            "return_std": scores.std,
            "return_iqm": scores.iqm,
            "return_ci_low": scores.mean_ci[0],
            "return_ci_high": scores.mean_ci[1],
            "team_return_mean": float(np.mean([e.team_return for e in self.episodes])),
            "length_mean": float(np.mean([e.length for e in self.episodes])),
        }
        if scores.success_rate is not None:
            out["success_rate"] = scores.success_rate
        for agent in self.agents():
            values = [e.agent_returns[agent] for e in self.episodes if agent in e.agent_returns]
            out[f"agent/{agent}/return_mean"] = float(np.mean(values))
        return out

    def agents(self) -> list[str]:
        seen: dict[str, None] = {}
        for episode in self.episodes:
            seen.update(dict.fromkeys(episode.agent_returns))
        return list(seen)

    def lines(self) -> list[str]:
        """A few human lines: the team's figures, then each agent's mean return."""
        s = self.summary()
        line = (
            f"evaluation: {int(s['episodes'])} episodes, return (mean over agents) "
            f"{s['return_mean']:.2f} +/- {s['return_std']:.2f}, IQM {s['return_iqm']:.2f}, 95% CI "
            f"[{s['return_ci_low']:.2f}, {s['return_ci_high']:.2f}], team return "
            f"{s['team_return_mean']:.2f}"
        )
        if "success_rate" in s:
            line += f", success rate {100 * s['success_rate']:.1f}%"
        agents = ", ".join(f"{a} {s[f'agent/{a}/return_mean']:.2f}" for a in self.agents())
        return [line, f"per agent: {agents}"]


def play_team(
    weights: dict[str, torch.Tensor],
    cfg: TrainConfig,
    episodes: int,
    num_envs: int,
    seed: int,
    deterministic: bool,
) -> TeamResults:
    """Play ``episodes`` episodes (seeds ``seed`` ... ``seed + episodes - 1``) with the team
    model's ``weights`` on ``num_envs`` envs."""
    worker = MultiAgentWorker(
        mappo_section(cfg),
        cfg.model,
        max(1, min(num_envs, episodes)),
        _STEPS_PER_SAMPLE,
        seed,
        evaluation=True,
        deterministic=deterministic,
    )
    try:
        worker.set_weights(weights, 0)
        wanted = range(seed, seed + episodes)
        played: dict[int, TeamEpisode] = {}
        while len(played) < episodes:
            for episode in worker.sample().episodes:
                if episode.seed is not None and episode.seed in wanted:
                    played[episode.seed] = episode
    finally:
        worker.close()
    return TeamResults([played[s] for s in sorted(played)])
