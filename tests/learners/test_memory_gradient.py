"""ppo.memory_gradient_steps: the steps before a fragment are recomputed with gradient.

The prefix must rebuild exactly the memory the rollout had at the fragment start (same steps,
same episode starts, same previous actions and rewards), or the recomputed memory would be
wrong even before any update; and the loss must then reach those earlier steps.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from rlformer.algos.ppo.algorithm import build_model
from rlformer.algos.ppo.learner import make_sequence_batch
from rlformer.config import TrainConfig, load_config
from rlformer.networks.actor_critic import EvaluateOutput
from rlformer.rollout.collector import LocalCollector
from rlformer.runs.checkpoints import load_checkpoint
from rlformer.runs.training import resume, train

PREFIX = 7


def _config(env_id: str, *extra: str) -> TrainConfig:
    return load_config(
        None,
        [
            f"env.id={env_id}",
            "rollout.num_workers=2",
            "rollout.envs_per_worker=3",
            "rollout.fragment_length=20",
            "model.core.n_layers=2",
            "model.core.d_model=32",
            "model.core.n_heads=2",
            "model.core.d_ff=64",
            "model.core.memory_length=6",
            "model.recurrent_hidden=32",
            "ppo.num_minibatches=2",
            f"ppo.memory_gradient_steps={PREFIX}",
            *extra,
        ],
    )


def _evaluate(model, batch) -> EvaluateOutput:  # noqa: ANN001
    out = model.evaluate(batch.obs, batch.actions, batch.state, batch.episode_start, batch.rewards)
    return out.from_step(batch.prefix_steps)


@pytest.mark.parametrize("torso", ["gtrxl", "lstm"])
@pytest.mark.parametrize("prev_inputs", [False, True])
@pytest.mark.parametrize(("env_id", "limit"), [("CartPole-v1", 9), ("rlformer/TMaze-v0", None)])
def test_prefix_rebuilds_the_rollout_memory(
    torso: str, prev_inputs: bool, env_id: str, limit: int | None
) -> None:
    torch.manual_seed(0)
    extra = [f"model.torso={torso}", f"model.prev_action_reward={str(prev_inputs).lower()}"]
    if limit is not None:
        extra.append(f"env.max_episode_steps={limit}")
    cfg = _config(env_id, *extra)
    model = build_model(cfg)
    collector = LocalCollector(cfg)
    try:
        for version in range(3):
            fragment = collector.collect(model.state_dict(), version)
            assert fragment.prefix is not None
            if version > 0:  # after the first fragment the prefix is real experience
                assert not fragment.prefix.episode_start.all()
            batch = make_sequence_batch(fragment, cfg.ppo, torch.device("cpu"))
            assert batch.prefix_steps == PREFIX
            assert batch.episode_start.shape[1] == PREFIX + 20 == batch.obs.shape[1]
            with torch.no_grad():
                out = _evaluate(model, batch)
            ratio = (out.log_prob - batch.old_log_probs).exp()
            assert float((ratio - 1).abs().max()) < 1e-5
            assert float((out.value - batch.old_values).abs().max()) < 1e-4
    finally:
        collector.close()


def test_loss_reaches_the_steps_before_the_fragment() -> None:
    torch.manual_seed(0)
    cfg = _config("CartPole-v1", "model.core.n_layers=1")
    model = build_model(cfg)
    collector = LocalCollector(cfg)
    try:
        collector.collect(model.state_dict(), 0)
        fragment = collector.collect(model.state_dict(), 1)
    finally:
        collector.close()
    batch = make_sequence_batch(fragment, cfg.ppo, torch.device("cpu"))
    # Slots whose episode runs through the last prefix step into the fragment's first step.
    starts = batch.episode_start[:, PREFIX - 1 : PREFIX + 1]
    rows = torch.nonzero(~starts.any(dim=1)).flatten()
    assert rows.numel() > 0
    obs = batch.obs.clone().requires_grad_(True)
    out = model.evaluate(obs, batch.actions, batch.state, batch.episode_start, batch.rewards)
    out.log_prob[rows, PREFIX].sum().backward()
    assert obs.grad is not None
    reached = obs.grad[rows, PREFIX - 1].abs().sum(dim=-1)
    assert (reached > 0).all(), "no gradient reached the step before the fragment"
    assert float(obs.grad[:, PREFIX + 1 :].abs().sum()) == 0.0  # nothing from the future


def test_resume_with_prefixes_is_exact(tmp_path: Path) -> None:
    settings = [
        "ppo.total_steps=480",  # 4 iterations of 2 x 3 x 20 steps
        "run.checkpoint_every=2",
        "run.progress=false",
        "eval.episodes=0",
        "model.core.n_layers=1",
    ]
    straight = train(_config("CartPole-v1", *settings, f"run.root={tmp_path / 'a'}")).run_dir
    again = train(_config("CartPole-v1", *settings, f"run.root={tmp_path / 'b'}")).run_dir
    checkpoints = again / "checkpoints"
    newest = sorted(checkpoints.glob("*.pt"))[-1]
    newest.unlink()  # back to the checkpoint of iteration 2: prefixes must come from it
    (checkpoints / "latest").unlink()
    shutil.rmtree(again / "tb")
    resume(again)
    a, b = load_checkpoint(straight)["model"], load_checkpoint(again)["model"]
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert np.isfinite(float(next(iter(a.values())).sum()))
