"""The note for a small PPO model that ``run.device: auto`` put on a GPU.

The hint reads only the device object and the model, so these run without CUDA.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rlformer.algos.ppo.algorithm import build_model, cpu_learner_hint
from rlformer.config import load_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
CUDA = torch.device("cuda")


@pytest.mark.parametrize(
    ("config", "overrides", "device", "expected"),
    [
        # The measured case: an 87k-parameter GTrXL without an image encoder, device auto.
        ("ppo_gtrxl_cartpole_novel.yaml", [], CUDA, "87,299 parameters"),
        ("ppo_gtrxl_cartpole_novel.yaml", [], torch.device("cpu"), None),
        # An explicit choice of cuda is the user's.
        ("ppo_gtrxl_cartpole_novel.yaml", ["run.device=cuda"], CUDA, None),
        # MiniGrid's 150k-parameter model ran at the same speed on both devices.
        ("memory/minigrid_memory_s11.yaml", [], CUDA, None),
    ],
)
def test_hint_only_for_small_models_without_images_on_auto(
    config: str, overrides: list[str], device: torch.device, expected: str | None
) -> None:
    cfg = load_config(CONFIGS / config, overrides)
    hint = cpu_learner_hint(cfg, device, build_model(cfg))
    if expected is None:
        assert hint is None
    else:
        assert hint is not None and expected in hint and "run.device=cpu" in hint


def test_no_hint_for_a_model_with_convolutions() -> None:
    """Image encoders were not measured on a GPU, so they get no claim however small."""
    cfg = load_config(CONFIGS / "ppo_gtrxl_cartpole_novel.yaml", [])
    tiny_cnn = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten())
    tiny_mlp = torch.nn.Sequential(torch.nn.Linear(3, 4))
    assert cpu_learner_hint(cfg, CUDA, tiny_cnn) is None  # type: ignore[arg-type]
    assert cpu_learner_hint(cfg, CUDA, tiny_mlp) is not None  # type: ignore[arg-type]
