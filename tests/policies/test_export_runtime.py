"""What a caller of an exported policy relies on beyond equality with PyTorch: rows it cannot
act on are refused by name, inputs that are not per-step data have defaults, a loaded export
survives pickling without its directory, and every rlformer policy shows its distribution."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlformer.algos.dt.policy import DTPolicy
from rlformer.core import CoreConfig
from rlformer.export.onnx_policy import ExportedPolicy
from rlformer.export.onnx_runner import InvalidRowsError, OnnxPolicy
from rlformer.export.writer import export_policy
from rlformer.networks.decision_transformer import DecisionTransformer
from rlformer.policies import load_policy
from rlformer.policies.base import DistributionPolicy, PolicyInfo
from tests.policies.test_export import tiny_policy

pytest.importorskip("onnxruntime")


def sample_obs(space: gym.Space, n: int, seed: int = 0) -> object:
    """``n`` observations batched as a vector env gives them."""
    space.seed(seed)
    return gym.vector.utils.concatenate(
        space, [space.sample() for _ in range(n)], gym.vector.utils.create_empty_array(space, n)
    )


@pytest.fixture(scope="module")
def dict_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A GTrXL policy on Dict observations (a float leaf among images and discrete leaves)
    with MultiDiscrete([3, 4]) actions."""
    policy = tiny_policy("dict", "multidiscrete", "gtrxl")
    return export_policy(policy, tmp_path_factory.mktemp("export"))


def graph_feed(meta: dict, obs: object, state: dict, start: np.ndarray) -> dict:
    """Observations, episode starts and state; every other input from its default alone."""
    leaves = obs if isinstance(obs, np.ndarray) else None
    feed = dict(state)
    for spec in meta["inputs"]:
        shape = [len(start) if d == "batch" else d for d in spec["shape"]]
        role = spec.get("role")
        if role == "observation":
            value = leaves if leaves is not None else flat_leaf(obs, spec["leaf"])
        elif role == "episode_start":
            value = start
        elif role == "state":
            continue
        else:
            assert "default" in spec, f"{spec['name']} has no default in policy.json"
            value = np.full(shape, spec["default"])
        feed[spec["name"]] = np.asarray(value).astype(spec["dtype"]).reshape(shape)
    return feed


def flat_leaf(obs: object, path: str) -> object:
    for key in path.split("/"):
        obs = obs[key] if isinstance(obs, dict) else obs[int(key)]
    return obs


# ------------------------------------------------------------------ invalid rows, defaults
def test_graph_flags_rows_with_non_finite_observations_or_no_allowed_action(
    dict_export: Path,
) -> None:
    runner = OnnxPolicy(dict_export, threads=1)
    obs = sample_obs(load_policy(dict_export).observation_space, 4)
    obs["vector"][1, 0] = np.nan
    obs["vector"][3, 1] = -np.inf
    feed = graph_feed(runner.meta, obs, runner.initial_state(4), np.ones(4, bool))
    mask = np.ones((4, 7), bool)
    mask[2, 3:] = False  # the second component (4 actions) allows nothing
    feed["action_mask"] = mask
    valid = runner.session.run(["input_valid"], feed)[0]
    np.testing.assert_array_equal(valid, [True, False, False, False])


def test_invalid_rows_are_refused_with_row_and_reason(dict_export: Path) -> None:
    policy = load_policy(dict_export)
    obs = sample_obs(policy.observation_space, 4)
    obs["vector"][1, 0] = np.nan
    mask = np.ones((4, 7), bool)
    mask[2, :3] = False
    state = policy.initial_state(4)
    with pytest.raises(InvalidRowsError) as err:
        policy.act(obs, state, np.ones(4, bool), None, mask)
    assert isinstance(err.value, ValueError)
    assert err.value.rows == {
        1: "observation obs.vector has a non-finite value",
        2: "the action mask allows no action in action component 0",
    }
    assert str(err.value) == (
        "invalid input, no action taken: row 1: observation obs.vector has a non-finite value; "
        "row 2: the action mask allows no action in action component 0"
    )
    assert policy.invalid_rows(obs, mask) == err.value.rows
    assert pickle.loads(pickle.dumps(err.value)).rows == err.value.rows
    obs["vector"][1, 0] = 0.0
    mask[2, 0] = True
    assert policy.invalid_rows(obs, mask) == {}
    policy.act(obs, state, np.ones(4, bool), None, mask)  # valid again: acts


def test_format_1_exports_refuse_invalid_rows_too() -> None:
    policy = load_policy(Path(__file__).parent / "data" / "export_v1_cartpole_gtrxl")
    obs = np.zeros((3, 4), np.float32)
    obs[0, 2] = np.inf
    with pytest.raises(ValueError, match="row 0: observation obs has a non-finite value"):
        policy.act(obs, policy.initial_state(3), np.ones(3, bool))
    with pytest.raises(ValueError, match="row 2: the action mask allows no action$"):
        policy.act(np.zeros((3, 4)), policy.initial_state(3), np.ones(3, bool), None,
                   np.array([[1, 0], [0, 1], [0, 0]], bool))  # fmt: skip


def test_every_input_that_is_not_step_data_has_a_default(dict_export: Path) -> None:
    meta = json.loads((dict_export / "policy.json").read_text())
    for spec in meta["inputs"]:
        if spec.get("role") not in ("observation", "episode_start", "state"):
            assert "default" in spec, spec["name"]
    # a runner that feeds the defaults acts as one that is given them
    runner = OnnxPolicy(dict_export, threads=1)
    obs = sample_obs(load_policy(dict_export).observation_space, 3)
    start = np.ones(3, bool)
    given, _ = runner.act(obs, runner.initial_state(3), start, np.zeros(3), np.ones((3, 7)))
    defaulted, _ = runner.act(obs, runner.initial_state(3), start)
    np.testing.assert_array_equal(given, defaulted)
    feed = graph_feed(runner.meta, obs, runner.initial_state(3), start)
    action = runner.session.run(["action"], feed)[0]
    np.testing.assert_array_equal(action, given)


# ------------------------------------------------------------------ pickling
def test_an_unpickled_export_acts_after_its_directory_is_gone(tmp_path: Path) -> None:
    policy = tiny_policy("box", "discrete", "gtrxl")
    folder = export_policy(policy, tmp_path / "export")
    loaded = load_policy(folder)
    obs = np.random.default_rng(0).normal(size=(3, 3)).astype(np.float32)
    start = np.array([True, True, True])

    def play(agent: ExportedPolicy | OnnxPolicy) -> list[np.ndarray]:
        state, actions, starts = agent.initial_state(3), [], start
        for _ in range(6):
            action, state = agent.act(obs, state, starts)
            actions.append(action)
            starts = np.zeros(3, bool)
        return actions

    expected = play(loaded)
    data = pickle.dumps(loaded)
    runner_data = pickle.dumps(loaded.runner)
    moved = tmp_path / "moved"
    shutil.move(folder, moved)
    copy = pickle.loads(data)
    shutil.rmtree(moved)
    assert isinstance(copy, ExportedPolicy) and copy.info == loaded.info
    assert copy.observation_space == loaded.observation_space
    np.testing.assert_array_equal(play(copy), expected)
    np.testing.assert_array_equal(play(pickle.loads(runner_data)), expected)
    generator = torch.Generator().manual_seed(1)
    sampled, _ = copy.act(obs, copy.initial_state(3), start, None, None, False, generator)
    assert sampled.shape == (3,)


# ------------------------------------------------------------------ Policy.distribution
@pytest.mark.parametrize("action", ["discrete", "multidiscrete", "multibinary", "box"])
def test_ppo_policy_distribution_is_what_act_plays(action: str) -> None:
    policy = tiny_policy("box", action, "gtrxl")
    assert isinstance(policy, DistributionPolicy)
    obs = sample_obs(policy.observation_space, 4)
    start, state = np.ones(4, bool), policy.initial_state(4)
    mask = None
    if action == "discrete":
        mask = np.zeros((4, policy.action_space.n), bool)
        mask[:, 1] = True  # only action 1 (+ start)
    dist = policy.distribution(obs, state, start, None, mask)
    actions, next_state = policy.act(obs, state, start, None, mask)
    kinds = {"discrete": "categorical", "multidiscrete": "categorical"}
    assert dist.kind == kinds.get(action, {"box": "diag_gaussian"}.get(action, "bernoulli"))
    space = policy.action_space
    if action == "discrete":
        assert len(dist.logits) == 1 and dist.logits[0].shape == (4, space.n)
        np.testing.assert_array_equal(actions, np.full(4, 1 + space.start))
    elif action == "multidiscrete":
        assert [part.shape[1] for part in dist.logits] == list(space.nvec)
        modes = np.stack([part.argmax(1) for part in dist.logits], 1)
        np.testing.assert_array_equal(actions, modes + space.start)
    elif action == "multibinary":
        np.testing.assert_array_equal(actions.reshape(4, -1), dist.logits[0] > 0)
    else:
        assert dist.mean.shape == dist.log_std.shape == (4, int(np.prod(space.shape)))
        clipped = np.clip(dist.mean, space.low.reshape(-1), space.high.reshape(-1))
        np.testing.assert_allclose(actions.reshape(4, -1), clipped, rtol=1e-6)
    torch.testing.assert_close(dist.state.actor.hidden, next_state.actor.hidden)
    torch.testing.assert_close(dist.state.prev_action, next_state.prev_action)


def test_dt_policy_and_its_export_show_the_same_distribution(tmp_path: Path) -> None:
    torch.manual_seed(0)
    core = CoreConfig(n_layers=1, d_model=16, n_heads=2, d_ff=32, memory_length=12)
    model = DecisionTransformer(3, 4, True, core)
    policy = DTPolicy(
        model,
        state_mean=np.zeros(3, np.float32),
        state_std=np.ones(3, np.float32),
        return_scale=10.0,
        context=4,
        carry_memory=False,
        info=PolicyInfo("dt", "dt", None, True, [1.0]),
        observation_space=gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
        action_space=gym.spaces.Discrete(4),
    )
    exported = ExportedPolicy(export_policy(policy, tmp_path))
    assert isinstance(policy, DistributionPolicy) and isinstance(exported, DistributionPolicy)
    obs = np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32)
    mask = np.array([[True, True, False, False], [False, False, True, True]])
    ours = policy.distribution(obs, policy.initial_state(2), np.ones(2, bool), None, mask)
    theirs = exported.distribution(obs, exported.initial_state(2), np.ones(2, bool), None, mask)
    assert ours.kind == theirs.kind == "categorical"
    np.testing.assert_allclose(ours.logits[0], theirs.logits[0], rtol=1e-5, atol=1e-5)
    modes = ours.logits[0].argmax(1)
    assert modes[0] in (0, 1) and modes[1] in (2, 3)
    np.testing.assert_array_equal(theirs.state["actions"][:, -1], modes)
    with pytest.raises(ValueError, match="row 1: observation obs has a non-finite value"):
        exported.act(np.array([[0, 0, 0], [np.nan, 0, 0]]), exported.initial_state(2),
                     np.ones(2, bool))  # fmt: skip
