"""The project's files speak of the project, not of how it was built: no file names a numbered
period of work or one of the project's own issue numbers. History lives in ``git log``."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Caches, venvs, run outputs and build outputs ("site": the docs site `make docs` builds, whose
# search index runs table cells together, e.g. "team session | 1 |" into "team session 1").
SKIPPED_DIRS = {".git", ".venv", "runs", "__pycache__", ".pytest_cache", ".ruff_cache", "build",
                "site"}  # fmt: skip
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".jsonl", ".json", ".sh"}
TEXT_NAMES = {"Makefile", "run", ".gitignore"}

# A numbered period of work ("session 22", "sessions 3-4"), or a data file labelled by one
# ("throughput_s22", "cartpole_s17.jsonl"; the MiniGrid task MemoryS11 is a name, not a label).
NUMBERED_PERIOD = re.compile(r"\bsessions?[\s-]*#?\d+|(?<!memory)_s\d{1,2}(?![\d])", re.I)
# "issue 14", "issue #14", "issues #14 and #15", "(#14)", "PR #7".
ISSUE_NUMBER = re.compile(
    r"\b(?:issues?|prs?|tasks?)\s*#\d+|\bissues?\s+\d+\b|(?<![\w/&])#\d+\b", re.I
)
# Other projects' issues and pull requests may be cited: the project's name stands just before.
OTHER_PROJECTS = re.compile(
    r"(sb3-contrib|stable-baselines3|sb3|rllib|ray|pytorch|torch|gymnasium|minari|cleanrl|"
    r"decision-transformer|popgym|minigrid|onnx\w*|pufferlib|sample-factory|transformers|"
    r"d4rl|isaaclab|skrl|acme|torchrl)\b[^.;\n]{0,40}$",
    re.I,
)


def project_files(root: Path = REPO) -> list[Path]:
    """The project's text files: everything under ``root`` but caches, venvs and run outputs."""
    files = []
    for path in root.rglob("*"):
        parts = set(path.relative_to(root).parts)
        if parts & SKIPPED_DIRS or any(p.endswith(".egg-info") for p in parts):
            continue
        if path.is_file() and (path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES):
            files.append(path)
    return files


def history_mentions(text: str) -> list[str]:
    """The phrases of ``text`` that label work by period or by this project's issue number."""
    found = [m.group(0) for m in NUMBERED_PERIOD.finditer(text)]
    for match in ISSUE_NUMBER.finditer(text):
        before = text[max(0, match.start() - 60) : match.start()]
        if not OTHER_PROJECTS.search(before):
            found.append(match.group(0))
    return found


def test_no_file_or_file_name_mentions_work_periods_or_issue_numbers():
    this_file = Path(__file__).resolve()
    offenders = []
    for path in project_files():
        relative = path.relative_to(REPO).as_posix()
        offenders += [f"{relative} (file name)" for _ in history_mentions(relative)]
        if path.resolve() == this_file:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            offenders += [f"{relative}:{number}: {hit!r}" for hit in history_mentions(line)]
    assert not offenders, "history in project files:\n" + "\n".join(offenders[:50])


def test_the_check_tells_history_from_legitimate_uses():
    for history in (
        "re-measured in session 22",
        "sessions 3-4 shared the machine",
        "docs/memory_suite/throughput_s22/all.jsonl",
        "cartpole_s17.jsonl",
        "Memory suite (issue #14)",
        "fixed in #15",
        "see issue 41",
    ):
        assert history_mentions(history), history
    for legitimate in (
        "configs/memory/minigrid_memory_s11.yaml",
        "MiniGrid-MemoryS11",
        "sb3-contrib #101 asks for masks",
        "RLlib PR #43592 (LSTM ONNX example)",
        "stable-baselines3 #1125",
        "each serving session keeps its memory",
        "the session directory under /tmp/ray",
        "seeds 3 and 4",
        "color = '#1f77b4'",
    ):
        assert not history_mentions(legitimate), legitimate
