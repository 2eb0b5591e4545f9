"""``rlformer export``: the ONNX graph acts exactly as the PyTorch policy it came from.

Trained policies (PPO with GTrXL, LSTM, CNN; plain and memory Decision Transformers) play real
episodes with resets twice, in PyTorch and through onnxruntime, each on its own copy of the
env with the same seeds: the actions must be the same at every step. At every step the graph
is also run on the PyTorch side's own inputs, and its distribution (``Policy.distribution``:
logits / Gaussian parameters) and next state must match PyTorch's to 1e-5.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlformer.algos.dt.policy import DTPolicy
from rlformer.algos.ppo.policy import ActorCriticPolicy
from rlformer.config import EnvConfig, ModelConfig, load_config
from rlformer.core import CoreConfig
from rlformer.data import load_dataset
from rlformer.data.d4rl_format import write_d4rl
from rlformer.data.recorder import collect_dataset
from rlformer.data.synthetic import tmaze_walks
from rlformer.export.onnx_policy import ExportedPolicy
from rlformer.export.writer import ExportError, export_policy, export_step
from rlformer.networks.actor_critic import ActorCritic
from rlformer.networks.decision_transformer import DecisionTransformer
from rlformer.networks.distributions import DiagGaussian
from rlformer.policies import PolicyInfo, load_policy
from rlformer.policies.base import DistributionPolicy, PolicyDistribution
from rlformer.policies.simple import RandomPolicy
from rlformer.rollout.env_factory import vector_env_from_config
from rlformer.runs.checkpoints import CheckpointError
from rlformer.runs.training import train
from tests import space_envs

pytest.importorskip("onnxruntime")

REPO = Path(__file__).resolve().parents[2]
TOLERANCE = 1e-5
NUM_ENVS, STEPS = 4, 260  # 1,040 steps per task, each with many episode resets

QUICK_PPO = [
    "rollout.envs_per_worker=4",
    "rollout.fragment_length=32",
    "ppo.total_steps=256",
    "ppo.update_epochs=1",
    "ppo.num_minibatches=2",
    "eval.episodes=0",
    "run.progress=false",
]
PPO_TASKS: dict[str, tuple[str | None, list[str]]] = {
    # GTrXL on the T-Maze with a 50-step corridor (its shipped config, trained briefly)
    "tmaze50-gtrxl": (
        "configs/ppo_gtrxl_tmaze.yaml",
        ["env.kwargs.length=50", "model.core.memory_length=16"],
    ),
    # LSTM, with the previous action and reward as inputs and both normalisers in the graph
    "cartpole-novel-lstm": (
        None,
        [
            "env.id=rlformer/CartPoleNoVel-v0",
            "model.torso=lstm",
            "model.recurrent_hidden=32",
            "model.prev_action_reward=true",
            "model.normalize_obs=true",
            "model.normalize_reward=true",
        ],
    ),
    # POPGym's PreviousAction wrapper: Tuple(Discrete, MultiDiscrete) observations,
    # MultiDiscrete actions (played with random action masks)
    "popgym-minesweeper-gtrxl": (
        None,
        [
            "preset=popgym",
            "env.id=popgym-MineSweeperEasy-v0",
            "model.core.d_model=32",
            "model.core.memory_length=16",
            "model.prev_action_reward=true",
        ],
    ),
    # Dict(7x7x3 uint8 image -> IMPALA CNN, Discrete direction)
    "minigrid-memory-cnn": (
        None,
        [
            "preset=null",
            "env.id=MiniGrid-MemoryS11-v0",
            "env.imports=[minigrid]",
            "env.max_episode_steps=30",
            "env.wrappers=[{class: gymnasium.wrappers:FilterObservation, "
            "kwargs: {filter_keys: [image, direction]}}]",
            "model.cnn=impala",
            "model.cnn_features=16",
            "model.core.d_model=16",
            "model.core.n_heads=2",
            "model.core.memory_length=8",
        ],
    ),
}
TINY_DT = [
    "algo=dt",
    "dt.batch_size=16",
    "dt.log_every=100",
    "dt.warmup_steps=10",
    "dt.train_steps=100",
    "dt.core.n_layers=1",
    "dt.core.d_model=16",
    "dt.core.d_ff=32",
    "eval.episodes=0",
    "run.progress=false",
]


class Trained:
    """Runs trained on first use and their exports, shared by the module's tests."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.runs: dict[str, Path] = {}

    def run(self, task: str) -> Path:
        if task not in self.runs:
            torch.manual_seed(0)
            self.runs[task] = train(self._config(task)).run_dir
        return self.runs[task]

    def export(self, task: str) -> tuple[Any, ExportedPolicy]:
        policy = load_policy(self.run(task))
        out = self.root / task / "export"
        if not (out / "policy.onnx").exists():
            export_policy(policy, out)
        return policy, ExportedPolicy(out)

    def _config(self, task: str) -> Any:
        root = self.root / task
        root.mkdir(parents=True, exist_ok=True)
        if task in PPO_TASKS:
            file, overrides = PPO_TASKS[task]
            path = None if file is None else REPO / file
            return load_config(path, [*overrides, *QUICK_PPO, f"run.root={root}"])
        if task == "hopper-dt":
            data = root / "hopper_random.hdf5"
            collect_dataset("random", "Hopper-v5", 2000, data, seed=0, num_envs=4, progress=False)
            env = [
                "env.id=Hopper-v5",
                "dt.context=5",
                "dt.return_scale=100",
                "dt.target_returns=[50]",
            ]
        else:  # memory DT on T-Maze walks: windows of 3 steps, memory carried between them
            data = root / "walks.hdf5"
            walks = tmaze_walks(4, 40, seed=0, p_correct=0.75)
            write_d4rl(data, walks, {"env_id": "rlformer/TMaze-v0"})
            env = [
                "env.id=rlformer/TMaze-v0",
                "env.kwargs.length=4",
                "dt.context=3",
                "dt.memory_segments=2",
                "dt.core.memory_length=12",
                "dt.target_returns=[1.0]",
            ]
        return load_config(None, [*TINY_DT, *env, f"dt.dataset={data}", f"run.root={root}"])


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Trained:
    return Trained(tmp_path_factory.mktemp("export"))


# ------------------------------------------------------------------ both sides of one step
def assert_same(got: np.ndarray, expected: np.ndarray, what: str) -> None:
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape and got.dtype == expected.dtype, (what, got, expected)
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(got, expected, rtol=TOLERANCE, atol=TOLERANCE, err_msg=what)
    else:
        np.testing.assert_array_equal(got, expected, err_msg=what)


def assert_same_distribution(
    got: PolicyDistribution, expected: PolicyDistribution, what: str
) -> None:
    """Same kind and parameters (the states are compared by the caller, in one format)."""
    assert got.kind == expected.kind, (what, got.kind, expected.kind)
    assert len(got.logits) == len(expected.logits), what
    for k, (ours, theirs) in enumerate(zip(got.logits, expected.logits, strict=True)):
        assert_same(ours, theirs, f"{what}: logits of component {k}")
    for name in ("mean", "log_std"):
        ours, theirs = getattr(got, name), getattr(expected, name)
        assert (ours is None) == (theirs is None), (what, name)
        if theirs is not None:
            assert_same(ours, theirs, f"{what}: {name}")


def random_mask(rng: np.random.Generator, n: int, nvec: list[int]) -> np.ndarray:
    """A random action mask leaving at least one valid action per component."""
    mask = rng.random((n, sum(nvec))) < 0.6
    offset = 0
    for size in nvec:
        mask[np.arange(n), offset + rng.integers(size, size=n)] = True
        offset += size
    return mask


def play_side_by_side(
    policy: Any, exported: ExportedPolicy, env_cfg: EnvConfig, masks: list[int] | None = None
) -> int:
    """PyTorch and the export each play their own envs (same seeds) for STEPS steps; checks
    every step and returns the number of episodes that ended.

    At every step the graph also takes the PyTorch side's own inputs and state (converted with
    the export step's ``graph_state``): its action, distribution and next state must match."""
    step = export_step(policy)
    seeds = [100 + i for i in range(NUM_ENVS)]
    envs = [vector_env_from_config(env_cfg, NUM_ENVS) for _ in range(2)]
    (obs_t, _), (obs_x, _) = (e.reset(seed=seeds) for e in envs)
    state_t, state_x = policy.initial_state(NUM_ENVS), exported.initial_state(NUM_ENVS)
    start = np.ones(NUM_ENVS, dtype=bool)
    reward_t = reward_x = None
    rng, episodes = np.random.default_rng(0), 0
    try:
        for t in range(STEPS):
            mask = None if masks is None else random_mask(rng, NUM_ENVS, masks)
            given = step.graph_state(state_t)
            graph_actions, _ = exported.act(obs_t, given, start, reward_t, mask)
            graph = exported.distribution(obs_t, given, start, reward_t, mask)
            expected = policy.distribution(obs_t, state_t, start, reward_t, mask)
            actions_t, state_t = policy.act(obs_t, state_t, start, reward_t, mask)
            actions_x, state_x = exported.act(obs_x, state_x, start, reward_x, mask)
            assert_same(actions_x, actions_t, f"free-running action at step {t}")
            assert_same(graph_actions, actions_t, f"action on PyTorch's inputs at step {t}")
            assert_same_distribution(graph, expected, f"distribution at step {t}")
            for name, value in step.graph_state(state_t).items():
                assert_same(graph.state[name], value, f"next {name} at step {t}")
            for name, value in step.graph_state(expected.state).items():
                assert_same(value, graph.state[name], f"distribution's next {name} at step {t}")
            obs_t, reward_t, term_t, trunc_t, _ = envs[0].step(actions_t)
            obs_x, reward_x, term_x, trunc_x, _ = envs[1].step(actions_x)
            start = term_t | trunc_t
            assert np.array_equal(start, term_x | trunc_x), f"episodes end alike at step {t}"
            episodes += int(start.sum())
    finally:
        for e in envs:
            e.close()
    return episodes


# ------------------------------------------------------------------ trained policies
@pytest.mark.slow
@pytest.mark.parametrize("task", list(PPO_TASKS))
def test_exported_ppo_policy_acts_as_pytorch(trained: Trained, task: str) -> None:
    policy, exported = trained.export(task)
    space = policy.action_space
    masks = None
    if isinstance(space, gym.spaces.MultiDiscrete) and task.startswith("popgym"):
        masks = [int(n) for n in space.nvec]
    episodes = play_side_by_side(policy, exported, policy.info.training_env, masks)
    assert episodes >= 8, f"{task}: the comparison should cross many episode resets"


@pytest.mark.slow
@pytest.mark.parametrize("task", ["hopper-dt", "tmaze-memory-dt"])
def test_exported_decision_transformer_acts_as_dt_policy_step(trained: Trained, task: str) -> None:
    policy, exported = trained.export(task)
    assert exported.info.return_conditioned
    assert exported.info.default_targets == policy.info.default_targets
    masks = [int(policy.action_space.n)] if policy.model.discrete else None
    episodes = play_side_by_side(policy, exported, policy.info.training_env, masks)
    assert episodes >= 8


@pytest.mark.slow
@pytest.mark.parametrize("task", ["tmaze50-gtrxl", "cartpole-novel-lstm", "tmaze-memory-dt"])
def test_episode_start_resets_a_row_inside_the_graph(trained: Trained, task: str) -> None:
    """A row that restarts mid-way (stale state, a reward from its last episode) acts exactly
    like a fresh row, at its first step and every step after."""
    _, exported = trained.export(task)
    env_cfg = exported.info.training_env
    envs = vector_env_from_config(env_cfg, NUM_ENVS)
    rng = np.random.default_rng(1)
    try:
        for restart_at in (1, 3, 7):
            obs, _ = envs.reset(seed=int(rng.integers(1000)))
            stale = exported.initial_state(NUM_ENVS)
            start, reward = np.ones(NUM_ENVS, dtype=bool), None
            for _ in range(restart_at):
                actions, stale = exported.act(obs, stale, start, reward)
                obs, reward, *_ = envs.step(actions)
                start = np.zeros(NUM_ENVS, dtype=bool)
            row = int(rng.integers(NUM_ENVS))
            fresh = exported.initial_state(NUM_ENVS)
            start_stale, start_fresh = start.copy(), np.ones(NUM_ENVS, dtype=bool)
            start_stale[row] = True
            reward_fresh = None
            for t in range(5):
                action_stale, _ = exported.act(obs, stale, start_stale, reward)
                action_fresh, _ = exported.act(obs, fresh, start_fresh, reward_fresh)
                out_stale = exported.distribution(obs, stale, start_stale, reward)
                out_fresh = exported.distribution(obs, fresh, start_fresh, reward_fresh)
                assert_same(action_stale[row], action_fresh[row], f"action {t}")
                for name in ("mean", "log_std"):
                    if getattr(out_fresh, name) is not None:
                        ours, theirs = getattr(out_stale, name), getattr(out_fresh, name)
                        assert_same(ours[row], theirs[row], f"{name} {t}")
                for ours, theirs in zip(out_stale.logits, out_fresh.logits, strict=True):
                    assert_same(ours[row], theirs[row], f"logits {t}")
                stale, fresh = out_stale.state, out_fresh.state
                obs, reward, *_ = envs.step(action_stale)
                reward_fresh = reward
                start_stale = start_fresh = np.zeros(NUM_ENVS, dtype=bool)
    finally:
        envs.close()


@pytest.mark.slow
def test_eval_of_an_export_equals_eval_of_its_run(trained: Trained, tmp_path: Path) -> None:
    """The real CLI in fresh processes: ``rlformer export``, then ``rlformer eval`` of the run
    and of the export on the same seeds give the same episodes."""
    run = trained.run("cartpole-novel-lstm")
    out = tmp_path / "exported"
    cli = [sys.executable, "-m", "rlformer.cli"]

    def rlformer(*args: str) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([*cli, *args], capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr
        return result

    rlformer("export", str(run), "--format", "onnx", "--out", str(out))
    reports = {}
    for name, agent in (("run", run), ("export", out)):
        path = tmp_path / f"{name}.json"
        rlformer("eval", str(agent), "--episodes", "6", "--seeds", "2", "--json", str(path))
        reports[name] = json.loads(path.read_text())["reports"][0]
    assert reports["export"]["mean"] == reports["run"]["mean"]
    assert reports["export"]["episodes_detail"] == reports["run"]["episodes_detail"]
    assert reports["export"]["task"] == reports["run"]["task"] == "rlformer/CartPoleNoVel-v0"
    # `rlformer collect` records from the export on its training env, with the run's actions.
    datasets = {}
    for name, agent in (("run", run), ("export", out)):
        path = tmp_path / f"{name}.hdf5"
        rlformer("collect", "--policy", str(agent), "--steps", "200", "--out", str(path))
        datasets[name] = load_dataset(str(path))
    assert datasets["export"].metadata["env_id"] == "rlformer/CartPoleNoVel-v0"
    for ours, theirs in zip(datasets["export"].episodes, datasets["run"].episodes, strict=True):
        np.testing.assert_array_equal(ours.actions, theirs.actions)


# ------------------------------------------------------------------ every space, untrained
SPACE_CASES = [
    ("box", "discrete", "gtrxl"),
    ("dict", "multidiscrete", "gtrxl"),
    ("image", "box", "lstm"),
    ("multibinary", "multibinary", "gru"),
    ("tuple", "discrete", "mlp"),
    ("discrete", "box", "gtrxl"),
    ("multidiscrete", "multidiscrete", "lstm"),
]


def tiny_policy(obs: str, action: str, torso: str, seed: int = 0) -> ActorCriticPolicy:
    """A random actor-critic with every option that adds to the graph switched on."""
    torch.manual_seed(seed)
    cfg = ModelConfig(
        torso=torso,
        prev_action_reward=True,
        normalize_obs=True,
        normalize_reward=True,
        cnn="impala",
        cnn_features=8,
        recurrent_hidden=16,
        mlp_hidden=[16],
        core={"n_layers": 2, "d_model": 16, "n_heads": 2, "d_ff": 32, "memory_length": 4},
    )
    env = space_envs.SpaceTestEnv(obs, action)
    model = ActorCritic(env.observation_space, env.action_space, cfg)
    with torch.no_grad():  # decisive logits, a spread, statistics far from their initial values
        model.policy_head.weight.mul_(100.0)
        if isinstance(model.dist, DiagGaussian):
            model.dist.log_std.normal_()
        for rms in model.normalizers().values():
            rms.count.fill_(10.0)
            rms.mean.normal_()
            rms.m2.uniform_(1.0, 30.0)
    env_cfg = EnvConfig(id="tests.space_envs:SpaceTest-v0", kwargs={"obs": obs, "action": action})
    return ActorCriticPolicy(model, PolicyInfo(f"{obs}-{action}-{torso}", "ppo", env_cfg))


@pytest.mark.slow
@pytest.mark.parametrize(("obs", "action", "torso"), SPACE_CASES)
def test_every_space_and_torso_exports(obs: str, action: str, torso: str, tmp_path: Path) -> None:
    policy = tiny_policy(obs, action, torso)
    exported = ExportedPolicy(export_policy(policy, tmp_path))
    assert exported.observation_space == policy.observation_space
    assert exported.action_space == policy.action_space
    masks = None
    space = policy.action_space
    if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
        masks = [int(space.n)] if isinstance(space, gym.spaces.Discrete) else list(space.nvec)
    assert play_side_by_side(policy, exported, policy.info.training_env, masks) > 20
    # Sampling follows policy.json: every sampled action is valid in the env.
    envs = vector_env_from_config(policy.info.training_env, 2)
    generator = torch.Generator().manual_seed(3)
    obs_now, _ = envs.reset(seed=0)
    state, start, reward = exported.initial_state(2), np.ones(2, dtype=bool), None
    for _ in range(20):
        actions, state = exported.act(obs_now, state, start, reward, None, False, generator)
        obs_now, reward, term, trunc, _ = envs.step(actions)  # the env asserts validity
        start = term | trunc
    envs.close()


def test_lstm_exports_as_products_not_the_onnx_lstm_operator(tmp_path: Path) -> None:
    """ONNX's LSTM operator is left out: the graph torch 2.11 wrote for it was refused by
    onnxruntime 1.30, where products and gates run on every version."""
    import onnx

    out = export_policy(tiny_policy("box", "discrete", "lstm"), tmp_path)
    operators = {node.op_type for node in onnx.load(str(out / "policy.onnx")).graph.node}
    assert "LSTM" not in operators
    assert {"MatMul", "Sigmoid", "Tanh"} <= operators


def test_sampling_repeats_with_a_seeded_generator_and_feeds_back_the_sample(
    tmp_path: Path,
) -> None:
    policy = tiny_policy("box", "box", "lstm")
    exported = ExportedPolicy(export_policy(policy, tmp_path))
    obs = np.zeros((2, 3), np.float32)
    start = np.ones(2, dtype=bool)

    def sample(seed: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        generator = torch.Generator().manual_seed(seed)
        return exported.act(obs, exported.initial_state(2), start, None, None, False, generator)

    (first, state), (again, _), (other, _) = sample(1), sample(1), sample(2)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)
    assert np.all(np.abs(first) <= 1.0)  # clipped to the Box
    # the next step reads the unclipped sample as its previous action, not the mode
    mode = exported.distribution(obs, exported.initial_state(2), start).state["prev_action"]
    assert not np.allclose(state["prev_action"], mode)
    np.testing.assert_array_equal(np.clip(state["prev_action"], -1.0, 1.0), first)


def test_untrained_stochastic_dt_samples_through_its_noise_input(tmp_path: Path) -> None:
    """An online DT (a squashed Gaussian): zeros play the mode, noise samples in bounds."""
    torch.manual_seed(0)
    core = CoreConfig(n_layers=1, d_model=16, n_heads=2, d_ff=32, memory_length=12)
    model = DecisionTransformer(3, 1, False, core, stochastic=True)
    space = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
    info = PolicyInfo("odt", "dt", EnvConfig(id="Pendulum-v1"), True, [-200.0])
    policy = DTPolicy(
        model,
        state_mean=np.zeros(3, np.float32),
        state_std=np.ones(3, np.float32),
        return_scale=100.0,
        context=4,
        carry_memory=False,
        action_low=space.low,
        action_high=space.high,
        info=info,
        observation_space=gym.spaces.Box(-8.0, 8.0, (3,), np.float32),
        action_space=space,
    )
    exported = ExportedPolicy(export_policy(policy, tmp_path))
    assert play_side_by_side(policy, exported, info.training_env) >= 4
    generator = torch.Generator().manual_seed(0)
    state = exported.initial_state(2)
    actions, _ = exported.act(
        np.zeros((2, 3)), state, np.ones(2, bool), None, None, False, generator
    )
    assert actions.shape == (2, 1) and np.all(np.abs(actions) <= 2.0)
    mode, _ = exported.act(np.zeros((2, 3)), state, np.ones(2, bool))
    assert not np.allclose(actions, mode)


# ------------------------------------------------------------------ refusals, runner, formats
def test_what_cannot_be_exported_is_refused_in_one_line(tmp_path: Path) -> None:
    from stable_baselines3 import PPO

    PPO("MlpPolicy", "CartPole-v1", n_steps=64, device="cpu").save(tmp_path / "sb3.zip")
    space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    refused = [
        load_policy(f"sb3:{tmp_path / 'sb3.zip'}"),
        RandomPolicy(space, gym.spaces.Discrete(2), seed=0),
    ]
    for policy in refused:
        with pytest.raises(ExportError) as err:
            export_policy(policy, tmp_path / "out")
        assert "\n" not in str(err.value) and "cannot be exported" in str(err.value)
    with pytest.raises(ExportError, match="unknown export format 'tflite'"):
        export_policy(tiny_policy("box", "discrete", "mlp"), tmp_path / "out", format="tflite")
    assert not (tmp_path / "out").exists()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "policy.json").write_text("{}")
    (broken / "policy.onnx").write_bytes(b"not a graph")
    with pytest.raises(CheckpointError, match="not a readable rlformer export"):
        load_policy(broken)
    command = ["export", f"sb3:{tmp_path / 'sb3.zip'}", "--out", str(tmp_path / "cli")]
    result = subprocess.run(
        [sys.executable, "-m", "rlformer.cli", *command],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 2
    assert result.stderr.count("error:") == 1 and "cannot be exported" in result.stderr


def test_reference_runner_needs_neither_torch_nor_rlformer(tmp_path: Path) -> None:
    policy = tiny_policy("tuple", "box", "lstm")
    out = export_policy(policy, tmp_path / "exported")
    runner = REPO / "rlformer" / "export" / "onnx_runner.py"
    script = textwrap.dedent(
        f"""
        import importlib.util, json, sys
        import numpy as np
        spec = importlib.util.spec_from_file_location("onnx_runner", {str(runner)!r})
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        policy = module.OnnxPolicy({str(out)!r}, threads=1)
        obs = (np.array([0, 1, 1]), np.array([3, 0, 2]))
        state = policy.initial_state(3)
        start = np.array([True, True, True])
        actions = []
        for t in range(4):
            action, state = policy.act(obs, state, start, np.ones(3) * t)
            actions.append(action.tolist())
            start = np.zeros(3, bool)
        sampled, _ = policy.act(obs, state, start, None, None, False, np.random.default_rng(0))
        loaded = [m for m in sys.modules if m.split(".")[0] in ("torch", "rlformer")]
        print(json.dumps({{"actions": actions, "sampled": sampled.tolist(), "loaded": loaded}}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["loaded"] == []
    # the same actions as the PyTorch policy on the same inputs
    obs = (np.array([0, 1, 1]), np.array([3, 0, 2]))
    state, start = policy.initial_state(3), np.ones(3, dtype=bool)
    for t, expected in enumerate(report["actions"]):
        actions, state = policy.act(obs, state, start, np.ones(3) * t)
        np.testing.assert_allclose(expected, actions, atol=TOLERANCE)
        start = np.zeros(3, dtype=bool)
    assert np.array(report["sampled"]).shape == (3, 2)


def test_policy_json_writes_down_how_to_run_the_graph(tmp_path: Path) -> None:
    policy = tiny_policy("dict", "multidiscrete", "gtrxl")
    out = export_policy(policy, tmp_path)
    loaded = load_policy(out)  # an export directory loads as a policy like a run does
    assert isinstance(loaded, ExportedPolicy) and isinstance(loaded, DistributionPolicy)
    assert loaded.info.kind == "onnx" and loaded.info.training_env == policy.info.training_env
    meta = json.loads((out / "policy.json").read_text())
    inputs = {spec["name"]: spec for spec in meta["inputs"]}
    outputs = {spec["name"] for spec in meta["outputs"]}
    assert meta["kind"] == "ppo" and meta["torso"] == "gtrxl" and meta["format_version"] == 2
    assert {"obs.image", "obs.chw", "obs.vector", "obs.inner.0", "obs.inner.1"} <= set(inputs)
    assert inputs["obs.inner.2.bits"]["leaf"] == "inner/2/bits"
    for layer in (0, 1):  # per layer: states, and their keys and values by head
        assert inputs[f"memory.{layer}"]["shape"] == ["batch", 4, 16]
        assert inputs[f"memory_keys.{layer}"]["shape"] == ["batch", 2, 4, 8]
        assert inputs[f"memory_values.{layer}"]["initial"] == 0.0
    assert inputs["memory_valid"]["initial"] is False and inputs["memory.0"]["initial"] == 0.0
    assert inputs["action_mask"]["shape"] == ["batch", 7]
    assert meta["action_mask_components"] == [3, 4]
    defaults = {name: spec["default"] for name, spec in inputs.items() if "default" in spec}
    assert defaults == {"action_mask": True, "reward": 0.0}
    assert {"logits", "action", "input_valid", "next_memory.1", "next_memory_keys.0"} <= outputs
    assert {"next_memory_valid", "next_prev_action"} <= outputs
    assert meta["sampling"]["nvec"] == [3, 4] and meta["sampling"]["start"] == [1, 0]
    assert meta["sampling"]["model_action_state"] == "prev_action"
    assert meta["training_env"]["id"] == "tests.space_envs:SpaceTest-v0"
    assert set(meta["normalization"]) == {"obs/vector", "reward"}
    assert "value" not in outputs  # the critic is not exported


def test_torch_export_format_writes_a_program_computing_the_same_step(tmp_path: Path) -> None:
    from rlformer.export.writer import example_inputs

    policy = tiny_policy("box", "multibinary", "gru")
    out = export_policy(policy, tmp_path, format="torch-export")
    assert json.loads((out / "policy.json").read_text())["model_file"] == "policy.pt2"
    program = torch.export.load(out / "policy.pt2").module()
    step = export_step(policy)
    inputs = example_inputs(step, batch=5)
    with torch.no_grad():
        for got, expected in zip(program(*inputs), step(*inputs), strict=True):
            torch.testing.assert_close(got, expected)


def test_the_projection_cache_can_be_switched_off_for_tracing() -> None:
    """Exported copies never touch the core's weak-reference cache; eager results are the same
    with the cache on and off."""
    policy = tiny_policy("box", "discrete", "gtrxl")
    step = export_step(policy)
    core = step.model.actor_torso.core
    assert policy.model.actor_torso.core.projection_cache and not core.projection_cache
    state, obs = policy.initial_state(2), np.ones((2, 3), np.float32)
    start = np.array([True, True])
    cached, state_on = policy.act(obs, state, start)
    policy.model.actor_torso.core.projection_cache = False
    plain, state_off = policy.act(obs, state, start)
    np.testing.assert_array_equal(cached, plain)
    assert torch.equal(state_on.actor.hidden, state_off.actor.hidden)
