"""Real popgym and MiniGrid tasks: each space kind trains with ratio = 1 in the first epoch."""

from __future__ import annotations

import pytest
import torch

from rlformer.algos.ppo.algorithm import build_model
from rlformer.algos.ppo.learner import PPOLearner
from rlformer.config import load_config
from rlformer.rollout.collector import LocalCollector

pytest.importorskip("popgym")
pytest.importorskip("minigrid")

TINY = [
    "rollout.envs_per_worker=2",
    "rollout.fragment_length=12",
    "model.cnn=impala",
    "model.cnn_features=16",
    "model.core.n_layers=1",
    "model.core.d_model=16",
    "model.core.n_heads=2",
    "model.core.d_ff=32",
    "model.core.memory_length=8",
    "model.prev_action_reward=true",
    "ppo.num_minibatches=2",
    "ppo.update_epochs=1",
]

CASES = {
    # MultiDiscrete observations
    "count-recall": ["env.id=popgym-CountRecallEasy-v0", "env.imports=[popgym]"],
    # Tuple observations
    "autoencode": ["env.id=popgym-AutoencodeEasy-v0", "env.imports=[popgym]"],
    # MultiDiscrete actions
    "minesweeper": ["env.id=popgym-MineSweeperEasy-v0", "env.imports=[popgym]"],
    # popgym's own wrapper from the config: observations become Tuple(obs, previous action)
    "count-recall-prev-action": [
        "env.id=popgym-CountRecallEasy-v0",
        "env.imports=[popgym]",
        "env.wrappers=[{class: popgym.wrappers:PreviousAction, unwrapped: true}]",
    ],
    # Dict with a 7x7x3 uint8 image, the text mission removed by a key filter
    "minigrid-memory": [
        "env.id=MiniGrid-MemoryS11-v0",
        "env.imports=[minigrid]",
        "env.max_episode_steps=20",
        "env.wrappers=[{class: gymnasium.wrappers:FilterObservation, "
        "kwargs: {filter_keys: [image, direction]}}]",
    ],
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_real_env_trains_with_ratio_one(case: str) -> None:
    torch.manual_seed(0)
    cfg = load_config(None, [*TINY, *CASES[case]])
    model = build_model(cfg)
    collector = LocalCollector(cfg)
    learner = PPOLearner(model, cfg.ppo, torch.device("cpu"), total_iterations=2)
    try:
        for version in range(2):
            metrics = learner.update(collector.collect(model.state_dict(), version))
            assert metrics["ppo/first_minibatch_ratio_error"] < 1e-5, case
    finally:
        collector.close()
