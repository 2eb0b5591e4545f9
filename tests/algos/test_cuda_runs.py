"""The CUDA path is the same code: PPO, DT and ODT learners on a GPU against the same run on CPU.

These run only where torch sees a GPU (``gpu`` marker); CI machines skip them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rlformer.config import TrainConfig, load_config
from rlformer.runs.checkpoints import load_checkpoint
from rlformer.runs.loop import build_algorithm, run
from rlformer.runs.training import resume
from tests.algos.test_odt_runs import TINY_DT as ODT_TESTS_DT

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

TINY_DT = [
    "env.id=rlformer/TMaze-v0",
    "env.kwargs.length=4",
    *ODT_TESTS_DT,
    # The sizes these tests were run with on an H100 and an H200 (later keys win).
    "dt.batch_size=16",
    "dt.core.n_layers=2",
    "dt.core.d_model=32",
    "dt.core.d_ff=64",
    "dt.target_returns=[1]",
    "eval.episodes=4",
]

Weights = dict[str, torch.Tensor]


def _first_iteration(cfg: TrainConfig) -> tuple[dict[str, float], Weights, Weights]:
    """Metrics of one iteration and the weights before and after it, as CPU tensors."""
    algo = build_algorithm(cfg)

    def weights() -> Weights:
        return {k: v.detach().cpu().clone() for k, v in algo.model.state_dict().items()}

    before = weights()
    algo.start()
    try:
        metrics = algo.iterate()
    finally:
        algo.close()
    return metrics, before, weights()


def test_ppo_update_on_cuda_equals_the_cpu_update(tmp_path: Path) -> None:
    """CPU workers collect the same fragment for both; the CUDA learner runs fp32 (PPO's
    default precision), so its losses and new weights match the CPU learner's to float noise."""
    overrides = [
        "env.id=rlformer/TMaze-v0",
        "env.kwargs.length=4",
        "rollout.backend=local",
        "rollout.envs_per_worker=4",
        "rollout.fragment_length=16",
        "ppo.total_steps=256",
        f"run.root={tmp_path}",
    ]
    cpu_metrics, initial, cpu_weights = _first_iteration(
        load_config(None, [*overrides, "run.device=cpu"])
    )
    cuda_metrics, _, cuda_weights = _first_iteration(
        load_config(None, [*overrides, "run.device=cuda"])
    )
    for key in ("loss/policy", "loss/value", "loss/entropy"):
        assert cuda_metrics[key] == pytest.approx(cpu_metrics[key], rel=1e-4, abs=1e-6), key
    for key, value in cpu_weights.items():
        torch.testing.assert_close(cuda_weights[key], value, rtol=1e-4, atol=1e-5, msg=key)
    # The update moved the weights well beyond that tolerance, so the comparison has teeth.
    moved = max(float((cpu_weights[k] - v).abs().max()) for k, v in initial.items())
    assert moved > 1e-3


def test_dt_update_on_cuda_matches_the_cpu_update_under_bf16(walks: Path, tmp_path: Path) -> None:
    """The DT core autocasts to bf16 on CUDA; its losses stay within bf16's precision of fp32."""
    overrides = ["algo=dt", f"dt.dataset={walks}", *TINY_DT, f"run.root={tmp_path}"]
    cpu_metrics, _, _ = _first_iteration(load_config(None, [*overrides, "run.device=cpu"]))
    cuda_metrics, _, _ = _first_iteration(load_config(None, [*overrides, "run.device=cuda"]))
    assert cuda_metrics["loss/action"] == pytest.approx(cpu_metrics["loss/action"], rel=3e-2)


def test_odt_trained_on_cuda_resumes_on_cpu_from_a_portable_checkpoint(
    walks: Path, tmp_path: Path
) -> None:
    """A run started on a GPU machine continues on a CPU one: its checkpoint holds only CPU
    tensors (a plain ``torch.load`` needs no map_location), and resuming with
    ``run.device=cpu`` finishes the online budget and evaluates."""
    cfg = load_config(
        None,
        [
            "algo=odt",
            f"dt.dataset={walks}",
            *TINY_DT,
            "odt.pretrain_steps=10",
            "odt.online_steps=30",
            "odt.updates_per_iteration=4",
            "odt.replay_size=30",
            "rollout.backend=local",
            "rollout.envs_per_worker=2",
            "run.checkpoint_every=1",
            "run.device=cuda",
            f"run.root={tmp_path}",
            "run.progress=false",
        ],
    )
    first = run(cfg)
    newest = sorted((first.run_dir / "checkpoints").glob("ckpt_*.pt"))[-1]
    raw = torch.load(newest, weights_only=True)  # no map_location
    tensors: list[torch.Tensor] = []

    def collect(value: object) -> None:
        if isinstance(value, torch.Tensor):
            tensors.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                collect(item)
        elif isinstance(value, list | tuple):
            for item in value:
                collect(item)

    collect(raw)
    assert tensors and {t.device.type for t in tensors} == {"cpu"}
    assert raw["odt"]["env_steps"] >= 30

    resumed = resume(first.run_dir, ["run.device=cpu", "odt.online_steps=60"])
    assert load_checkpoint(resumed.run_dir)["odt"]["env_steps"] >= 60
    assert resumed.evaluation is not None and resumed.evaluation["target_1/episodes"] == 4
