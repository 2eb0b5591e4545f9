"""The README's Python examples run as written: its ```python blocks in order, in one namespace,
in a fresh working directory. (The guides' examples: tests/docs/test_guide_examples.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[2]


def readme_python_blocks() -> list[str]:
    """The code of every ```python block of the README, in order."""
    return re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)


@pytest.mark.slow
def test_readme_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = readme_python_blocks()
    assert blocks, "the README has no Python example"
    torch.set_num_threads(1)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    for code in blocks:
        exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102
    # the example trains a run and acts with it in a loop of its own
    assert Path(namespace["run"]).is_dir()
    assert isinstance(namespace["actions"], np.ndarray) and namespace["actions"].shape == (4,)
