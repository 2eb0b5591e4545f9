"""Decision Transformers on every space PPO takes: MiniGrid's Dict observations and MinAtar's
bool images (real envs, recorded with `rlformer collect`), MultiDiscrete and MultiBinary actions
for the plain, memory and online DT, then evaluation, export and the exported graph acting as the
checkpoint does."""

from __future__ import annotations

import json
import math
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlformer.algos.dt.policy import DTPolicy
from rlformer.config import load_config
from rlformer.data.recorder import collect_dataset
from rlformer.export.onnx_policy import ExportedPolicy
from rlformer.export.writer import export_policy
from rlformer.networks.decision_transformer import DecisionTransformer, dt_loss
from rlformer.networks.distributions import Bernoulli, MultiCategorical
from rlformer.networks.dt_spaces import StateLayout, env_actions, model_actions
from rlformer.networks.encoders import ImpalaCNN, MinAtarCNN
from rlformer.policies import load_policy
from rlformer.runs.loop import build_algorithm
from tests.cli.test_train_cli import rlformer

TINY = [
    "dt.context=4",
    "dt.batch_size=6",
    "dt.log_every=3",
    "dt.warmup_steps=2",
    "dt.core.n_layers=1",
    "dt.core.d_model=16",
    "dt.core.d_ff=32",
    "dt.core.dropout=0.0",
    "dt.cnn_features=16",
    "run.progress=false",
]
SPACE_ENV = "tests.space_envs:SpaceTest-v0"
MINIGRID_DICT = (
    "env.wrappers=[{class: rlformer_envs:SuccessFromReward}, "
    "{class: 'gymnasium.wrappers:FilterObservation', kwargs: {filter_keys: [image, direction]}}]"
)


def _train(sets: list[str], root: Path):  # noqa: ANN202 - the algorithm
    algo = build_algorithm(load_config(None, [*sets, *TINY, f"run.root={root}"]))
    algo.start()
    metrics: dict[str, float] = {}
    try:
        while not algo.finished():
            metrics = algo.iterate()
    finally:
        algo.close()
    return algo, metrics


def _acts_alike(policy: DTPolicy, exported: ExportedPolicy, env_id: str, **kwargs: str) -> None:
    """The exported graph plays the checkpoint's actions on a real vector env's batches."""
    envs = gym.make_vec(env_id, num_envs=3, vectorization_mode="sync", **kwargs)
    obs, _ = envs.reset(seed=0)
    torch_state, onnx_state = policy.initial_state(3, 1.0), exported.initial_state(3, 1.0)
    starts, reward = np.ones(3, bool), np.zeros(3)
    for _ in range(7):
        ours, torch_state = policy.act(obs, torch_state, starts, reward)
        theirs, onnx_state = exported.act(obs, onnx_state, starts, reward)
        assert np.asarray(ours).dtype == np.asarray(theirs).dtype
        np.testing.assert_allclose(np.asarray(ours, float), np.asarray(theirs, float), atol=1e-4)
        obs, reward, term, trunc, _ = envs.step(ours)
        starts = term | trunc
    envs.close()


@pytest.mark.slow
def test_minigrid_dict_observations_collect_train_evaluate_export(tmp_path: Path) -> None:
    """Image + direction, recorded by the CLI from a random policy: the DT reads the 7x7 view
    with a CNN and the direction one-hot, as PPO does; export and evaluation follow."""
    env = ("--set", "env.id=MiniGrid-Empty-5x5-v0", "--set", "env.imports=[minigrid]")
    env += ("--set", MINIGRID_DICT)
    data = tmp_path / "minigrid.hdf5"
    recorded = rlformer("collect", *env, "--steps", "240", "--out", str(data), cwd=tmp_path)
    assert "observations  direction  shape ()" in recorded.stdout
    assert "image      shape (7, 7, 3) dtype uint8" in recorded.stdout
    info = rlformer("dataset", "info", str(data), cwd=tmp_path)
    assert "observations  direction  shape ()" in info.stdout and "transitions   240" in info.stdout
    sets = [
        f"--set={s}"
        for s in (
            "algo=dt",
            f"dt.dataset={data}",
            "dt.train_steps=6",
            "dt.cnn=minatar",
            "dt.image_scale=10",
            "eval.episodes=2",
            "dt.target_returns=[1]",
            f"run.root={tmp_path / 'runs'}",
            *TINY,
        )
    ]
    trained = rlformer("train", *env, *sets, cwd=tmp_path)
    assert "target 1: return" in trained.stderr and "success rate" in trained.stderr
    (run,) = (tmp_path / "runs").iterdir()
    export = tmp_path / "export"
    rlformer("export", str(run), "--out", str(export), cwd=tmp_path)
    meta = json.loads((export / "policy.json").read_text())
    names = {spec["name"]: spec for spec in meta["inputs"]}
    assert names["obs.image"]["dtype"] == "uint8" and names["obs.direction"]["dtype"] == "int64"
    assert names["states.image"]["shape"] == ["batch", 4, 7, 7, 3]
    evaluated = rlformer("eval", str(export), "--episodes", "2", cwd=tmp_path)
    assert "MiniGrid-Empty-5x5-v0" in evaluated.stdout
    policy = load_policy(run)
    assert isinstance(policy, DTPolicy) and not policy.layout.flat
    assert any(isinstance(m, MinAtarCNN) for m in policy.model.modules())
    _acts_alike_minigrid(policy, ExportedPolicy(export))


def _acts_alike_minigrid(policy: DTPolicy, exported: ExportedPolicy) -> None:
    """On the view the run trained on (image and direction)."""
    import minigrid  # noqa: F401 - registers the ids

    envs = gym.vector.SyncVectorEnv(
        [
            lambda: gym.wrappers.FilterObservation(
                gym.make("MiniGrid-Empty-5x5-v0"), ["image", "direction"]
            )
        ]
        * 2
    )
    obs, _ = envs.reset(seed=0)
    ours_state, theirs_state = policy.initial_state(2, 1.0), exported.initial_state(2, 1.0)
    starts, reward = np.ones(2, bool), np.zeros(2)
    for _ in range(6):
        ours, ours_state = policy.act(obs, ours_state, starts, reward)
        theirs, theirs_state = exported.act(obs, theirs_state, starts, reward)
        np.testing.assert_array_equal(ours, theirs)
        obs, reward, term, trunc, _ = envs.step(ours)
        starts = term | trunc
    envs.close()


@pytest.mark.slow
@pytest.mark.parametrize("memory", [False, True], ids=["plain", "memory"])
def test_minatar_breakout_bool_images(tmp_path: Path, memory: bool) -> None:
    """10x10x4 boolean grids through MinAtar's one-convolution encoder, stored bool and
    compressed, read as 0/1 (never divided by dt.image_scale)."""
    pytest.importorskip("minatar")
    from rlformer.config import EnvConfig

    env = EnvConfig(id="MinAtar/Breakout-v1", imports=["minatar.gym:register_envs"])
    data = tmp_path / "breakout.hdf5"
    collect_dataset("random", env.id, 300, data, seed=0, num_envs=2, progress=False, env_cfg=env)
    sets = [
        "algo=dt",
        "env.id=MinAtar/Breakout-v1",
        "env.imports=[minatar.gym:register_envs]",
        f"dt.dataset={data}",
        "dt.train_steps=6",
        "dt.cnn=minatar",
        "dt.target_returns=[2]",
    ]
    if memory:
        sets += ["dt.memory_segments=2", "dt.core.memory_length=24"]
    algo, metrics = _train(sets, tmp_path / "runs")
    assert math.isfinite(metrics["loss/action"])
    assert algo.sampler.states.dtype == np.uint8  # the windows keep bytes, not floats
    assert algo.sampler.state_mean.size == 0  # nothing to standardise in an image
    cnn = next(m for m in algo.model.modules() if isinstance(m, MinAtarCNN))
    assert cnn.convs[0].in_channels == 4
    evaluation = algo.evaluate(2, seed=0)
    assert evaluation.metrics["target_2/episodes"] == 2.0


CASES = [
    # (observation, action, algo): every action head, with images, nested Dict / Tuple
    # observations, discrete leaves numbered from 1, the memory DT and ODT's entropies.
    ("dict", "multidiscrete", "dt"),
    ("image", "multibinary", "odt"),
    ("tuple", "multidiscrete", "odt"),
    ("multibinary", "multibinary", "memory"),
    ("discrete", "box", "dt"),
    ("multidiscrete", "discrete", "odt"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("obs", "action", "algo"), CASES)
def test_every_action_space_trains_evaluates_and_exports(
    tmp_path: Path, obs: str, action: str, algo: str
) -> None:
    kwargs = {"obs": obs, "action": action}
    data = tmp_path / "data.hdf5"
    collect_dataset(
        "random", SPACE_ENV, 150, data, seed=0, num_envs=2, progress=False, env_kwargs=kwargs
    )
    sets = [
        f"algo={'odt' if algo == 'odt' else 'dt'}",
        f"env.id={SPACE_ENV}",
        f"env.kwargs.obs={obs}",
        f"env.kwargs.action={action}",
        f"dt.dataset={data}",
        "dt.cnn=impala",
        "dt.target_returns=[1]",
        "eval.episodes=0",
    ]
    if algo == "odt":
        sets += [
            "odt.pretrain_steps=3",
            "odt.online_steps=20",
            "odt.updates_per_iteration=2",
            "odt.replay_size=10",
            "rollout.backend=local",
            "rollout.num_workers=1",
            "rollout.envs_per_worker=2",
        ]
    else:
        sets.append("dt.train_steps=6")
    if algo == "memory":
        sets += ["dt.memory_segments=2", "dt.core.memory_length=24"]
    trained, metrics = _train(sets, tmp_path / "runs")
    assert math.isfinite(metrics["loss/action"])
    if algo == "odt":
        assert metrics["rollout/episodes"] > 0 and math.isfinite(metrics["policy/entropy"])
        assert metrics["policy/entropy"] > 0 or action == "box"
        trajectories = trained.buffer.state_dict()["online"]
        assert trajectories  # the online episodes, observation trees included, are checkpointed
    assert trained.evaluate(2, seed=0).metrics["target_1/episodes"] == 2.0
    policy = trained.policy()
    exported = ExportedPolicy(export_policy(policy, tmp_path / "export"))
    _acts_alike(policy, exported, SPACE_ENV, **kwargs)
    if action != "box":  # a sampled evaluation draws from each head's distribution
        sampled = trained.cfg.model_copy(
            update={"eval": trained.cfg.eval.model_copy(update={"deterministic": False})}
        )
        trained.cfg = sampled
        assert trained.evaluate(2, seed=1).metrics["target_1/episodes"] == 2.0


def test_multidiscrete_and_multibinary_losses_are_the_joint_likelihoods() -> None:
    """The DT's imitation loss is the data's negative log-likelihood under PPO's per-space
    distributions (summed over components), and ODT's default target entropy is 30% of a
    uniform policy's."""
    from rlformer.algos.odt.learner import default_target_entropy, nll_and_entropy
    from rlformer.core import CoreConfig
    from rlformer.networks.decision_transformer import DTOutput

    core = CoreConfig(n_layers=1, d_model=16, n_heads=1, d_ff=32, memory_length=12)
    logits = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([[True, True, False], [True, True, True]])
    indices = torch.tensor([[[0, 1], [2, 0], [0, 0]], [[1, 1], [0, 0], [2, 1]]])
    expected, _ = MultiCategorical(gym.spaces.MultiDiscrete([3, 2])).log_prob_entropy(
        logits, indices
    )
    loss = dt_loss(logits, indices, mask, "multidiscrete", [3, 2])
    torch.testing.assert_close(loss, -expected[mask].mean())
    nll, _ = nll_and_entropy(DTOutput(logits, None), indices, mask, "multidiscrete", [3, 2])
    torch.testing.assert_close(nll, loss)
    bits = (torch.rand(2, 3, 5, generator=torch.Generator().manual_seed(1)) > 0.5).float()
    expected, _ = Bernoulli(gym.spaces.MultiBinary(5)).log_prob_entropy(logits, bits)
    torch.testing.assert_close(dt_loss(logits, bits, mask, "multibinary"), -expected[mask].mean())
    multi = DecisionTransformer(
        3, 5, False, core, action_kind="multidiscrete", action_nvec=[3, 2], stochastic=True
    )
    assert default_target_entropy(multi) == pytest.approx(0.3 * (math.log(3) + math.log(2)))
    binary = DecisionTransformer(3, 5, False, core, action_kind="multibinary", stochastic=True)
    assert default_target_entropy(binary) == pytest.approx(0.3 * 5 * math.log(2))
    assert binary.predict_log_std is None  # logits are the distribution: no spread head


def test_actions_round_trip_through_the_model_space() -> None:
    """Indices from 0 in the model, the env's numbering outside it; bits as floats."""
    multi = gym.spaces.MultiDiscrete([3, 4], start=[1, -2])
    env = np.array([[1, -2], [3, 1]])
    model = model_actions(env, multi)
    np.testing.assert_array_equal(model, [[0, 0], [2, 3]])
    np.testing.assert_array_equal(env_actions(model, multi), env)
    shifted = gym.spaces.Discrete(3, start=5)
    np.testing.assert_array_equal(model_actions(np.array([5, 7]), shifted), [0, 2])
    np.testing.assert_array_equal(env_actions(np.array([0, 2]), shifted), [5, 7])
    bits = gym.spaces.MultiBinary((2, 2))
    as_floats = model_actions(np.ones((3, 2, 2), np.int8), bits)
    assert as_floats.shape == (3, 4) and as_floats.dtype == np.float32
    assert env_actions(as_floats, bits).shape == (3, 2, 2)


def test_checkpoints_that_read_observations_as_one_vector_keep_doing_so() -> None:
    """A checkpoint whose DT reads a Discrete or image observation as one standardised vector
    is told apart by its statistics' size, and keeps reading it that way."""
    discrete = gym.spaces.Discrete(16)
    assert StateLayout.of_checkpoint(discrete, 1).flat
    assert not StateLayout.of_checkpoint(discrete, 0).flat
    image = gym.spaces.Box(0, 255, (9, 9, 3), np.uint8)
    assert StateLayout.of_checkpoint(image, 9 * 9 * 3).flat
    assert not StateLayout.of_checkpoint(image, 0).flat
    vector = gym.spaces.Box(-1, 1, (4,), np.float32)
    assert StateLayout.of_checkpoint(vector, 4).flat  # the same either way
    mixed = gym.spaces.Dict({"image": image, "speed": vector})
    layout = StateLayout.of_checkpoint(mixed, 4)
    assert not layout.flat and layout.vector == ["speed"]


def test_an_image_too_small_for_the_cnn_is_refused_naming_the_setting(tmp_path: Path) -> None:
    from rlformer.algos.dt.algorithm import refuse_unusable_spaces
    from rlformer.rollout.env_factory import EnvError

    named = ["algo=dt", f"env.id={SPACE_ENV}", "env.kwargs.obs=dict", "dt.cnn=nature"]
    cfg = load_config(None, named)
    env = gym.make(SPACE_ENV, obs="dict")
    with pytest.raises(EnvError, match="observation key 'chw' is a 6x6 image.*dt.cnn=impala"):
        refuse_unusable_spaces(cfg, env.observation_space, env.action_space)
    impala = cfg.model_copy(update={"dt": cfg.dt.model_copy(update={"cnn": "impala"})})
    refuse_unusable_spaces(impala, env.observation_space, env.action_space)
    from rlformer.algos.dt.loading import build_dt

    model = build_dt(impala, env.observation_space, env.action_space)
    assert sum(isinstance(m, ImpalaCNN) for m in model.modules()) == 2  # image and chw leaves


@pytest.mark.slow
def test_online_dt_on_tuple_observations_resumes_to_the_same_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Online trajectories with observation trees travel in the checkpoint's replay buffer
    (tensors only): a run stopped online and resumed ends where an uninterrupted run ends."""
    import os
    import signal

    from rlformer.algos.odt.algorithm import ODT
    from rlformer.runs.checkpoints import load_checkpoint
    from rlformer.runs.loop import run
    from rlformer.runs.signals import Interrupted

    kwargs = {"obs": "tuple", "action": "multibinary"}
    data = tmp_path / "data.hdf5"
    collect_dataset(
        "random", SPACE_ENV, 120, data, seed=0, num_envs=2, progress=False, env_kwargs=kwargs
    )

    def config(root: str):  # noqa: ANN202
        sets = [
            "algo=odt",
            f"env.id={SPACE_ENV}",
            "env.kwargs.obs=tuple",
            "env.kwargs.action=multibinary",
            f"dt.dataset={data}",
            "dt.target_returns=[1]",
            "eval.episodes=0",
            "odt.pretrain_steps=3",
            "odt.online_steps=40",
            "odt.updates_per_iteration=2",
            "odt.replay_size=10",
            "rollout.backend=local",
            "rollout.num_workers=1",
            "rollout.envs_per_worker=2",
            "run.checkpoint_every=1",
            f"run.root={tmp_path / root}",
        ]
        return load_config(None, [*sets, *TINY])

    straight = run(config("straight"))
    saved = load_checkpoint(straight.run_dir)["odt"]["buffer"]["online"]
    entry = next(iter(saved.values()))
    assert set(entry["observations"]) == {"0", "1"}  # the tree, as tensors
    play = ODT.iterate

    def interrupted(self: ODT) -> dict[str, float]:
        metrics = play(self)
        if self.iteration == 3:  # online by then
            os.kill(os.getpid(), signal.SIGINT)
        return metrics

    monkeypatch.setattr(ODT, "iterate", interrupted)
    with pytest.raises(Interrupted) as stopped:
        run(config("stopped"))
    monkeypatch.undo()
    resumed = run(config("stopped"), resume_dir=stopped.value.run_dir)
    a = load_checkpoint(straight.run_dir)["model"]
    b = load_checkpoint(resumed.run_dir)["model"]
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_dict_observation_dt_sessions_batch_and_travel_in_state_blobs(tmp_path: Path) -> None:
    """`rlformer serve`'s stepper: a memory DT on Dict observations (images, nested Tuple)
    with MultiDiscrete actions acts alike for sessions batched together, run alone, or carrying
    their context (a dict of leaf windows) in sealed blobs."""
    pytest.importorskip("ray.serve", reason="rlformer.serve imports Ray Serve")
    from rlformer.algos.dt.loading import build_dt
    from rlformer.runs.checkpoints import encode_spec, write_checkpoint_file
    from rlformer.serve.batched_steps import parse_step, row_ops, step_batch
    from rlformer.serve.sessions import SessionStore
    from rlformer.serve.state_blob import new_state_key
    from rlformer.serve.steps import state_codec

    sets = [
        "algo=dt",
        f"env.id={SPACE_ENV}",
        "env.kwargs.obs=dict",
        "env.kwargs.action=multidiscrete",
        "dt.memory_segments=2",
        "dt.core.memory_length=12",
        "dt.cnn=impala",
        "dt.target_returns=[1.0]",
    ]
    cfg = load_config(None, [*sets, *TINY])
    env = gym.make(cfg.env.id, **cfg.env.kwargs)
    model = build_dt(cfg, env.observation_space, env.action_space)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # spread weights: actions that differ between observations
        for param in model.parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * 0.5)
    path = tmp_path / "dt.pt"
    payload = {
        "kind": "dt",
        "config": cfg.model_dump(mode="json"),
        "spec": encode_spec(env.observation_space, env.action_space),
        "model": model.state_dict(),
        "normalization": {  # the one vector leaf ("vector", 2 values) is standardised
            "state_mean": torch.zeros(2),
            "state_std": torch.ones(2),
            "action_low": None,
            "action_high": None,
        },
    }
    write_checkpoint_file(path, payload)
    policy = load_policy(path)

    def as_json(value: object) -> object:
        if isinstance(value, dict):
            return {key: as_json(v) for key, v in value.items()}
        if isinstance(value, tuple):
            return [as_json(v) for v in value]
        return np.asarray(value).tolist()

    plans = {}
    for i in range(4):
        env.observation_space.seed(i)
        plans[f"s{i}"] = [
            {
                "observation": as_json(env.observation_space.sample()),
                "episode_start": t % 5 == 0,
                "reward": None if t % 5 == 0 else 0.5,
            }
            for t in range(9)
        ]
    ops, store = row_ops(policy), SessionStore(60, 100)
    alone = {
        sid: [step_batch(policy, ops, store, [parse_step(policy, sid, s)])[0] for s in steps]
        for sid, steps in plans.items()
    }
    alone = {sid: [r["action"] for r in results] for sid, results in alone.items()}
    batched: dict[str, list] = {sid: [] for sid in plans}
    for t in range(9):
        batch = [parse_step(policy, f"b{sid}", plans[sid][t]) for sid in plans]
        for request, result in zip(batch, step_batch(policy, ops, store, batch), strict=True):
            batched[request.session_id[1:]].append(result["action"])
    assert batched == alone
    codec = state_codec(policy, ops, new_state_key())
    blob, carried = None, []
    for step in plans["s0"]:
        body = step if step["episode_start"] else {**step, "state": blob}
        request = parse_step(policy, None, body, codec.open)
        result = step_batch(policy, ops, store, [request], seal=codec.seal)[0]
        carried.append(result["action"])
        blob = result["state"]
    assert carried == alone["s0"]


@pytest.mark.gpu
@pytest.mark.slow
def test_image_dt_trains_on_cuda_and_acts_on_the_cpu(tmp_path: Path) -> None:
    """Windows of uint8 images move to the GPU as bytes and the CNN reads them there; the
    policy evaluation takes a CPU copy of the model."""
    kwargs = {"obs": "dict", "action": "multidiscrete"}
    data = tmp_path / "data.hdf5"
    collect_dataset(
        "random", SPACE_ENV, 150, data, seed=0, num_envs=2, progress=False, env_kwargs=kwargs
    )
    sets = [
        "algo=dt",
        f"env.id={SPACE_ENV}",
        "env.kwargs.obs=dict",
        "env.kwargs.action=multidiscrete",
        f"dt.dataset={data}",
        "dt.cnn=impala",
        "dt.train_steps=6",
        "dt.target_returns=[1]",
        "run.device=cuda",
    ]
    trained, metrics = _train(sets, tmp_path / "runs")
    assert math.isfinite(metrics["loss/action"])
    assert next(trained.model.parameters()).is_cuda
    assert trained.evaluate(2, seed=0).metrics["target_1/episodes"] == 2.0
