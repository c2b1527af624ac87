# The README's two commands. Each sets itself up on a fresh machine (only python3 needed):
# a virtual environment in .venv, torch first (a CPU build where one is provided), then frugalrl.
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.frugalrl-installed
# The versions CI ran, for this Python (constraints/py311.txt; refresh: scripts/refresh_constraints.sh).
# A Python without a file installs from pyproject.toml's ranges, and says so.
PYTAG := $(shell $(PYTHON) -c 'import sys; print(f"py{sys.version_info[0]}{sys.version_info[1]}")')
CONSTRAINTS ?= $(wildcard constraints/$(PYTAG).txt)
PIN := $(if $(CONSTRAINTS),-c $(CONSTRAINTS))

.PHONY: demo test test-fast lint check-infra setup clean image constraints rliable-venv

setup: $(STAMP)

$(STAMP): pyproject.toml $(CONSTRAINTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(if $(CONSTRAINTS),,@echo "no constraints/$(PYTAG).txt: installing from pyproject.toml's ranges (versions CI has not run)")
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check "$(TORCH_SPEC)" $(PIN)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]' $(PIN)
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/frugalrl pipeline run --profile quick

# -n auto: one pytest worker per core (pytest-xdist; one more was tried and made the suite slower and a
# PostgreSQL study test flaky); --dist load hands out tests one by one (a file of slow independent tests
# spreads over both workers). No test may rely on sharing a worker with another:
# xdist 3.8's xdist_group marks are ignored under pytest 9.2, so checks that share an expensive run are
# one test (tests/test_mlflow_server.py); a test that restarts PostgreSQL does so on a cluster of its own
# (tests/test_soak.py). -rs: every skipped test, with its reason; --durations: the slowest tests, so a CI
# log shows where the suite's minutes go.
XDIST ?= -n auto --dist load
test: $(STAMP) check-infra
	$(BIN)/python -m pytest -q -rs --durations=25 $(XDIST)

test-fast: $(STAMP)  # the edit-test loop: everything but the tests marked slow
	$(BIN)/python -m pytest -q -rs $(XDIST) -m "not slow"

# The step image (needs a Docker daemon). BASE=debootstrap makes its base from Debian's packages,
# for machines that reach no container registry (as CI here); empty: the Dockerfile's pinned base.
BASE ?=
image: $(STAMP)
	$(BIN)/frugalrl image build $(if $(BASE),--base $(BASE))

# Re-resolve from pyproject.toml's ranges into constraints/pyXY.txt; then `make test` and commit it.
constraints:
	PYTHON=$(PYTHON) TORCH_SPEC="$(TORCH_SPEC)" scripts/refresh_constraints.sh

# rliable in a venv of its own (benchmarks/rliable_check.py): rliable 1.2.0 needs arch<8, which does not import
# under this project's pandas 3, so it cannot join .venv.
rliable-venv: .venv-rliable/bin/python
.venv-rliable/bin/python:
	$(PYTHON) -m venv .venv-rliable
	.venv-rliable/bin/python -m pip install --quiet --disable-pip-version-check rliable==1.2.0 'arch<8' 'pandas<3'

check-infra: $(STAMP)
	BIN=$(BIN) scripts/check_infra.sh

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf pipeline_runs local_outputs runs mlflow.db mlruns mlartifacts
