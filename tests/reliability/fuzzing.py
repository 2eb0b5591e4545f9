"""Shared pieces of the fuzz tests: reproducible hypothesis settings and input counters.

Every fuzz test runs a fixed number of examples from a derandomized (seeded by the test's name),
database-less hypothesis run, so CI tries the same inputs on every machine and every run. Each
test counts the inputs it actually tried under its target's name; the counts are printed in the
terminal summary and written to ``.pytest_cache/fuzz_counts.json`` (or to the file named by
``RLFORMER_FUZZ_COUNTS``).
"""

from __future__ import annotations

import contextlib
import os
import traceback
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from hypothesis import HealthCheck, settings

FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)
"""Base settings; each test adds its own ``max_examples`` with ``settings(FUZZ, ...)``."""

TRIED: Counter[str] = Counter()
"""Inputs tried per fuzz target over this pytest session (shrinking included)."""

OUTCOMES: Counter[tuple[str, str]] = Counter()
"""How those inputs ended, per target: e.g. ``("cli: dataset info", "exit 2")``."""


def tried(target: str) -> None:
    """Count one input given to ``target``."""
    TRIED[target] += 1


def outcome(target: str, what: str) -> None:
    """Count how one input to ``target`` ended (loaded, a clean error, an exit code)."""
    OUTCOMES[target, what] += 1


@contextlib.contextmanager
def working_directory(path: Path) -> Iterator[None]:
    """Run a block in ``path`` (so a stray relative output lands in a temp folder)."""
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def check_cli_result(
    result,  # noqa: ANN001 - click.testing.Result
    allowed: tuple[int, ...] = (0, 2),
    strict_stderr: bool = True,
) -> None:
    """A CliRunner result is a clean exit: allowed code, no escaped exception, no traceback,
    and (``strict_stderr``) on exit 2 nothing on stderr but ``error:`` lines, at least one.

    Usage errors found by click itself (an unknown option, a missing argument) print click's
    own usage box, so tests that draw arbitrary argument lists pass ``strict_stderr=False``.
    """
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        raise AssertionError(f"exception escaped the CLI:\n{text}\noutput:\n{result.output}")
    assert result.exit_code in allowed, f"exit {result.exit_code}:\n{result.output}"
    assert "Traceback" not in result.output, result.output
    if result.exit_code == 2 and strict_stderr:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert lines, "exit 2 without an error line"
        bad = [line for line in lines if not line.startswith("error:")]
        assert not bad, f"stderr lines that are not 'error:' lines: {bad}\n{result.stderr}"
