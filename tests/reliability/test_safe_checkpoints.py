"""Loading a checkpoint never runs code: crafted pickles are refused, old formats need trust."""

from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlformer.algos.ppo.algorithm import load_agent
from rlformer.config import load_config
from rlformer.export.space_codec import SpaceCodecError, space_from_data, space_to_data
from rlformer.networks.actor_critic import ActorCritic
from rlformer.runs.checkpoints import (
    CheckpointError,
    UnsafeCheckpointError,
    load_checkpoint,
    read_checkpoint_file,
    seal_state,
    unseal_state,
)
from rlformer.runs.training import resume, train
from tests.reliability.tiny import tiny_config


def rlformer_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlformer.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


class Payload:
    """Unpickling this runs a shell command that creates ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # noqa: ANN204 - pickle protocol
        return (os.system, (f"touch {self.marker}",))


def test_crafted_checkpoint_is_refused_in_one_line_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    zipped, raw = tmp_path / "evil.pt", tmp_path / "evil_raw.pt"
    torch.save({"format": 2, "kind": "ppo", "model": Payload(marker)}, zipped)
    raw.write_bytes(pickle.dumps({"format": 2, "config": Payload(marker)}))
    for path in (zipped, raw):
        for command in (["eval", str(path)], ["collect", "--policy", str(path), "--steps", "8"]):
            result = rlformer_cli(*command, cwd=tmp_path)
            assert result.returncode == 2, result.stderr
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
            assert "Traceback" not in result.stderr
    assert "refused" in rlformer_cli("eval", str(zipped), cwd=tmp_path).stderr
    assert "posix.system" in rlformer_cli("eval", str(zipped), cwd=tmp_path).stderr
    assert not marker.exists(), "loading the checkpoint executed its payload"
    # The same refusal in-process, for every loader.
    with pytest.raises(UnsafeCheckpointError):
        load_agent(zipped)
    with pytest.raises(CheckpointError):
        read_checkpoint_file(raw)
    assert not marker.exists()


def _format1_checkpoint(path: Path) -> ActorCritic:
    """A checkpoint as rlformer wrote them before format 2: spaces pickled as objects."""
    cfg = load_config(None, ["env.id=CartPole-v1", "model.torso=mlp"])
    env = gym.make("CartPole-v1")
    model = ActorCritic(env.observation_space, env.action_space, cfg.model)
    torch.save(
        {
            "format": 1,
            "kind": "ppo",
            "config": cfg.model_dump(mode="json"),
            "spec": {"observation_space": env.observation_space, "action_space": env.action_space},
            "model": model.state_dict(),
        },
        path,
    )
    return model


def test_previous_format_needs_trust_then_loads(tmp_path: Path) -> None:
    path = tmp_path / "old.pt"
    original = _format1_checkpoint(path)
    refused = rlformer_cli("eval", str(path), "--episodes", "2", cwd=tmp_path)
    assert refused.returncode == 2
    assert "gymnasium.spaces" in refused.stderr and "--trust-checkpoint" in refused.stderr
    trusted = rlformer_cli("eval", str(path), "--episodes", "2", "--trust-checkpoint", cwd=tmp_path)
    assert trusted.returncode == 0, trusted.stderr
    assert "CartPole-v1" in trusted.stdout
    model, _, _ = load_agent(path, trust=True)
    for key, value in original.state_dict().items():
        assert torch.equal(model.state_dict()[key], value)


@pytest.mark.parametrize(
    "space",
    [
        gym.spaces.Box(-1.0, 2.0, (3,), np.float32),
        gym.spaces.Box(0, 255, (8, 8, 3), np.uint8),
        gym.spaces.Box(np.array([-1.0, -np.inf]), np.array([1.0, np.inf]), dtype=np.float64),
        gym.spaces.Discrete(5, start=-2),
        gym.spaces.MultiDiscrete([3, 4, 2]),
        gym.spaces.MultiBinary(6),
        gym.spaces.MultiBinary([2, 3]),
        gym.spaces.Dict(
            {
                "image": gym.spaces.Box(0, 255, (4, 4, 3), np.uint8),
                "inner": gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.MultiBinary(3)]),
            }
        ),
    ],
    ids=lambda s: type(s).__name__,
)
def test_spaces_round_trip_through_weights_only_files(space: gym.Space, tmp_path: Path) -> None:
    buffer = io.BytesIO()
    torch.save({"space": space_to_data(space)}, buffer)
    buffer.seek(0)
    restored = space_from_data(torch.load(buffer, weights_only=True)["space"])
    assert restored == space
    assert restored.dtype == space.dtype


@pytest.mark.parametrize(
    "data",
    [
        None,
        {"type": "Box"},
        {"type": "Nope"},
        {"type": "Box", "low": [0], "high": [1], "dtype": "f"},
        {"type": "Box", "low": torch.zeros(2), "high": torch.zeros(3), "dtype": "float32"},
        {"type": "Box", "low": torch.zeros(2), "high": torch.zeros(2), "dtype": "object"},
    ],
)
def test_malformed_space_data_is_a_clear_error(data: object) -> None:
    with pytest.raises(SpaceCodecError):
        space_from_data(data)


def test_env_states_unpickle_only_for_their_owner_or_with_trust(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sealed = seal_state([b"state"])
    assert unseal_state(sealed, "x") == [b"state"]
    tampered = {"blobs": [pickle.dumps(Payload(tmp_path / "PWNED"))], "mac": sealed["mac"]}
    with pytest.raises(UnsafeCheckpointError, match="not written by this user"):
        unseal_state(tampered, "x")

    # A run written by "another user" (another key) resumes only with trust.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "alice"))
    cfg = tiny_config(tmp_path / "runs", "ppo.total_steps=128", "run.checkpoint_every=1")
    result = train(cfg)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "bob"))
    with pytest.raises(UnsafeCheckpointError, match="--trust-checkpoint"):
        resume(result.run_dir, ["ppo.total_steps=192"])
    # A refused resume records nothing: config.yaml still describes the run as it was.
    assert load_config(result.run_dir / "config.yaml").ppo.total_steps == 128
    resumed = resume(result.run_dir, ["ppo.total_steps=192"], trust=True)
    assert resumed.iterations == 3
    assert not (tmp_path / "PWNED").exists()


def test_payload_of_a_run_dir_is_tensors_and_data_only(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path, "ppo.total_steps=64")
    run_dir = train(cfg).run_dir
    payload = load_checkpoint(run_dir)  # weights_only: would raise on any pickled object
    assert payload["format"] == 2 and payload["kind"] == "ppo"
    assert payload["spec"]["observation_space"]["type"] == "Box"
    assert isinstance(payload["collector"]["blobs"][0], bytes)


def test_crafted_stable_baselines3_zip_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    import base64
    import json
    import zipfile

    from stable_baselines3 import PPO

    PPO("MlpPolicy", "CartPole-v1", n_steps=64, device="cpu").save(tmp_path / "good.zip")
    marker = tmp_path / "PWNED"
    evil = tmp_path / "evil.zip"
    with zipfile.ZipFile(tmp_path / "good.zip") as src, zipfile.ZipFile(evil, "w") as dst:
        for item in src.infolist():
            payload = src.read(item.filename)
            if item.filename == "data":
                data = json.loads(payload)
                blob = base64.b64encode(pickle.dumps(Payload(marker))).decode()
                data["lr_schedule"][":serialized:"] = blob
                payload = json.dumps(data).encode()
            dst.writestr(item, payload)
    for command in (
        ["eval", f"sb3:{evil}", "--env", "CartPole-v1", "--episodes", "1"],
        ["collect", "--policy", f"sb3:{evil}", "--steps", "8", "--out", str(tmp_path / "d.h5")],
    ):
        result = rlformer_cli(*command, cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert "entry 'lr_schedule' needs unpickling" in result.stderr
        assert "refused global posix.system" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    assert not marker.exists(), "loading the SB3 zip executed its payload"
    good = rlformer_cli(
        "eval",
        f"sb3:{tmp_path / 'good.zip'}",
        "--env",
        "CartPole-v1",
        "--episodes",
        "1",
        cwd=tmp_path,
    )
    assert good.returncode == 0, good.stderr
