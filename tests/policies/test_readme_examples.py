"""The README's "Use a trained policy elsewhere" examples run as written: its Python blocks in
order in one namespace, its shell blocks through the real CLI with ``$RUN`` set to the run the
first block trains."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SECTION = "## Use a trained policy elsewhere"


def readme_blocks() -> list[tuple[str, str]]:
    """(language, code) of every fenced block in the section, in order."""
    text = (REPO / "README.md").read_text()
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    return re.findall(r"```(python|bash)\n(.*?)```", text[start:end], flags=re.S)


@pytest.mark.slow
def test_readme_policy_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = readme_blocks()
    assert [lang for lang, _ in blocks].count("python") >= 4 and ("bash" in dict(blocks))
    monkeypatch.chdir(tmp_path)
    shutil.copy(REPO / "rlformer" / "policies" / "onnx_runner.py", tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    namespace: dict[str, object] = {}
    for lang, code in blocks:
        if lang == "python":
            exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102
            continue
        env = {
            **os.environ,
            "RUN": str(namespace["run"]),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        }
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", code],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr
    assert 0.0 <= namespace["mean_return"] <= 1.0
    assert namespace["actions"].shape == (1,)
    assert Path(namespace["masked"]).is_dir()
