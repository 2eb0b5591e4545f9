"""What a run takes from the task and from the defaults, without the user naming it: the image
encoder from each image's size, reward scaling by the measured default, and the dry run that
says which and why. Checked on tasks outside the suites the defaults were chosen on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rlformer.algos.ppo.algorithm import build_model
from rlformer.config import build_config, dump_config, load_config, load_saved_config
from rlformer.config.sections.model import ModelConfig

MINIGRID_IMAGES = [  # MiniGrid's 7x7x3 symbolic view as an image, without the one-hot preset
    "env.id=MiniGrid-Empty-5x5-v0",
    "env.imports=[minigrid]",
    "preset=null",
    "env.wrappers=[{class: 'minigrid.wrappers:ImgObsWrapper'}]",
]


def test_reward_scaling_defaults_to_return_std_and_follows_normalize_reward_set_alone() -> None:
    assert (ModelConfig().value_scaling, ModelConfig().normalize_reward) == ("return_std", True)
    alone = ModelConfig(normalize_reward=False)
    assert (alone.value_scaling, alone.normalize_reward) == ("none", False)
    both = ModelConfig(normalize_reward=False, value_scaling="popart")
    assert (both.value_scaling, both.normalize_reward) == ("popart", False)


def test_a_config_saved_before_value_scaling_existed_keeps_its_reward_setting() -> None:
    """Run configs dumped by earlier versions hold value_scaling null (or no key at all)."""
    for model in ({"normalize_reward": False, "value_scaling": None}, {"normalize_reward": False}):
        cfg = build_config({"env": {"id": "CartPole-v1"}, "model": model})
        assert cfg.model.normalize_reward is False
        assert cfg.model.value_scaling in (None, "none")
    saved = build_config({"model": {"normalize_reward": True, "value_scaling": None}})
    assert (saved.model.value_scaling, saved.model.normalize_reward) == (None, True)


def test_a_small_image_gets_minatars_convolution_and_a_large_one_natures() -> None:
    small = build_model(load_config(None, MINIGRID_IMAGES))
    (line,) = small.encoder.choices
    assert line.startswith("model.cnn: minatar for the observation, a 7x7 image")
    assert small.encoder.out_dim == 128  # MinAtar's dense layer, as cnn_features is unset
    large = build_model(load_config(None, ["env.id=CarRacing-v3", "preset=null"]))
    assert large.encoder.choices == [
        "model.cnn: nature for the observation, a 96x96 image (Nature-DQN's CNN from 36x36)"
    ]
    named = build_model(load_config(None, [*MINIGRID_IMAGES, "model.cnn=impala"]))
    assert named.encoder.choices == []  # named by the config: nothing to explain


@pytest.mark.parametrize(
    "items",
    [
        MINIGRID_IMAGES,  # 7x7: MinAtar's convolution with its own width
        ["env.id=CarRacing-v3", "preset=null"],  # 96x96: Nature-DQN's CNN
        ["env.id=popgym-RepeatPreviousEasy-v0", "env.imports=[popgym]"],  # a family preset
        [*MINIGRID_IMAGES, "model.cnn_features=32"],  # a width the user set
    ],
    ids=["small-image", "large-image", "preset", "set-width"],
)
def test_a_saved_config_rebuilds_the_network_the_run_built(
    tmp_path: Path, items: list[str]
) -> None:
    """What the run chose from the task (encoder, widths, preset) must come back from its saved
    config alone, or resume, evaluation and export meet weights of another shape."""
    cfg = load_config(None, items)
    saved = tmp_path / "config.yaml"
    saved.write_text(dump_config(cfg))
    built, rebuilt = build_model(cfg), build_model(load_saved_config(saved))
    shapes = {k: tuple(v.shape) for k, v in built.state_dict().items()}
    assert shapes == {k: tuple(v.shape) for k, v in rebuilt.state_dict().items()}


@pytest.mark.slow
def test_the_dry_run_says_each_choice_and_a_small_image_task_trains(tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "rlformer.cli", "train"]
    sets = [arg for item in MINIGRID_IMAGES for arg in ("--set", item)]
    dry = subprocess.run(
        [*cli, "--dry-run", *sets], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert "preset: none (set to null)" in lines
    assert any(x.startswith("model.value_scaling: return_std: rewards divided by") for x in lines)
    assert any(x.startswith("model.cnn: minatar for the observation, a 7x7 image") for x in lines)
    short = ["--set", "ppo.total_steps=1024", "--set", "eval.episodes=2", "--set", "run.root=r"]
    run = subprocess.run(
        [*cli, *sets, *short], capture_output=True, text=True, timeout=600, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr[-2000:]
    (run_dir,) = (tmp_path / "r").iterdir()
    assert (run_dir / "eval.json").exists()
    # The saved config must rebuild the network the auto choices built: resume, then evaluate.
    more = ["--resume", str(run_dir), "--set", "ppo.total_steps=2048"]
    resumed = subprocess.run(
        [*cli, *more], capture_output=True, text=True, timeout=600, cwd=tmp_path
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["model"]["cnn_features"] is None
    evaluate = [sys.executable, "-m", "rlformer.cli", "eval", str(run_dir), "--episodes", "2"]
    scored = subprocess.run(evaluate, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert scored.returncode == 0, scored.stderr[-2000:]
