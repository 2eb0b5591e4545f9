# Two commands from a fresh clone (see README):  make quickstart   |   make test
PYTHON ?= python3
VENV ?= .venv
CONSTRAINTS ?= constraints.txt
BIN := $(VENV)/bin
PIP_CONSTRAINT_FLAG := $(if $(CONSTRAINTS),-c $(CONSTRAINTS),)
PYTEST_ARGS ?=
# pytest-xdist workers (3 keep 2 cores busy while Ray tests wait on process starts; 4 overloaded
# them, a load average of 7 to 21, and tests failed); the modules on the shared local Ray make
# two scopes of their own (tests/conftest.py).
TEST_WORKERS ?= 3
PYTEST_PARALLEL := -n $(TEST_WORKERS) --dist loadscope --durations=15

.PHONY: install quickstart test test-fast lint typecheck docs bench peer-cleanrl wheel-check clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Re-install whenever the dependency declarations change. Everything installed is byte-compiled:
# where PYTHONDONTWRITEBYTECODE is set, as in many CI images, no process would ever write a .pyc,
# and each Ray worker and CLI run would compile torch and ray again (an `import torch, ray,
# rlformer` 5.9 s instead of 3.1 s; the suite half as slow again). pip compiles one file at a
# time (71 s here); compileall on every core instead (45 s on 2). Its exit status is left out:
# a few packages ship files for other Python versions that do not compile, as pip ignores too.
$(VENV)/.installed: $(BIN)/python pyproject.toml setup.py $(CONSTRAINTS)
	$(BIN)/pip install --quiet --no-compile $(PIP_CONSTRAINT_FLAG) -e ".[dev]"
	-$(BIN)/python -m compileall -q -j 0 "$$($(BIN)/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")" > /dev/null 2>&1
	touch $@

# The package's own modules (an editable install: pip compiles none of them) are compiled here,
# for the same reason; compileall skips the ones already up to date.
install: $(VENV)/.installed
	$(BIN)/python -m compileall -q -j 0 rlformer envs > /dev/null

## Train GTrXL-PPO on a memory task with an embedded local Ray and print the success rate.
quickstart: install
	$(BIN)/rlformer train configs/quickstart.yaml

## ruff (lint and formatting), then the whole test suite (slow, Ray and CLI tests included).
test: install
	$(BIN)/ruff check rlformer envs tests scripts benchmarks
	$(BIN)/ruff format --check rlformer envs tests scripts benchmarks
	$(BIN)/python -m pytest $(PYTEST_PARALLEL) $(PYTEST_ARGS)

## Everything except tests marked slow.
test-fast: install
	$(BIN)/python -m pytest $(PYTEST_PARALLEL) -m "not slow" $(PYTEST_ARGS)

## mypy over the package, then over the README's and the quickstart guide's Python examples.
typecheck: install
	$(BIN)/python -m mypy
	$(BIN)/python scripts/typecheck_examples.py

## The documentation site (MkDocs, docs/ -> site/); warnings, broken links included, fail it.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

## A wheel, installed alone (no extras) in a fresh venv, trains the quickstart task (CI runs it).
wheel-check:
	PYTHON=$(PYTHON) bash .ci/wheel_check

lint: install
	$(BIN)/ruff check rlformer envs tests scripts benchmarks
	$(BIN)/ruff format --check rlformer envs tests scripts benchmarks

## Side-by-side benchmarks (needs the bench extra: transformers).
bench: install
	$(BIN)/pip install --quiet $(PIP_CONSTRAINT_FLAG) -e ".[dev,bench]"
	$(BIN)/python benchmarks/core.py

## CleanRL's ppo_trxl in its own venv, as a peer on POPGym (benchmarks/peers/cleanrl_trxl.py):
## make peer-cleanrl CLEANRL_GIT=<git dir of a vwxyzjn/cleanrl copy> [PEER_DIR=... PEER_VENV=...]
peer-cleanrl:
	CLEANRL_GIT="$(CLEANRL_GIT)" PEER_DIR="$(PEER_DIR)" PEER_VENV="$(PEER_VENV)" \
		bash benchmarks/peers/setup_cleanrl.sh

clean:
	rm -rf $(VENV) runs .pytest_cache site
