"""Record a medium-quality discrete-action dataset: CartPole-v1 from an SB3 PPO policy with noise.

Run (about 3 minutes on one CPU core):
    .venv/bin/python scripts/make_cartpole_dataset.py --out data/cartpole_medium.hdf5

Trains stable-baselines3 PPO (defaults, ``--train-steps``), then records ``--steps``
transitions with rlformer's recorder, each action replaced by a uniformly random one with
probability ``--epsilon``: returns then spread from a few dozen to the 500 maximum, which gives
a return-conditioned learner something to condition on.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from stable_baselines3 import PPO

from rlformer.data.inspect import format_summary, summarize_dataset
from rlformer.data.recorder import collect_dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("data/cartpole_medium.hdf5"))
    parser.add_argument("--train-steps", type=int, default=60_000)
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--epsilon", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    model_path = args.out.with_suffix(".ppo.zip")
    PPO("MlpPolicy", "CartPole-v1", seed=args.seed, device="cpu").learn(args.train_steps).save(
        model_path
    )
    dataset = collect_dataset(
        f"sb3:{model_path}", "CartPole-v1", args.steps, args.out, args.seed, noise=args.epsilon
    )
    print(format_summary(summarize_dataset(dataset)))


if __name__ == "__main__":
    main()
