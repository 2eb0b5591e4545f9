"""Type-check the Python examples of the README and the quickstart guide with mypy.

Each page's ```python blocks are written, in order, to one module (they run in one namespace:
tests/policies/test_readme_examples.py, tests/docs/test_guide_examples.py), which mypy checks
with the project's settings (pyproject.toml). Exits with mypy's status.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGES = ("README.md", "docs/guides/quickstart.md")
# A block the guide does not run (marked <!-- not-run: ... -->) is not checked either.
BLOCK = re.compile(r"(<!-- not-run:[^>]*-->\n)?```python\n(.*?)```", re.S)


def example_module(page: Path) -> str:
    """The page's Python examples as one module."""
    blocks = [code for skipped, code in BLOCK.findall(page.read_text()) if not skipped]
    return "\n".join(blocks)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for page in PAGES:
            name = re.sub(r"\W", "_", Path(page).stem.lower())
            path = Path(tmp) / f"example_{name}.py"
            path.write_text(example_module(REPO / page))
            files.append(str(path))
        config = str(REPO / "pyproject.toml")
        command = [sys.executable, "-m", "mypy", "--config-file", config, *files]
        return subprocess.run(command, cwd=REPO).returncode


if __name__ == "__main__":
    sys.exit(main())
