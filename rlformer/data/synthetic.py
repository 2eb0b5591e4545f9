"""Scripted datasets whose returns hinge on memory, for tests and benchmarks.

Written on the spot (nothing is downloaded), with a known answer: what the best policy does.
"""

from __future__ import annotations

import numpy as np

from rlformer.data.episodes import Episode
from rlformer.rollout.env_factory import make_env

FORWARD, UP, DOWN = 0, 1, 2


def tmaze_walks(length: int, episodes: int, seed: int, p_correct: float) -> list[Episode]:
    """Passive T-Maze episodes: forward through the corridor, then a turn at the junction.

    The turn goes towards the cue shown at step 0 with probability ``p_correct`` (return 1),
    else the other way (return 0). The behaviour policy reads the cue from ``reset``'s info: it
    generates data and is never evaluated. A return-conditioned learner aiming at return 1 must
    recall the cue ``length`` steps later.
    """
    env = make_env("rlformer/TMaze-v0", {"length": length})
    rng = np.random.default_rng(seed)
    recorded = []
    for i in range(episodes):
        obs, info = env.reset(seed=seed + i)
        correct = rng.random() < p_correct
        turn = info["cue"] if correct else (DOWN if info["cue"] == UP else UP)
        observations, actions, rewards, next_observations = [], [], [], []
        terminated = truncated = False
        while not (terminated or truncated):
            action = FORWARD if obs[2] < 0.5 else turn
            next_obs, reward, terminated, truncated, _ = env.step(action)
            observations.append(obs)
            actions.append(action)
            rewards.append(reward)
            next_observations.append(next_obs)
            obs = next_obs
        recorded.append(
            Episode(
                np.array(observations, np.float32),
                np.array(actions, np.int64),
                np.array(rewards, np.float32),
                bool(terminated),
                bool(truncated),
                np.array(next_observations, np.float32),
            )
        )
    env.close()
    return recorded
