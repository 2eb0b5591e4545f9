#!/usr/bin/env bash
# Builds the peer venv for BenchMARL's MAPPO (run by benchmarks/peers/benchmarl_mappo.py):
# a Python 3.10+ venv at PEER_VENV, outside the repository, with
#   - CPU torch (TORCH_SPEC, installed first and kept as a constraint, so that pip never
#     swaps in PyPI's multi-GB CUDA build);
#   - benchmarl (BENCHMARL_SPEC) and the torchrl/tensordict it allows (benchmarl 1.5.x
#     requires torchrl>=0.10,<0.12, which resolves to torchrl 0.11.1 and tensordict 0.11.0;
#     their pure-Python code runs on torch 2.13);
#   - the PettingZoo MPE tasks: PettingZoo 1.25+ moved them into the mpe2 package and left
#     pettingzoo.mpe as a stub that raises ImportError, which torchrl's PettingZooEnv
#     does not catch. PEER_MPE=mpe2 (the default) installs pettingzoo 1.27 with mpe2, the
#     packages the project's own multi-agent runs use, and benchmarl_mappo.py points
#     pettingzoo.mpe at mpe2 at run time; PEER_MPE=pettingzoo pins pettingzoo 1.24.3, the
#     last release with pettingzoo.mpe (the version torchrl tests against). For
#     simple_spread_v3 and simple_speaker_listener_v4 both give the same observations,
#     rewards and episode ends for the same seeds and actions.
#
#   benchmarks/peers/setup_benchmarl.sh
#   PEER_VENV=/elsewhere PEER_MPE=pettingzoo benchmarks/peers/setup_benchmarl.sh
#
# Needs a python of 3.10 or later (PEER_PYTHON, default python3.11) and the package index.
# torch==2.13.0+cpu is found only where a CPU wheel index or a local wheel folder is
# configured. Re-running reuses the venv. The installed versions go to PEER_VENV/pip-freeze.txt.
set -euo pipefail

PEER_VENV="${PEER_VENV:-/work/peers/benchmarl-venv}"
PEER_PYTHON="${PEER_PYTHON:-python3.11}"
PEER_MPE="${PEER_MPE:-mpe2}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0+cpu}"
BENCHMARL_SPEC="${BENCHMARL_SPEC:-benchmarl==1.5.2}"

case "$PEER_MPE" in
    mpe2) mpe_specs=("pettingzoo==1.27.0" "mpe2==1.1.1") ;;
    pettingzoo) mpe_specs=("pettingzoo==1.24.3") ;;
    *) echo "PEER_MPE must be mpe2 or pettingzoo, not $PEER_MPE" >&2; exit 2 ;;
esac

if [ ! -x "$PEER_VENV/bin/python" ]; then
    mkdir -p "$(dirname "$PEER_VENV")"
    "$PEER_PYTHON" -m venv "$PEER_VENV"
fi
"$PEER_VENV/bin/python" -c 'import sys; assert sys.version_info >= (3, 10), sys.version'
"$PEER_VENV/bin/python" -m pip install --quiet --upgrade pip
"$PEER_VENV/bin/pip" install --quiet "$TORCH_SPEC"
constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
echo "$TORCH_SPEC" >"$constraints"
if [ "$PEER_MPE" = pettingzoo ]; then
    # mpe2 needs pettingzoo>=1.25's AgentSelector: drop it when pinning the older pettingzoo
    "$PEER_VENV/bin/pip" uninstall --quiet --yes mpe2 2>/dev/null || true
fi
# pygame-ce, scipy: what the MPE tasks import (pettingzoo[all] would also pull Atari, Box2D,
# chess and the other families, which these runs do not use)
"$PEER_VENV/bin/pip" install --quiet -c "$constraints" \
    "$BENCHMARL_SPEC" "${mpe_specs[@]}" pygame-ce scipy
"$PEER_VENV/bin/pip" freeze >"$PEER_VENV/pip-freeze.txt"
"$PEER_VENV/bin/python" - <<'EOF'
import importlib.metadata as md
import torch, torchrl, tensordict, benchmarl, pettingzoo
try:
    import pettingzoo.mpe.all_modules  # noqa: F401
    mpe = "pettingzoo.mpe"
except ImportError:
    import mpe2.all_modules  # noqa: F401
    mpe = "mpe2 " + md.version("mpe2")
print("peer venv: torch", torch.__version__, "torchrl", torchrl.__version__,
      "tensordict", tensordict.__version__, "benchmarl", benchmarl.__version__,
      "pettingzoo", pettingzoo.__version__, "MPE from", mpe)
EOF
echo "installed versions: $PEER_VENV/pip-freeze.txt"
