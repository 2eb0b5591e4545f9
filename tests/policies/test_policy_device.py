"""Where a loaded policy acts: ``load_policy(..., device=)`` and ``rlformer eval --device``.

A DT that acts on a GPU keeps its context in NumPy on the host and hands actions back there, so
it must play what the same checkpoint plays on the CPU. The ``gpu`` tests run only where torch
sees a GPU; the others check the refusals a machine without one gives.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlformer.algos.dt.policy import DTPolicy
from rlformer.config import load_config
from rlformer.data.recorder import collect_dataset
from rlformer.export.writer import export_policy
from rlformer.policies import load_policy
from rlformer.policies.errors import PolicyError
from rlformer.runs.training import train
from tests.algos.test_dt_spaces import SPACE_ENV, TINY
from tests.cli.test_train_cli import rlformer

NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without a GPU")
KWARGS = {"obs": "image", "action": "discrete"}


def _dt_run(root: Path, memory: bool = False) -> Path:
    """A DT trained for a few steps on recorded image observations (fp32 on every device)."""
    data = root / "data.hdf5"
    collect_dataset(
        "random", SPACE_ENV, 150, data, seed=0, num_envs=2, progress=False, env_kwargs=KWARGS
    )
    sets = [
        "algo=dt",
        f"env.id={SPACE_ENV}",
        *(f"env.kwargs.{k}={v}" for k, v in KWARGS.items()),
        f"dt.dataset={data}",
        "dt.cnn=impala",
        "dt.train_steps=6",
        "dt.target_returns=[1]",
        "dt.core.precision=fp32",
        "eval.episodes=0",
        "run.device=cpu",
        f"run.root={root / 'runs'}",
        *TINY,
    ]
    if memory:
        sets += ["dt.memory_segments=2", "dt.core.memory_length=24"]
    return train(load_config(None, sets)).run_dir


@pytest.fixture(scope="module")
def dt_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _dt_run(tmp_path_factory.mktemp("dt"))


@pytest.mark.slow
def test_cpu_and_auto_load_a_policy_that_acts_where_torch_runs(dt_run: Path) -> None:
    for device in ("cpu", "auto"):
        policy = load_policy(dt_run, device=device)
        assert isinstance(policy, DTPolicy)
        expected = "cuda" if device == "auto" and torch.cuda.is_available() else "cpu"
        assert policy.device.type == expected
        assert next(policy.model.parameters()).device.type == expected


@NO_GPU
@pytest.mark.slow
def test_cuda_without_a_gpu_is_one_clear_error(dt_run: Path) -> None:
    with pytest.raises(PolicyError, match="sees no CUDA GPU") as caught:
        load_policy(dt_run, device="cuda")
    assert "\n" not in str(caught.value)
    done = rlformer(
        "eval", str(dt_run), "--episodes", "1", "--device", "cuda", cwd=dt_run, check=False
    )
    assert done.returncode != 0
    assert "sees no CUDA GPU" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_an_unknown_device_is_refused_by_eval(dt_run: Path) -> None:
    done = rlformer(
        "eval", str(dt_run), "--episodes", "1", "--device", "tpu", cwd=dt_run, check=False
    )
    assert done.returncode != 0
    assert "unknown device 'tpu'" in done.stderr and "Traceback" not in done.stderr


def _play_alike(cpu: DTPolicy, gpu: DTPolicy, sampled: bool) -> None:
    """Both policies see the same observations and rewards (the env follows the CPU policy's
    actions); they must choose the same actions with close predictions."""
    envs = gym.make_vec(SPACE_ENV, num_envs=3, vectorization_mode="sync", **KWARGS)
    obs, _ = envs.reset(seed=0)
    states = [cpu.initial_state(3, 1.0), gpu.initial_state(3, 1.0)]
    generators = [torch.Generator().manual_seed(7) if sampled else None for _ in range(2)]
    starts, reward = np.ones(3, bool), np.zeros(3)
    for _ in range(12):
        steps = [
            policy.step(obs, state, starts, reward, generator=gen)
            for policy, state, gen in zip((cpu, gpu), states, generators, strict=True)
        ]
        assert not steps[1].prediction.is_cuda  # handed back to the host
        torch.testing.assert_close(steps[1].prediction, steps[0].prediction, atol=1e-3, rtol=1e-3)
        np.testing.assert_array_equal(steps[1].env_actions, steps[0].env_actions)
        states = [s.state for s in steps]
        obs, reward, term, trunc, _ = envs.step(steps[0].env_actions)
        starts = term | trunc
    envs.close()


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("memory", [False, True], ids=["plain", "memory"])
def test_a_dt_acts_on_cuda_as_on_the_cpu(tmp_path: Path, memory: bool) -> None:
    run = _dt_run(tmp_path, memory)
    cpu, gpu = load_policy(run), load_policy(run, device="cuda")
    assert isinstance(cpu, DTPolicy) and isinstance(gpu, DTPolicy)
    assert next(gpu.model.parameters()).is_cuda
    for sampled in (False, True):
        _play_alike(cpu, gpu, sampled)


@pytest.mark.gpu
@pytest.mark.slow
def test_exports_stay_on_the_cpu(dt_run: Path, tmp_path: Path) -> None:
    on_gpu = load_policy(dt_run, device="cuda")
    export = export_policy(on_gpu, tmp_path / "export")  # traced from a CPU copy
    assert next(on_gpu.model.parameters()).is_cuda  # type: ignore[attr-defined]
    with pytest.raises(PolicyError, match="act on the CPU only"):
        load_policy(export, device="cuda")
    assert load_policy(export, device="auto").info.return_conditioned


@pytest.mark.slow
def test_sb3_models_act_on_the_cpu_whatever_the_device(tmp_path: Path) -> None:
    from stable_baselines3 import PPO

    PPO("MlpPolicy", "CartPole-v1", n_steps=64, device="cpu").save(tmp_path / "ppo.zip")
    spec = f"sb3:{tmp_path / 'ppo.zip'}"
    assert load_policy(spec, device="auto").info.kind == "sb3"
    expected = "act on the CPU only" if torch.cuda.is_available() else "sees no CUDA GPU"
    with pytest.raises(PolicyError, match=expected):
        load_policy(spec, device="cuda")
