"""Action masks in multi-agent runs (``mappo.action_mask``), on envs/staggered.py's masked
variant: the mask comes out of the observation (or the info), every sampled action is allowed,
the PPO update reads the masks the rollout acted under (ratio exactly 1), evaluation and the
exported team act under them too, and bad masks stop the run in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

pytest.importorskip("pettingzoo")

from rlformer.algos.mappo.evaluation import play_team  # noqa: E402
from rlformer.algos.mappo.worker import MultiAgentWorker  # noqa: E402
from rlformer.algos.ppo.learner import PPOLearner, make_sequence_batch  # noqa: E402
from rlformer.config import build_config  # noqa: E402

STAGGERED = "rlformer_envs.staggered:parallel_env"


def _cfg(mask: str, source: str | None = None, torso: str = "gtrxl", **mappo: Any) -> Any:
    raw = {
        "algo": "mappo",
        "mappo": {
            "env": STAGGERED,
            "env_kwargs": {"mask": mask},
            "action_mask": source or f"{mask}:action_mask",
            **mappo,
        },
        "model": {
            "torso": torso,
            "core": {"n_layers": 1, "d_model": 32, "n_heads": 2, "d_ff": 64},
        },
        "run": {"seed": 0},
    }
    return build_config(raw)


def _worker(cfg: Any, envs: int = 3, steps: int = 24) -> MultiAgentWorker:
    worker = MultiAgentWorker(cfg.mappo, cfg.model, envs, steps, 0)
    worker.set_weights(worker.models.state_dict(), 0)
    return worker


@pytest.mark.parametrize("mask", ["obs", "info"])
def test_sampled_actions_keep_to_the_masks_and_the_network_never_reads_them(mask: str) -> None:
    worker = _worker(_cfg(mask), envs=3, steps=27)
    group = worker.team.group("agent")
    expected = gym.spaces.Dict({"observation": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)})
    assert group.agent_space == (expected if mask == "obs" else expected["observation"])
    fragment = worker.sample().fragments["agent"]
    masks, valid = fragment.action_masks, fragment.valid
    assert masks is not None and masks.shape == (27, 9, 2)
    taken = np.take_along_axis(masks, fragment.actions[..., None], axis=-1)[..., 0]
    assert taken[valid].all()
    # At odd steps of the env's clock one action only is allowed (episodes are 9 steps).
    clock = np.arange(27) % 9
    forced = (clock % 2 == 1)[:, None] & valid
    assert (masks[forced].sum(axis=1) == 1).all() and forced.sum() > 20
    assert masks[~valid].all()  # absent rows: every action (they are not acted on)


@pytest.mark.parametrize("torso", ["gtrxl", "gru"])
def test_first_epoch_ratio_is_one_under_the_rollouts_masks(torso: str) -> None:
    cfg = _cfg("obs", torso=torso)
    worker = _worker(cfg, envs=3, steps=30)
    worker.sample()  # the second fragment starts mid-episode, from carried memory
    fragment = worker.sample().fragments["agent"]
    model = worker.models["agent"]
    batch = make_sequence_batch(fragment, cfg.ppo, torch.device("cpu"))
    assert batch.action_masks is not None
    with torch.no_grad():
        masked = model.evaluate(
            batch.obs, batch.actions, batch.state, batch.episode_start,
            action_mask=batch.action_masks,
        )  # fmt: skip
        unmasked = model.evaluate(batch.obs, batch.actions, batch.state, batch.episode_start)
    valid = batch.valid
    assert valid is not None
    assert float((masked.log_prob - batch.old_log_probs).abs()[valid].max()) < 1e-5
    # Without the masks the forced steps' log-probabilities differ: the masks are what match.
    assert float((unmasked.log_prob - batch.old_log_probs).abs()[valid].max()) > 1e-3
    learner = PPOLearner(model, cfg.ppo.model_copy(update={"update_epochs": 1}), "cpu", 1)
    assert learner.update(fragment)["ppo/first_minibatch_ratio_error"] < 1e-5


def test_evaluation_acts_under_the_masks() -> None:
    """The forced steps score 1 each, whatever the (untrained) team prefers: agent 0 has 3
    scored steps (1-3), of which steps 1 and 3 are forced, so every episode's return for it
    is at least 2."""
    cfg = _cfg("obs")
    worker = _worker(cfg)
    results = play_team(worker.models.state_dict(), cfg, 12, 4, 0, deterministic=True)
    assert len(results.episodes) == 12
    assert min(e.agent_returns["agent_0"] for e in results.episodes) >= 2.0


def _resumed(cfg: Any, edit: Any = None) -> tuple[Any, Any]:
    """A worker's next fragment, and the fragment a fresh worker samples after restoring the
    state saved before it (``edit`` may change that state's unpickled dict first)."""
    import pickle

    import cloudpickle

    worker = _worker(cfg, envs=2, steps=7)
    worker.sample()
    saved = worker.get_state()
    if edit is not None:
        data = pickle.loads(saved["state"])
        edit(data)
        saved = {**saved, "state": cloudpickle.dumps(data)}
    first = worker.sample().fragments["agent"]
    again = _worker(cfg, envs=2, steps=7)
    again.set_weights(worker.models.state_dict(), 0)
    again.set_state(saved)
    return first, again.sample().fragments["agent"]


def test_a_killed_masked_run_resumes_to_the_same_rollouts() -> None:
    first, second = _resumed(_cfg("info"))
    np.testing.assert_array_equal(first.actions, second.actions)
    np.testing.assert_array_equal(first.action_masks, second.action_masks)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlformer.cli", *args], capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["mappo.action_mask=obs:legal"], "no key 'legal'"),
        (["mappo.env_kwargs={mask: info}", "mappo.action_mask=info:legal"], "has no mask"),
        (["mappo.env_kwargs={}", "mappo.action_mask=obs:action_mask"], "Dict observation"),
        (["mappo.action_mask=action_mask"], "mappo.action_mask"),
        (["env.action_mask=obs:action_mask"], "mappo.action_mask"),
    ],
)
def test_bad_masks_stop_the_run_in_one_line(sets: list[str], message: str) -> None:
    base = ["algo=mappo", f"mappo.env={STAGGERED}", "mappo.env_kwargs={mask: obs}"]
    args = [x for item in [*base, *sets] for x in ("--set", item)]
    done = _cli("train", "--dry-run", *args)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr


def test_masks_on_box_actions_are_refused_in_one_line() -> None:
    done = _cli(
        "train", "--dry-run", "--set", "algo=mappo",
        "--set", "mappo.env=pettingzoo.sisl.multiwalker_v9:parallel_env",
        "--set", "mappo.action_mask=info:action_mask",
    )  # fmt: skip
    if "cannot import" in done.stderr:
        pytest.skip("pettingzoo's SISL envs need box2d")
    assert done.returncode == 2
    assert "Discrete and MultiDiscrete" in done.stderr.strip().splitlines()[0], done.stderr


@pytest.mark.slow
def test_the_exported_team_plays_what_the_run_plays_under_masks(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    from rlformer.algos.mappo.export import ExportedTeam
    from rlformer.algos.mappo.policy import TeamPolicy

    cfg = _cfg("obs", agent_id=True)
    worker = _worker(cfg)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # decisive logits, so that argmaxes do not tie to float noise
        for param in worker.models.parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * 0.5)
    team = TeamPolicy(worker.models.state_dict(), cfg, "masked")
    exported = ExportedTeam(team.export_to(tmp_path / "team"))
    ours = team.play(10, seed=0, num_envs=3, deterministic=True)
    theirs = exported.play(10, seed=0, num_envs=3, deterministic=True)
    assert [e.agent_returns for e in ours.episodes] == [e.agent_returns for e in theirs.episodes]
    assert min(e.agent_returns["agent_0"] for e in theirs.episodes) >= 2.0


def test_a_worker_state_saved_before_masks_existed_still_resumes() -> None:
    """Checkpoints written before ``mappo.action_mask`` hold no masks in the worker state."""
    cfg = build_config({"algo": "mappo", "mappo": {"env": STAGGERED}})
    first, second = _resumed(cfg, lambda data: data.pop("masks"))
    np.testing.assert_array_equal(first.actions, second.actions)
    assert second.action_masks is None
