"""The guides' examples run as written (docs/guides/*.md).

Each page runs in a fresh working directory that holds a link to the repository's ``configs/``
and a copy of ``onnx_runner.py``. Its fenced blocks run in order, the Python ones in one
namespace per page. An HTML comment on the line just before a fence says how a block is treated:

- no comment: a ```python block runs; any other block is documentation only;
- ``<!-- run -->``: a ```bash block runs through the real CLI (``$RUN`` is the page's ``run``
  variable, when a Python block set one); kept for cheap commands (``--dry-run``, tiny budgets);
- ``<!-- file: NAME -->``: the block is written to NAME, for the blocks after it to use;
- ``<!-- not-run: WHY -->``: a ```python fragment that cannot run here (it needs a server).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
GUIDES = REPO / "docs" / "guides"
FENCE = re.compile(r"(?:<!-- (?P<marker>[^>]*?) -->\n)?```(?P<lang>[\w-]*)\n(?P<code>.*?)```", re.S)


class Block(NamedTuple):
    lang: str
    marker: str  # "", "run", "file: NAME" or "not-run: WHY"
    code: str


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page`` with the marker on the line before it."""
    return [
        Block(m["lang"], (m["marker"] or "").strip(), m["code"])
        for m in FENCE.finditer(page.read_text())
    ]


def runs(block: Block) -> bool:
    """Whether the block takes part in the page's run (run, written, or a plain Python block)."""
    if block.marker.startswith("file:") or block.marker == "run":
        return True
    return block.lang == "python" and not block.marker


PAGES = sorted(GUIDES.glob("*.md"))
RUNNABLE = [page for page in PAGES if any(runs(b) for b in blocks(page))]


def test_every_marker_is_known_and_fragments_are_few() -> None:
    python_blocks = 0
    fragments = []
    for page in PAGES:
        for block in blocks(page):
            marker = block.marker
            assert marker in ("", "run") or marker.startswith(("file:", "not-run:")), (
                f"{page.name}: unknown marker {marker!r}"
            )
            if marker == "run":
                assert block.lang == "bash", f"{page.name}: <!-- run --> on a {block.lang} block"
            if block.lang == "python":
                python_blocks += 1
                if marker.startswith("not-run:"):
                    fragments.append(f"{page.name}: {marker}")
    assert python_blocks >= 10 and RUNNABLE
    assert len(fragments) <= 3, fragments


def run_page(page: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """Run a page's blocks in ``workdir``; the namespace its Python blocks left."""
    monkeypatch.chdir(workdir)
    monkeypatch.syspath_prepend(str(workdir))
    (workdir / "configs").symlink_to(REPO / "configs")
    shutil.copy(REPO / "rlformer" / "export" / "onnx_runner.py", workdir)
    namespace: dict[str, object] = {}
    for number, block in enumerate(blocks(page), 1):
        if not runs(block):
            continue
        if block.marker.startswith("file:"):
            (workdir / block.marker.removeprefix("file:").strip()).write_text(block.code)
        elif block.lang == "python":
            exec(compile(block.code, f"{page.name} block {number}", "exec"), namespace)  # noqa: S102
        else:
            env = {
                **os.environ,
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
                "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
            }
            if "run" in namespace:
                env["RUN"] = str(namespace["run"])
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", block.code],
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert done.returncode == 0, f"{page.name} block {number}:\n{done.stderr[-3000:]}"
    return namespace


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE, ids=[page.stem for page in RUNNABLE])
def test_guide_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    torch.set_num_threads(1)
    namespace = run_page(page, tmp_path, monkeypatch)
    if page.stem == "export":
        assert 0.0 <= namespace["mean_return"] <= 1.0
        assert namespace["actions"].shape == (1,)
    if page.stem == "own-env":
        assert Path(namespace["masked"]).is_dir()
    if page.stem == "quickstart":
        assert namespace["more"].env_steps == 2048
    if page.stem == "online-dt":
        assert namespace["result"].evaluation is not None
