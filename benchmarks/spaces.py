"""Image and composite observation encoders: rlformer PPO vs stable-baselines3 PPO, same sizes.

Run:
    .venv/bin/python benchmarks/spaces.py                 # both tasks, 4096 env steps each
    .venv/bin/python benchmarks/spaces.py --steps 8192 --tasks image

Tasks (synthetic envs whose step costs almost nothing, so the figures measure the agents):

* ``image``: 84x84x3 uint8 frames, Discrete(6) actions. SB3 ``CnnPolicy`` (NatureCNN, 512
  features, separate pi/vf MLPs [64, 64]) against rlformer with ``model.cnn=nature``,
  ``cnn_features=512``, ``torso=mlp``, ``shared_torso=false`` (one CNN shared by two [64, 64]
  MLP torsos: the same network).
* ``dict``: Dict(image 64x64x3 uint8, vector Box(8), Discrete(5)), MultiDiscrete([3, 3])
  actions. SB3 ``MultiInputPolicy`` (CombinedExtractor: NatureCNN with 256 features, the vector
  flattened, the Discrete one-hot) against rlformer with ``cnn_features=256`` and the same MLPs.

Both agents step 8 envs in one process (SB3: DummyVecEnv; rlformer: the local collector) with
rollouts of 128 steps, 4 epochs of 4 minibatches, one torch thread, and are timed from the first
env step to the last update. Printed: env steps/s including updates and rlformer / SB3 (with
``--repeats N`` the agents run N times, interleaved, and the medians are printed).
Optionally the GTrXL torso is timed as a third row (``--gtrxl``).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

from rlformer.algos.ppo.algorithm import build_model
from rlformer.algos.ppo.learner import PPOLearner
from rlformer.config import load_config
from rlformer.rollout.collector import LocalCollector

ENVS, ROLLOUT, EPOCHS, MINIBATCHES = 8, 128, 4, 4


class ImageEnv(gym.Env):
    """Random 84x84x3 frames; episodes of 100 steps; reward 1 for action 0."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(0, 255, (84, 84, 3), np.uint8)
        self.action_space = spaces.Discrete(6)
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self._t = 0
        return self.observation_space.sample(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self._t += 1
        return self.observation_space.sample(), float(action == 0), self._t >= 100, False, {}


class DictEnv(ImageEnv):
    """Dict of a 64x64x3 image, a vector and a Discrete; MultiDiscrete actions."""

    def __init__(self) -> None:
        super().__init__()
        self.observation_space = spaces.Dict(
            {
                "image": spaces.Box(0, 255, (64, 64, 3), np.uint8),
                "vector": spaces.Box(-1.0, 1.0, (8,), np.float32),
                "mode": spaces.Discrete(5),
            }
        )
        self.action_space = spaces.MultiDiscrete([3, 3])

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self._t += 1
        reward = float(action[0] == 0)
        return self.observation_space.sample(), reward, self._t >= 100, False, {}


gym.register("BenchImage-v0", entry_point=ImageEnv)
gym.register("BenchDict-v0", entry_point=DictEnv)
TASKS = {
    "image": ("BenchImage-v0", "CnnPolicy", 512),
    "dict": ("BenchDict-v0", "MultiInputPolicy", 256),
}


def run_rlformer(env_id: str, features: int, steps: int, torso: str) -> float:
    """Env steps/s of rlformer PPO (collect + update), timed over the whole budget."""
    torch.manual_seed(0)
    cfg = load_config(
        None,
        [
            f"env.id={env_id}",
            f"rollout.envs_per_worker={ENVS}",
            f"rollout.fragment_length={ROLLOUT}",
            f"ppo.update_epochs={EPOCHS}",
            f"ppo.num_minibatches={MINIBATCHES}",
            "model.cnn=nature",
            f"model.cnn_features={features}",
            f"model.torso={torso}",
            "model.shared_torso=false",
            "model.mlp_hidden=[64, 64]",
            "model.core.n_layers=1",
            "model.core.d_model=64",
            "model.core.memory_length=32",
        ],
    )
    model = build_model(cfg)
    collector = LocalCollector(cfg)
    iterations = max(1, steps // (ENVS * ROLLOUT))
    learner = PPOLearner(model, cfg.ppo, torch.device("cpu"), iterations)
    started = time.perf_counter()
    for version in range(iterations):
        learner.update(collector.collect(model.state_dict(), version))
    elapsed = time.perf_counter() - started
    collector.close()
    return iterations * ENVS * ROLLOUT / elapsed


def run_sb3(env_id: str, policy: str, steps: int) -> float:
    """Env steps/s of stable-baselines3 PPO with the matching policy (learn() timed)."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    venv = make_vec_env(env_id, n_envs=ENVS, seed=0)
    agent = PPO(
        policy,
        venv,
        n_steps=ROLLOUT,
        batch_size=ENVS * ROLLOUT // MINIBATCHES,
        n_epochs=EPOCHS,
        seed=0,
        device="cpu",
    )
    iterations = max(1, steps // (ENVS * ROLLOUT))
    started = time.perf_counter()
    agent.learn(total_timesteps=iterations * ENVS * ROLLOUT)
    elapsed = time.perf_counter() - started
    venv.close()
    return iterations * ENVS * ROLLOUT / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4096, help="env steps per agent and task")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--gtrxl", action="store_true", help="also time the GTrXL torso")
    parser.add_argument(
        "--repeats", type=int, default=1, help="interleaved repeats; medians are printed"
    )
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    results: dict[str, dict[str, float]] = {}
    for task in args.tasks:
        env_id, policy, features = TASKS[task]
        runs: dict[str, list[float]] = {"sb3": [], "rlformer_mlp": [], "rlformer_gtrxl": []}
        for _ in range(args.repeats):  # interleaved, so load changes hit every agent alike
            runs["sb3"].append(run_sb3(env_id, policy, args.steps))
            runs["rlformer_mlp"].append(run_rlformer(env_id, features, args.steps, "mlp"))
            if args.gtrxl:
                runs["rlformer_gtrxl"].append(run_rlformer(env_id, features, args.steps, "gtrxl"))
        row = {name: float(np.median(values)) for name, values in runs.items() if values}
        results[task] = row
        extra = f"  rlformer GTrXL {row['rlformer_gtrxl']:7.1f}" if "rlformer_gtrxl" in row else ""
        print(
            f"{task:6s} ({policy:16s}) env steps/s incl. updates: SB3 {row['sb3']:7.1f}  "
            f"rlformer {row['rlformer_mlp']:7.1f}  ratio {row['rlformer_mlp'] / row['sb3']:.2f}x"
            + extra,
            flush=True,
        )
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
