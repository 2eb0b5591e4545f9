"""The inputs the fuzz tests found crashing, each pinned as a plain regression test."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from rlformer.config import ConfigError, load_config
from rlformer.data import DatasetError, load_dataset
from rlformer.rollout.env_factory import EnvError, make_env
from rlformer.runs.checkpoints import CheckpointError, read_checkpoint_file


@pytest.mark.parametrize("value", ["2001-13-45", "2024-02-30"])
def test_date_that_is_no_date_is_a_config_error(tmp_path: Path, value: str) -> None:
    # PyYAML builds datetime.date for date-like scalars and lets datetime's ValueError escape.
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(None, [f"run.name={value}"])
    path = tmp_path / "c.yaml"
    path.write_text(f"run: {{name: {value}}}\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)


def test_binary_config_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(b"\xff\xfe\x00run")
    with pytest.raises(ConfigError, match="not a text file"):
        load_config(path)


@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [("CartPole-v1", {"render_mode": 0}), ("rlformer/TMaze-v0", {"length": -3})],
)
def test_env_constructor_errors_are_env_errors(env_id: str, kwargs: dict) -> None:
    # gymnasium raises AttributeError for a non-string render_mode, TMaze a ValueError.
    with pytest.raises(EnvError, match="could not be built with env.kwargs"):
        make_env(env_id, kwargs)


def _d4rl(path: Path, **replace: object) -> Path:
    n = 5
    arrays: dict[str, object] = {
        "observations": np.zeros((n, 2), np.float32),
        "actions": np.zeros((n, 1), np.float32),
        "rewards": np.ones(n, np.float32),
        "terminals": np.eye(n, dtype=bool)[2],
    }
    arrays.update(replace)
    with h5py.File(path, "w") as handle:
        for key, value in arrays.items():
            if isinstance(value, str):  # "group"
                handle.create_group(key)
            else:
                handle[key] = value
        handle.attrs["env_id"] = np.bytes_(b"\xff\xfe")  # not UTF-8
    return path


@pytest.mark.parametrize(
    ("replace", "message"),
    [
        ({"observations": "group"}, "'observations' is a group without arrays"),
        ({"rewards": h5py.Empty("f4")}, "'rewards' is empty"),
        ({"observations": np.zeros((5, 0), np.float32)}, "no values per transition"),
    ],
)
def test_damaged_d4rl_files_are_dataset_errors(tmp_path: Path, replace: dict, message: str) -> None:
    with pytest.raises(DatasetError, match=message):
        load_dataset(f"d4rl:{_d4rl(tmp_path / 'd.hdf5', **replace)}")


def test_attribute_that_is_not_utf8_still_loads(tmp_path: Path) -> None:
    data = load_dataset(f"d4rl:{_d4rl(tmp_path / 'd.hdf5')}")
    assert data.num_transitions == 5 and "\ufffd" in data.env_id


def test_non_numeric_format_entry_is_a_checkpoint_error(tmp_path: Path) -> None:
    path = tmp_path / "ckpt_000000001.pt"
    torch.save({"format": torch.tensor([2, 2])}, path)  # comparing it to 2 used to raise
    with pytest.raises(CheckpointError, match="'format' is not a number"):
        read_checkpoint_file(path)


def test_eval_refuses_checkpoints_with_nan_weights(tmp_path: Path) -> None:
    from rlformer.algos.ppo.algorithm import build_model
    from rlformer.policies import load_policy
    from rlformer.runs.checkpoints import encode_spec, save_checkpoint

    cfg = load_config(None, ["model.torso=mlp", "model.mlp_hidden=[4]"])
    model = build_model(cfg)
    weights = model.state_dict()
    weights[next(iter(weights))] = torch.full_like(weights[next(iter(weights))], float("nan"))
    payload = {
        "kind": "ppo",
        "config": cfg.model_dump(mode="json"),
        "spec": encode_spec(model.observation_space, model.action_space),
        "model": weights,
    }
    path = save_checkpoint(tmp_path, 1, payload)
    # Sampling actions from NaN logits used to crash mid-evaluation with a RuntimeError.
    with pytest.raises(CheckpointError, match="NaN or inf"):
        load_policy(path)
