"""The real CLI on the user's own env (``module:EnvId``, the example module of
docs/guides/own-env.md): one-line errors (exit 2) and a killed run with normalisation resuming to
the identical result. The same env on Ray workers, then evaluated and recorded from its
checkpoint: test_spaces_cli_on_ray.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).parents[2]

# The own-env guide's example env module (kept in sync by test_guide_env_module_is_this_one).
USER_MODULE = '''\
"""myenvs: a memory task - remember the cue shown at step 0, answer it at the last step."""
import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Recall(gym.Env):
    def __init__(self, length: int = 4):
        self.length = length
        self.observation_space = spaces.Dict({
            "cue": spaces.Discrete(3),  # 0 or 1 at the first step, 2 ("nothing") after
            "clock": spaces.Box(0.0, 1.0, (1,), np.float32),
            "note": spaces.Text(8),  # text rlformer cannot encode: filtered out in the config
        })
        self.action_space = spaces.Discrete(2)

    def _obs(self):
        cue = self.cue if self.t == 0 else 2
        return {"cue": cue, "clock": np.array([self.t / self.length], np.float32), "note": "hi"}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.cue = 0, int(self.np_random.integers(2))
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        done = self.t == self.length
        reward = float(done and action == self.cue)
        return self._obs(), reward, done, False, {"is_success": reward > 0} if done else {}


gym.register("Recall-v0", entry_point=Recall)
'''

USER_CONFIG = """\
env:
  id: myenvs:Recall-v0            # gymnasium imports myenvs, which registers Recall-v0
  kwargs: {length: 4}
  wrappers:
    - class: gymnasium.wrappers:FilterObservation
      kwargs: {filter_keys: [cue, clock]}
rollout: {backend: ray, num_workers: 2, envs_per_worker: 2, fragment_length: 16, worker_cpus: 0.5}
model:
  core: {n_layers: 1, d_model: 16, n_heads: 2, d_ff: 32, memory_length: 8}
  prev_action_reward: true
  normalize_obs: true
  normalize_reward: true
ppo: {total_steps: 128, num_minibatches: 2, update_epochs: 1}
eval: {episodes: 4}
"""


def _pythonpath(*folders: Path) -> str:
    """``folders`` first, then the caller's own PYTHONPATH (where an uninstalled checkout finds
    its dependencies and ``rlformer_envs``)."""
    inherited = os.environ.get("PYTHONPATH")
    return os.pathsep.join([*map(str, folders), *([inherited] if inherited else [])])


def rlformer(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    # The user's module is found from the working directory (as for `python -m`), on the driver
    # and, through Ray's job working directory, on the embedded Ray's workers. `tests` (for
    # tests.space_envs) is found through PYTHONPATH.
    env = {**os.environ, "PYTHONPATH": _pythonpath(REPO, cwd)}
    result = subprocess.run(
        [sys.executable, "-m", "rlformer.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"rlformer {args} failed:\n{result.stdout}\n{result.stderr}")
    return result


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            # preset=null: without the minigrid preset that auto picks, the raw Dict reaches us.
            ["env.id=MiniGrid-MemoryS11-v0", "env.imports=[minigrid]", "preset=null"],
            "observation key 'mission' is a MissionSpace space, which rlformer cannot encode",
        ),
        (["env.id=nosuchpkg_xyz:Foo-v0"], "cannot import module 'nosuchpkg_xyz'"),
        (["env.imports=[nosuchpkg_xyz]"], "env.imports entry 'nosuchpkg_xyz': cannot import"),
        (
            ["env.wrappers=[{class: nosuchpkg_xyz:Wrapper}]"],
            "env.wrappers[0] (nosuchpkg_xyz:Wrapper): cannot import module 'nosuchpkg_xyz'",
        ),
        (
            [
                "env.id=tests.space_envs:SpaceTest-v0",
                "env.kwargs.obs=box",
                "env.wrappers=[{class: tests.space_envs:AddMission}]",
            ],
            "wrapped in tests.space_envs:AddMission: observation key 'mission' is a Text space",
        ),
        (
            ["env.id=tests.space_envs:SpaceTest-v0", "env.kwargs.action=tuple"],
            "action space Tuple is not supported",
        ),
        (
            ["env.id=tests.space_envs:SpaceTest-v0", "env.kwargs.obs=image", "model.cnn=nature"],
            "smaller than the Nature CNN's 36x36: set model.cnn=impala",
        ),
    ],
    ids=["minigrid-text", "module", "imports", "wrapper", "wrapped-space", "action", "cnn"],
)
def test_env_problems_exit_2_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    sets = [item for arg in args for item in ("--set", arg)]
    root = f"run.root={tmp_path / 'runs'}"
    result = rlformer("train", "--set", root, *sets, cwd=tmp_path, check=False)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "runs").exists(), "nothing may start before the env is accepted"


def test_guide_env_module_is_this_one() -> None:
    guide = (REPO / "docs" / "guides" / "own-env.md").read_text()
    assert USER_MODULE in guide and USER_CONFIG in guide


@pytest.mark.slow
def test_killed_run_with_normalisation_resumes_to_identical_result(tmp_path: Path) -> None:
    """Composite spaces, prev action/reward and both normalisations survive a SIGKILL."""
    import signal
    import time

    from tests.cli.test_train_cli import _final_params, _metrics_without_timing, _run_dirs

    settings = [
        "env.id=tests.space_envs:SpaceTest-v0",
        "env.kwargs.obs=dict",
        "env.kwargs.action=multidiscrete",
        "rollout.envs_per_worker=4",
        "rollout.fragment_length=16",
        "model.cnn=impala",
        "model.cnn_features=8",
        "model.core.n_layers=1",
        "model.core.d_model=16",
        "model.core.n_heads=2",
        "model.core.d_ff=32",
        "model.core.memory_length=8",
        "model.prev_action_reward=true",
        "model.normalize_obs=true",
        "model.normalize_reward=true",
        "ppo.num_minibatches=2",
        "ppo.update_epochs=2",
        "ppo.total_steps=640",
        "run.checkpoint_every=2",
        "eval.episodes=0",
    ]
    sets = [item for arg in settings for item in ("--set", arg)]
    straight_root, killed_root = tmp_path / "straight", tmp_path / "killed"
    rlformer("train", "--set", f"run.root={straight_root}", *sets, cwd=tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlformer.cli", "train", "--set", f"run.root={killed_root}", *sets],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": _pythonpath(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if killed_root.exists() and list(killed_root.glob("*/checkpoints/latest")):
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    (killed_dir,) = _run_dirs(killed_root)
    rlformer("train", "--resume", str(killed_dir), cwd=tmp_path)
    (straight_dir,) = _run_dirs(straight_root)
    a, b = _final_params(straight_dir), _final_params(killed_dir)
    assert a.keys() == b.keys() and any(".norms." in key for key in a)
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert float(a["reward_norm.count"]) == 640
    assert _metrics_without_timing(straight_dir) == _metrics_without_timing(killed_dir)
