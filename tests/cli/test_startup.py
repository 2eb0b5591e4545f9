"""What runs without torch: ``import rlformer``, ``--help`` and refusing a bad config answer in a
fraction of torch's import time (about 2.5 s of CPU here), and Serve's HTTP router (a process in
every served app) imports its module without it. Each runs in a fresh interpreter that reports
whether torch got imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPORT = "import json, sys; print(json.dumps('torch' in sys.modules))"


def loads_torch(code: str, cwd: Path) -> tuple[bool, subprocess.CompletedProcess[str]]:
    """Run ``code`` in a new interpreter, then report whether it imported torch."""
    script = f"{code}\n{REPORT}"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert done.stdout.strip(), done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done


def cli(*args: str) -> str:
    """Code that runs ``rlformer ARGS`` in-process and keeps going after its exit."""
    return (
        "import sys\nfrom rlformer.cli import main\n"
        f"sys.argv = ['rlformer', *{list(args)!r}]\n"
        "try:\n    main()\nexcept SystemExit as done:\n    print('exit', done.code)\n"
    )


@pytest.mark.parametrize(
    "code",
    [
        "import rlformer\ncfg = rlformer.TrainConfig(env=rlformer.EnvConfig(id='CartPole-v1'))",
        "import rlformer.cli",
        "from rlformer.serve.deployments import Router, ServeOptions\nServeOptions()",
    ],
)
def test_the_package_its_typed_api_and_the_http_router_import_without_torch(
    tmp_path: Path, code: str
) -> None:
    torch_loaded, done = loads_torch(code, tmp_path)
    assert not torch_loaded, f"{code!r} imported torch"


def test_reading_a_core_class_loads_it_on_first_use(tmp_path: Path) -> None:
    code = "import rlformer.core as core\nprint(core.MemoryCore.__module__)"
    torch_loaded, done = loads_torch(code, tmp_path)
    assert torch_loaded and "rlformer.core.stack" in done.stdout
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        import rlformer.core

        rlformer.core.Nope  # noqa: B018


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("train", "--help"),
        ("train", "no_such_config.yaml"),
        ("train", "--set", "ppo.no_such_key=1"),
        ("train", "--set", "ppo.learning_rate=fast"),
    ],
)
def test_help_and_a_refused_config_answer_before_torch_loads(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    torch_loaded, done = loads_torch(cli(*args), tmp_path)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    expected = "exit 0" if "--help" in args else "exit 2"
    assert expected in done.stdout, (done.stdout[-2000:], done.stderr[-2000:])
    assert not torch_loaded, f"rlformer {' '.join(args)} imported torch"
