"""Reports how many inputs each fuzz target tried (see fuzzing.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.reliability.fuzzing import OUTCOMES, TRIED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not TRIED:
        return
    terminalreporter.section("fuzz inputs tried")
    for target, count in sorted(TRIED.items()):
        ends = ", ".join(
            f"{what}: {n}" for (name, what), n in sorted(OUTCOMES.items()) if name == target
        )
        terminalreporter.write_line(f"{target:36s} {count:5d}  {ends}")
    default = Path(str(terminalreporter.config.rootpath)) / ".pytest_cache" / "fuzz_counts.json"
    out = Path(os.environ.get("RLFORMER_FUZZ_COUNTS", default))
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        target: {
            "tried": count,
            "outcomes": {what: n for (name, what), n in sorted(OUTCOMES.items()) if name == target},
        }
        for target, count in sorted(TRIED.items())
    }
    out.write_text(json.dumps(report, indent=2) + "\n")
