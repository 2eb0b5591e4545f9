"""Action masks through rollouts and the PPO update: masks come from the env (any of the
three sources), are stored with the fragment, rule out actions in acting and in the update
(so the first-epoch ratio is still 1), and an empty mask stops the run naming slot and step."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import rlformer_envs  # noqa: F401
import torch

from rlformer.algos.ppo.algorithm import build_model
from rlformer.algos.ppo.learner import PPOLearner, make_sequence_batch
from rlformer.config import TrainConfig, load_config
from rlformer.rollout.collector import LocalCollector
from rlformer.rollout.env_guard import EnvDataError

SOURCES = {
    "method": ["env.action_mask=method:action_masks"],
    "info": ["env.action_mask=info:action_mask"],
    "obs": ["env.action_mask=obs:mask", "env.kwargs.mask_in_obs=true"],
}


def _config(*extra: str) -> TrainConfig:
    return load_config(
        None,
        [
            "env.id=rlformer/MaskedRecall-v0",
            "env.kwargs.length=3",
            "rollout.envs_per_worker=4",
            "rollout.fragment_length=24",
            "model.core.n_layers=1",
            "model.core.d_model=16",
            "model.core.n_heads=2",
            "model.core.d_ff=32",
            "model.core.memory_length=8",
            "ppo.num_minibatches=2",
            *extra,
        ],
    )


def _taken_are_allowed(actions: np.ndarray, masks: np.ndarray) -> bool:
    return bool(np.take_along_axis(masks, actions[..., None], axis=-1).all())


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_masks_from_every_source_are_stored_and_obeyed(source: str) -> None:
    torch.manual_seed(0)
    cfg = _config(*SOURCES[source])
    model = build_model(cfg)
    if source == "obs":  # the mask left the policy's input
        assert "mask" not in model.observation_space.spaces
    fragment = LocalCollector(cfg).collect(model.state_dict(), 0)
    assert fragment.action_masks is not None and fragment.action_masks.shape == (24, 4, 12)
    assert _taken_are_allowed(fragment.actions, fragment.action_masks)
    assert (fragment.env_rewards >= 0).all()  # never an invalid action's cost
    # 2 allowed actions in the corridor, the 3 answers at its end
    assert set(fragment.action_masks.sum(-1).ravel()) <= {2, 3}


def test_same_masks_whichever_source() -> None:
    masks = []
    for source in sorted(SOURCES):
        cfg = _config(*SOURCES[source])
        torch.manual_seed(0)
        model = build_model(cfg)
        masks.append(LocalCollector(cfg).collect(model.state_dict(), 0).action_masks)
    assert all(np.array_equal(masks[0], m) for m in masks[1:])


@pytest.mark.parametrize("gradient_steps", [0, 4])
def test_first_epoch_ratio_is_one_with_masks(gradient_steps: int) -> None:
    """The update re-evaluates the masked distribution the rollout sampled from: before any
    gradient step every ratio is 1, across episode resets and fragments."""
    torch.manual_seed(0)
    cfg = _config(*SOURCES["method"], f"ppo.memory_gradient_steps={gradient_steps}")
    model = build_model(cfg)
    collector = LocalCollector(cfg)
    resets = 0
    for version in range(3):
        fragment = collector.collect(model.state_dict(), version)
        resets += int(fragment.episode_start[1:].sum())
        batch = make_sequence_batch(fragment, cfg.ppo, torch.device("cpu"))
        with torch.no_grad():
            out = model.evaluate(
                batch.obs,
                batch.actions,
                batch.state,
                batch.episode_start,
                batch.rewards,
                batch.action_masks,
            )
        log_prob = out.log_prob[:, batch.prefix_steps :]
        torch.testing.assert_close(log_prob, batch.old_log_probs, atol=1e-5, rtol=0)
        # Without the masks the same actions would have other probabilities: they matter.
        with torch.no_grad():
            unmasked = model.evaluate(
                batch.obs, batch.actions, batch.state, batch.episode_start, batch.rewards
            ).log_prob[:, batch.prefix_steps :]
        assert (unmasked - batch.old_log_probs).abs().max() > 0.1
    assert resets > 0
    learner = PPOLearner(model, cfg.ppo, torch.device("cpu"), total_iterations=2)
    metrics = learner.update(collector.collect(model.state_dict(), 0))
    assert metrics["ppo/first_minibatch_ratio_error"] < 1e-5


class _EmptyMaskAt(gym.Wrapper):
    """MaskedRecall whose mask allows nothing at step ``at`` of every episode."""

    def __init__(self, env: gym.Env, at: int = 2) -> None:
        super().__init__(env)
        self.at, self.t = at, 0

    def reset(self, **kwargs: Any) -> Any:
        self.t = 0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        self.t += 1
        obs, reward, term, trunc, info = self.env.step(action)
        if self.t == self.at:
            info = {**info, "action_mask": np.zeros(12, bool)}
        return obs, reward, term, trunc, info


def test_a_mask_without_a_valid_action_names_slot_and_step() -> None:
    cfg = _config(
        "env.action_mask=info:action_mask",
        "env.kwargs.length=6",
        f"env.wrappers=[{{class: {__name__}:_EmptyMaskAt}}]",
    )
    model = build_model(cfg)
    with pytest.raises(EnvDataError) as raised:
        LocalCollector(cfg).collect(model.state_dict(), 0)
    message = str(raised.value)
    assert "no valid action" in message and "env slot 0" in message and "at step 2" in message
    assert "\n" not in message


def test_a_mask_method_the_env_lacks_is_refused_before_any_run() -> None:
    from rlformer.rollout.env_factory import EnvError

    with pytest.raises(EnvError, match="has no method 'action_masks'"):
        build_model(
            load_config(None, ["env.id=CartPole-v1", "env.action_mask=method:action_masks"])
        )
