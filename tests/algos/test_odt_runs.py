"""ODT end to end: real CartPole and T-Maze envs, real HDF5 data, the real CLI (on Ray:
test_odt_runs_on_ray.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from rlformer.algos.odt.algorithm import ODT
from rlformer.config import TrainConfig, load_config
from rlformer.data.d4rl_format import write_d4rl
from rlformer.data.recorder import collect_dataset
from rlformer.data.synthetic import tmaze_walks
from rlformer.data.trajectory_buffer import TrajectoryBuffer
from rlformer.runs.checkpoints import CheckpointError, load_checkpoint
from rlformer.runs.directory import read_metrics
from rlformer.runs.loop import build_algorithm, run
from rlformer.runs.signals import Interrupted
from rlformer.runs.training import check_config, train

REPO = Path(__file__).resolve().parents[2]
TINY_DT = [
    "dt.context=4",
    "dt.batch_size=8",
    "dt.log_every=5",
    "dt.warmup_steps=10",
    "dt.core.n_layers=1",
    "dt.core.d_model=16",
    "dt.core.d_ff=32",
    "dt.core.dropout=0.0",
]


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "cartpole_random.hdf5"
    collect_dataset("random", "CartPole-v1", 1500, path, seed=0, num_envs=4, progress=False)
    return path


def _tmaze_odt(data: Path, root: Path, *extra: str) -> TrainConfig:
    return load_config(
        None,
        [
            "algo=odt",
            "env.id=rlformer/TMaze-v0",
            "env.kwargs.length=4",
            f"dt.dataset={data}",
            *TINY_DT,
            "dt.target_returns=[1]",
            "odt.pretrain_steps=10",
            "odt.online_steps=60",
            "odt.updates_per_iteration=4",
            "odt.replay_size=30",
            "rollout.num_workers=2",
            "rollout.envs_per_worker=2",
            "rollout.worker_cpus=0.5",
            "eval.episodes=0",
            f"run.root={root}",
            "run.progress=false",
            *extra,
        ],
    )


def _played(
    backend: str, walks: Path, root: Path
) -> tuple[list, list[int], dict[str, torch.Tensor]]:
    algo = build_algorithm(_tmaze_odt(walks, root, f"rollout.backend={backend}"))
    algo.start()
    try:
        while not algo.online:
            algo.iterate()
        for _ in range(3):
            algo.iterate()
        return algo.buffer.episodes, algo.buffer.sources, algo.model.state_dict()
    finally:
        algo.close()


def test_evaluation_samples_actions_when_asked(cartpole: Path, tmp_path: Path) -> None:
    """eval.deterministic: false plays the stochastic DT's samples, seeded by the evaluation."""

    def odt(deterministic: bool) -> ODT:
        return build_algorithm(
            load_config(
                None,
                [
                    "algo=odt",
                    "env.id=CartPole-v1",
                    f"dt.dataset={cartpole}",
                    *TINY_DT,
                    "dt.target_returns=[100]",
                    f"eval.deterministic={str(deterministic).lower()}",
                    f"run.root={tmp_path}",
                    "run.progress=false",
                ],
            )
        )

    sampled = odt(deterministic=False)
    scores = sampled.evaluate(4, seed=7).metrics
    assert sampled.evaluate(4, seed=7).metrics == scores
    assert odt(deterministic=True).evaluate(4, seed=7).metrics != scores


def test_rollouts_sample_and_are_relabelled(walks: Path, tmp_path: Path) -> None:
    """Online episodes join the buffer with actions sampled from the policy; the windows
    trained on carry the returns they achieved, not the exploration target."""
    algo = build_algorithm(_tmaze_odt(walks, tmp_path, "odt.exploration_return=5"))
    algo.start()
    try:
        while not algo.online:
            algo.iterate()
        metrics = algo.iterate()
    finally:
        algo.close()
    online = [e for e, s in zip(algo.buffer.episodes, algo.buffer.sources, strict=True) if s < 0]
    assert len(online) == 4 == metrics["rollout/episodes"]  # 2 workers x 2 envs
    assert metrics["rollout/target_return"] == 5.0
    assert sum(len(e) for e in online) == algo.env_steps == metrics["rollout/env_steps"]
    assert all(e.episode_return in (0.0, 1.0) for e in online)  # T-Maze pays 0 or 1, never 5
    from rlformer.data.episodes import Dataset
    from rlformer.data.sampling import WindowSampler

    sampler = WindowSampler(Dataset(online, "online"), 4, 1.0, discrete_actions=True)
    first = next(iter(sampler.episode_windows(0)))
    assert first.returns_to_go[0, 0, 0].item() == online[0].episode_return


@pytest.fixture(scope="module")
def pendulum(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "pendulum_random.hdf5"
    collect_dataset("random", "Pendulum-v1", 800, path, seed=0, num_envs=4, progress=False)
    return path


def _dt_run(env: list[str], data: Path, root: Path) -> Path:
    settings = ["algo=dt", *env, f"dt.dataset={data}", *TINY_DT, "dt.train_steps=10"]
    settings += ["eval.episodes=0", f"run.root={root}", "run.progress=false"]
    return train(load_config(None, settings)).run_dir


def test_fine_tunes_a_dt_checkpoint_and_refuses_a_mismatched_one(
    walks: Path, tmp_path: Path
) -> None:
    env = ["env.id=rlformer/TMaze-v0", "env.kwargs.length=4"]
    dt_run = _dt_run(env, walks, tmp_path / "dt")
    dt_weights = load_checkpoint(dt_run)["model"]
    algo = build_algorithm(_tmaze_odt(walks, tmp_path, f"odt.init_from={dt_run}"))
    assert algo.online, "a fine-tuned checkpoint skips pretraining"
    weights = algo.model.state_dict()
    assert weights.keys() == dt_weights.keys()  # discrete: the logits already are a policy
    for key, value in dt_weights.items():
        assert torch.equal(weights[key].cpu(), value), key  # the model is on run.device
    with pytest.raises(CheckpointError, match="dt.context is 4 there and 6 here"):
        build_algorithm(_tmaze_odt(walks, tmp_path, f"odt.init_from={dt_run}", "dt.context=6"))
    # `rlformer train --dry-run` reads the checkpoint too, with the same checks.
    assert check_config(_tmaze_odt(walks, tmp_path, f"odt.init_from={dt_run}")).endswith(
        f"fine-tunes {dt_run}"
    )
    with pytest.raises(CheckpointError, match="dt.context is 4 there and 6 here"):
        check_config(_tmaze_odt(walks, tmp_path, f"odt.init_from={dt_run}", "dt.context=6"))
    with pytest.raises(CheckpointError, match="not found"):
        check_config(_tmaze_odt(walks, tmp_path, f"odt.init_from={tmp_path / 'nowhere'}"))


def test_continuous_dt_gains_a_fresh_spread_head(
    pendulum: Path, walks: Path, tmp_path: Path
) -> None:
    dt_run = _dt_run(["env.id=Pendulum-v1"], pendulum, tmp_path / "dt")
    dt_weights = load_checkpoint(dt_run)["model"]
    cfg = load_config(
        None,
        ["algo=odt", "env.id=Pendulum-v1", f"dt.dataset={pendulum}", *TINY_DT]
        + [f"odt.init_from={dt_run}", f"run.root={tmp_path}"],
    )
    algo = build_algorithm(cfg)
    weights = algo.model.state_dict()
    assert set(weights) - set(dt_weights) == {"predict_log_std.weight", "predict_log_std.bias"}
    for key, value in dt_weights.items():
        assert torch.equal(weights[key].cpu(), value), key  # the model is on run.device
    # The deterministic action is unchanged: tanh of the Gaussian's mean is the DT's output.
    batch = algo.sampler.sample(4, np.random.default_rng(0))
    args = (batch.states, batch.actions, batch.returns_to_go, batch.timesteps, batch.mask)
    model = algo.model.cpu().eval()
    plain = model.__class__(3, 1, False, model.core.cfg, model.max_timestep)
    plain.load_state_dict(dt_weights)
    plain.eval()
    with torch.no_grad():
        assert torch.allclose(model(*args).action_preds, plain(*args).action_preds)
    with pytest.raises(CheckpointError, match="other observation or action spaces"):
        build_algorithm(_tmaze_odt(walks, tmp_path, f"odt.init_from={dt_run}"))


def test_resumes_after_its_init_from_checkpoint_is_gone(
    walks: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resumed fine-tuning run takes weights and state normalisation from its own checkpoint:
    it needs no ``odt.init_from`` file any more, and ends where an uninterrupted run ends."""
    other = tmp_path / "other_walks.hdf5"  # other data, so other state statistics
    write_d4rl(other, tmaze_walks(4, 9, seed=7, p_correct=0.5), {"env_id": "rlformer/TMaze-v0"})
    dt_run = _dt_run(["env.id=rlformer/TMaze-v0", "env.kwargs.length=4"], other, tmp_path / "dt")
    dt_stats = load_checkpoint(dt_run)["normalization"]["state_mean"]
    extra = [f"odt.init_from={dt_run}", "rollout.backend=local", "run.checkpoint_every=1"]
    straight = run(_tmaze_odt(walks, tmp_path / "straight", *extra))
    stopped_cfg = _tmaze_odt(walks, tmp_path / "stopped", *extra)

    play = ODT.iterate

    def interrupted_after_two(self: ODT) -> dict[str, float]:
        metrics = play(self)
        if self.iteration == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return metrics

    monkeypatch.setattr(ODT, "iterate", interrupted_after_two)
    with pytest.raises(Interrupted) as stopped:
        run(stopped_cfg)
    monkeypatch.undo()
    shutil.rmtree(dt_run)
    resumed = run(stopped_cfg, resume_dir=stopped.value.run_dir)

    own_stats = load_checkpoint(resumed.run_dir)["normalization"]["state_mean"]
    assert torch.equal(own_stats, dt_stats)
    dataset_mean = ODT(_tmaze_odt(walks, tmp_path, "odt.init_from=null"), torch.device("cpu"))
    assert not torch.equal(dataset_mean.normalization["state_mean"], dt_stats), "weak test data"
    a, b = _final(straight.run_dir), _final(resumed.run_dir)
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert _rows(straight.run_dir) == _rows(resumed.run_dir)


def test_pretraining_only_then_resumed_online_equals_one_run(walks: Path, tmp_path: Path) -> None:
    """``odt.online_steps=0`` stops after pretraining; resuming that run with online steps
    continues the same optimiser, temperature and RNG streams as a run that did both at once."""
    # Dropout draws from torch's RNG, so a stray draw anywhere would show in the weights.
    extra = ["rollout.backend=local", "run.checkpoint_every=1", "dt.core.dropout=0.1"]
    straight = run(_tmaze_odt(walks, tmp_path / "straight", *extra))
    pretrained = run(_tmaze_odt(walks, tmp_path / "staged", *extra, "odt.online_steps=0"))
    saved = load_checkpoint(pretrained.run_dir)
    assert saved["learner"]["step"] == 10 and saved["odt"]["env_steps"] == 0
    assert not any("rollout/env_steps" in row for row in read_metrics(pretrained.run_dir))
    resumed = run(_tmaze_odt(walks, tmp_path / "staged", *extra), resume_dir=pretrained.run_dir)
    a, b = _final(straight.run_dir), _final(resumed.run_dir)
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert _rows(straight.run_dir) == _rows(resumed.run_dir)


def test_buffer_size_may_change_until_the_run_goes_online(walks: Path, tmp_path: Path) -> None:
    """A pretrained run resumed online fills the buffer size it is resumed with; once online
    trajectories are in, another size is refused with the setting to use, and nothing is lost."""
    extra = ["rollout.backend=local", "run.checkpoint_every=1"]
    pretrained = run(_tmaze_odt(walks, tmp_path, *extra, "odt.online_steps=0"))
    online = run(
        _tmaze_odt(walks, tmp_path, *extra, "odt.replay_size=35"), resume_dir=pretrained.run_dir
    )
    state = load_checkpoint(online.run_dir)["odt"]["buffer"]
    added = state["added"]
    assert 0 < added < 35
    expected = TrajectoryBuffer(35, build_algorithm(_tmaze_odt(walks, tmp_path)).dataset.episodes)
    expected.add(expected.episodes[:added])  # any trajectories: only the slots' order matters
    assert [s for s in state["sources"] if s >= 0] == [s for s in expected.sources if s >= 0]

    newest = sorted((online.run_dir / "checkpoints").glob("ckpt_*.pt"))[-1].read_bytes()
    with pytest.raises(CheckpointError, match="--set odt.replay_size=35"):
        run(
            _tmaze_odt(walks, tmp_path, *extra, "odt.replay_size=30", "odt.online_steps=120"),
            resume_dir=online.run_dir,
        )
    assert sorted((online.run_dir / "checkpoints").glob("ckpt_*.pt"))[-1].read_bytes() == newest


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "rlformer.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"rlformer {args}:\n{result.stdout}\n{result.stderr}"
    return result


def _cartpole_args(data: Path, root: Path) -> list[str]:
    settings = [
        f"dt.dataset={data}",
        *TINY_DT,
        "odt.pretrain_steps=10",
        "odt.online_steps=400",
        "odt.updates_per_iteration=3",
        "rollout.envs_per_worker=2",
        "eval.episodes=3",
        "run.checkpoint_every=2",
        f"run.root={root}",
    ]
    return [str(REPO / "configs/odt_cartpole.yaml"), *(a for s in settings for a in ("--set", s))]


def _final(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(run_dir)["model"]


def _rows(run_dir: Path) -> list[dict[str, float]]:
    return [
        {k: v for k, v in row.items() if not k.startswith("time/")} for row in read_metrics(run_dir)
    ]


@pytest.mark.slow
def test_killed_odt_run_resumes_identically_and_evaluates(cartpole: Path, tmp_path: Path) -> None:
    straight_root, killed_root = tmp_path / "straight", tmp_path / "killed"
    _cli("train", *_cartpole_args(cartpole, straight_root), cwd=tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlformer.cli", "train", *_cartpole_args(cartpole, killed_root)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        # Kill after the first online checkpoint, so the buffer and workers must be restored.
        checkpoints = list(killed_root.glob("*/checkpoints/*.pt")) if killed_root.exists() else []
        if any(int(p.stem.removeprefix("ckpt_")) > 10 for p in checkpoints):
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    (killed_dir,) = killed_root.iterdir()
    _cli("train", "--resume", str(killed_dir), cwd=tmp_path)

    (straight_dir,) = straight_root.iterdir()
    a, b = _final(straight_dir), _final(killed_dir)
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert _rows(straight_dir) == _rows(killed_dir)
    assert load_checkpoint(killed_dir)["odt"]["env_steps"] >= 400

    # An ODT checkpoint evaluates like a DT one: a sweep of target returns.
    _cli(
        "eval",
        str(killed_dir),
        "--target-return",
        "100:300:3",
        "--episodes",
        "2",
        "--json",
        str(tmp_path / "sweep.json"),
        cwd=tmp_path,
    )
    reports = json.loads((tmp_path / "sweep.json").read_text())["reports"]
    assert sorted(r["target_return"] for r in reports) == [100.0, 200.0, 300.0]


def test_memory_dt_trains_online(walks: Path, tmp_path: Path) -> None:
    """dt.memory_segments > 0: rollouts carry memory across K-step windows, and the buffer is
    trained on consecutive windows, as offline."""
    cfg = _tmaze_odt(walks, tmp_path, "dt.memory_segments=2", "dt.context=3", "odt.online_steps=30")
    algo = build_algorithm(cfg)
    windows = algo.sample_windows(algo.sampler)
    assert isinstance(windows, list) and len(windows) == 2
    assert algo.policy().carry_memory
    algo.start()
    try:
        while not algo.finished():
            metrics = algo.iterate()
    finally:
        algo.close()
    assert algo.env_steps >= 30 and np.isfinite(metrics["loss/action"])
    assert sum(s < 0 for s in algo.buffer.sources) == metrics["rollout/episodes"] * 2
