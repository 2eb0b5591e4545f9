"""Action masking with memory: the same GTrXL agent with and without masks, and sb3-contrib's
MaskablePPO, on rlformer/MaskedRecall-v0 at the same env-step budget and seeds.

MaskedRecall (envs/masked_recall.py) shows a cue once, then walks a corridor where only a few
actions are allowed at each step (an invalid one costs 0.1 and wastes the step), and pays +1 for
answering the cue at the end. It needs both: masks (or learning the allowed set from the
observation) and memory of the cue.

- ``gtrxl_masked``: rlformer's defaults plus ``env.action_mask=method:action_masks``;
- ``gtrxl_unmasked``: the same agent and settings without masks (the allowed actions are still
  in its observation): the difference isolates masking;
- ``maskable_ppo``: sb3-contrib ``MaskablePPO("MlpPolicy")`` with its defaults on 8 envs, masks
  from the same method (no recurrent MaskablePPO exists).

Every agent is evaluated on the same 200 episodes (greedy, masked when trained with masks):
success rate, mean return and invalid actions per episode (return = success - 0.1 x invalid).

    .venv/bin/python benchmarks/masking.py --steps 200000 --seeds 3
    .venv/bin/python benchmarks/masking.py --report-only

Rows are appended as they finish, so a killed run continues where it stopped.
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from rlformer.config import EnvConfig, load_config
from rlformer.evaluation.runner import EpisodeResults, run_policy_episodes
from rlformer.evaluation.statistics import ScoreSummary, summarize_scores
from rlformer.policies import load_policy
from rlformer.policies.sb3 import SB3Policy
from rlformer.runs.algorithm import FINAL_EVAL_SEED_OFFSET
from rlformer.runs.training import train

ENV_ID = "rlformer/MaskedRecall-v0"
MASKS = "method:action_masks"
AGENTS = ("gtrxl_masked", "gtrxl_unmasked", "maskable_ppo")
INVALID_COST = 0.1
EVAL_EPISODES = 200


def _row(agent: str, seed: int, steps: int, seconds: float, results: EpisodeResults) -> dict:
    success = np.array([s or 0.0 for s in results.successes])
    returns = np.array(results.returns)
    return {
        "agent": agent,
        "seed": seed,
        "steps": steps,
        "seconds": round(seconds, 1),
        "steps_per_s": round(steps / seconds, 1),
        "success_rate": float(success.mean()),
        "return_mean": float(returns.mean()),
        "invalid_per_episode": float(((success - returns) / INVALID_COST).mean()),
    }


def run_rlformer(masked: bool, seed: int, steps: int, root: Path) -> dict:
    overrides = [
        f"env.id={ENV_ID}",
        f"ppo.total_steps={steps}",
        f"run.seed={seed}",
        f"run.root={root}",
        "run.progress=false",
        "eval.episodes=0",
    ]
    if masked:
        overrides.append(f"env.action_mask={MASKS}")
    cfg = load_config(None, overrides)
    started = time.perf_counter()
    result = train(cfg)
    seconds = time.perf_counter() - started
    policy = load_policy(result.run_dir)
    episodes = run_policy_episodes(
        policy, cfg.env, EVAL_EPISODES, cfg.eval.num_envs, seed + FINAL_EVAL_SEED_OFFSET
    )
    agent = "gtrxl_masked" if masked else "gtrxl_unmasked"
    return _row(agent, seed, result.env_steps, seconds, episodes)


def run_maskable_ppo(seed: int, steps: int) -> dict:
    import gymnasium as gym
    import rlformer_envs  # noqa: F401
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.wrappers import ActionMasker
    from stable_baselines3.common.env_util import make_vec_env

    def masked_env() -> gym.Env:
        env = gym.make(ENV_ID)
        return ActionMasker(env, lambda e: e.unwrapped.action_masks())

    venv = make_vec_env(masked_env, n_envs=8, seed=seed)
    model = MaskablePPO("MlpPolicy", venv, seed=seed, device="cpu")
    torch.set_num_threads(1)
    started = time.perf_counter()
    model.learn(total_timesteps=steps)
    seconds = time.perf_counter() - started
    policy = SB3Policy(model, "maskable_ppo")
    env_cfg = EnvConfig(id=ENV_ID, action_mask=MASKS)
    episodes = run_policy_episodes(policy, env_cfg, EVAL_EPISODES, 8, seed + FINAL_EVAL_SEED_OFFSET)
    venv.close()
    return _row("maskable_ppo", seed, model.num_timesteps, seconds, episodes)


def report(rows: list[dict]) -> None:
    """Per budget and agent: mean [95% CI] over seeds of success, return and invalid actions
    per episode; steps/s."""
    print(
        f"{'budget':>8s} {'agent':16s} seeds  success [95% CI]        return [95% CI]"
        "          invalid/ep  steps/s"
    )
    for budget, agent in itertools.product(sorted({r["budget"] for r in rows}), AGENTS):
        mine = [r for r in rows if r["agent"] == agent and r["budget"] == budget]
        if not mine:
            continue
        success = summarize_scores([r["success_rate"] for r in mine])
        returns = summarize_scores([r["return_mean"] for r in mine])
        invalid = np.mean([r["invalid_per_episode"] for r in mine])
        speed = np.mean([r["steps_per_s"] for r in mine])
        print(
            f"{budget:8d} {agent:16s} {len(mine):5d}  {_ci(success)}  {_ci(returns)}"
            f"  {invalid:10.2f}  {speed:7.0f}"
        )


def _ci(summary: ScoreSummary) -> str:
    low, high = summary.mean_ci
    return f"{summary.mean:6.3f} [{low:6.3f}, {high:6.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--agents", nargs="+", choices=AGENTS, default=list(AGENTS))
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/masking/masked_recall.jsonl")
    )
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [json.loads(x) for x in args.out.read_text().splitlines()] if args.out.exists() else []
    if not args.report_only:
        done = {(r["agent"], r["seed"], r["budget"]) for r in rows}
        for seed in range(args.seeds):
            for agent in args.agents:
                if (agent, seed, args.steps) in done:
                    continue
                with tempfile.TemporaryDirectory() as root:
                    if agent == "maskable_ppo":
                        row = run_maskable_ppo(seed, args.steps)
                    else:
                        row = run_rlformer(agent == "gtrxl_masked", seed, args.steps, Path(root))
                row["budget"] = args.steps
                print(json.dumps(row), flush=True)
                rows.append(row)
                args.out.parent.mkdir(parents=True, exist_ok=True)
                with args.out.open("a") as out:
                    out.write(json.dumps(row) + "\n")
    report(rows)


if __name__ == "__main__":
    main()
