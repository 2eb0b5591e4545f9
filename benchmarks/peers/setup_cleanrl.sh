#!/usr/bin/env bash
# Builds the peer setup for CleanRL's ppo_trxl (run by benchmarks/peers/cleanrl_trxl.py):
#   1. exports cleanrl/ppo_trxl/ from a git copy of vwxyzjn/cleanrl into PEER_DIR, unmodified,
#      with the commit it came from in PEER_DIR/COMMIT;
#   2. builds a Python 3.10+ venv at PEER_VENV with cleanrl_requirements.txt (CleanRL's uv.lock
#      versions, CPU torch, popgym; the file says what differs from the lock).
#
#   CLEANRL_GIT=/path/to/cleanrl/.git benchmarks/peers/setup_cleanrl.sh
#
# Needs: a clone or bare mirror of vwxyzjn/cleanrl (CLEANRL_GIT: its git directory; CLEANRL_REV
# picks the commit, default HEAD), a python of 3.10 or later (PEER_PYTHON, default python3.11),
# and the package index. torch is installed as TORCH_SPEC (default torch==2.13.0+cpu, which pip
# finds only where a CPU wheel index or a local wheel folder is configured; PyPI's own torch
# wheels are CUDA builds of several GB). Re-running replaces the export and reuses the venv.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
: "${CLEANRL_GIT:?set CLEANRL_GIT to the git directory of a copy of vwxyzjn/cleanrl}"
CLEANRL_REV="${CLEANRL_REV:-HEAD}"
PEER_DIR="${PEER_DIR:-/work/peers/cleanrl}"
PEER_VENV="${PEER_VENV:-/work/peers/cleanrl-venv}"
PEER_PYTHON="${PEER_PYTHON:-python3.11}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0+cpu}"

commit="$(git --git-dir="$CLEANRL_GIT" rev-parse "$CLEANRL_REV^{commit}")"
rm -rf "$PEER_DIR"
mkdir -p "$PEER_DIR/cleanrl/ppo_trxl"
for path in $(git --git-dir="$CLEANRL_GIT" ls-tree --name-only "$commit" cleanrl/ppo_trxl/) \
    LICENSE; do
    git --git-dir="$CLEANRL_GIT" show "$commit:$path" >"$PEER_DIR/$path"
done
echo "$commit" >"$PEER_DIR/COMMIT"
echo "exported cleanrl/ppo_trxl at $commit to $PEER_DIR"

if [ ! -x "$PEER_VENV/bin/python" ]; then
    "$PEER_PYTHON" -m venv "$PEER_VENV"
fi
"$PEER_VENV/bin/python" -c 'import sys; assert sys.version_info >= (3, 10), sys.version'
"$PEER_VENV/bin/python" -m pip install --quiet --upgrade pip
# torch first and by its exact local version, so that the unpinned CUDA build is never chosen.
"$PEER_VENV/bin/pip" install --quiet "$TORCH_SPEC"
requirements="$(mktemp)"
trap 'rm -f "$requirements"' EXIT
grep -v -E '^(#|torch==)' "$here/cleanrl_requirements.txt" >"$requirements"
"$PEER_VENV/bin/pip" install --quiet -r "$requirements" "$TORCH_SPEC"
"$PEER_VENV/bin/pip" freeze >"$PEER_DIR/pip-freeze.txt"
"$PEER_VENV/bin/python" -c 'import gymnasium, popgym, torch; print("peer venv:", torch.__version__, "gymnasium", gymnasium.__version__)'
echo "installed versions: $PEER_DIR/pip-freeze.txt"
