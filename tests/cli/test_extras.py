"""The core install trains and evaluates; what needs an extra says which, in one line.

The CLI runs in a process where the extras' modules (onnx, onnxruntime, onnxscript, Ray
Serve, minari, sb3_contrib) cannot be found, as in an install without them: every finder of
``sys.meta_path`` is wrapped to answer "not found" for them, so ``importlib.util.find_spec``
and ``import`` both fail as they would.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.serve.test_serve_http import APPS, _checkpoint

WITHOUT_EXTRAS = """
import sys

BLOCKED = ("onnx", "onnxruntime", "onnxscript", "minari", "sb3_contrib", "ray.serve")


class Hiding:
    def __init__(self, inner):
        self.inner = inner

    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            return None
        find = getattr(self.inner, "find_spec", None)
        return None if find is None else find(name, path, target)

    def __getattr__(self, attr):
        return getattr(self.inner, attr)


sys.meta_path[:] = [Hiding(finder) for finder in sys.meta_path]
from rlformer.cli import main

sys.argv = ["rlformer", *sys.argv[1:]]
main()
"""


def without_extras(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "without_extras.py"
    script.write_text(WITHOUT_EXTRAS)
    return subprocess.run(
        [sys.executable, str(script), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def one_line_naming(result: subprocess.CompletedProcess[str], extra: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"pip install 'rlformer[{extra}]'" in lines[0], lines[0]


@pytest.mark.slow
def test_train_and_eval_work_and_export_and_serve_name_their_extras(tmp_path: Path) -> None:
    settings = [
        "env.id=rlformer/TMaze-v0",
        "env.kwargs.length=3",
        "ppo.total_steps=256",
        "run.root=runs",
        "eval.episodes=2",
        "run.progress=false",
    ]
    trained = without_extras(tmp_path, "train", *(x for s in settings for x in ("--set", s)))
    assert trained.returncode == 0, trained.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    evaluated = without_extras(tmp_path, "eval", str(run_dir), "--episodes", "2")
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    one_line_naming(without_extras(tmp_path, "export", str(run_dir), "--out", "exported"), "export")
    assert not (tmp_path / "exported").exists()
    one_line_naming(without_extras(tmp_path, "serve", str(run_dir)), "serve")


def test_an_export_directory_names_the_export_extra(tmp_path: Path) -> None:
    from rlformer.export.writer import export_policy
    from rlformer.policies import load_policy

    export_policy(load_policy(_checkpoint(tmp_path, "lstm", APPS["lstm"][0])), tmp_path / "ex")
    one_line_naming(without_extras(tmp_path, "eval", "ex", "--episodes", "1"), "export")


def test_minari_datasets_and_sb3_contrib_models_name_their_extras(tmp_path: Path) -> None:
    import os

    from sb3_contrib import RecurrentPPO

    (tmp_path / "minari" / "some" / "data-v0" / "data").mkdir(parents=True)
    env = {**os.environ, "MINARI_DATASETS_PATH": str(tmp_path / "minari")}
    info = without_extras(tmp_path, "dataset", "info", "minari:some/data-v0", env=env)
    one_line_naming(info, "minari")
    RecurrentPPO("MlpLstmPolicy", "CartPole-v1", n_steps=8, device="cpu").save(tmp_path / "rppo")
    evaluated = without_extras(tmp_path, "eval", f"sb3:{tmp_path / 'rppo.zip'}", "--episodes", "1")
    one_line_naming(evaluated, "peers")
