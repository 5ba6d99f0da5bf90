# One entry point for setting up, running and testing torchforce. See README.md.
PY ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip

.PHONY: setup demo test lint bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

setup: $(BIN)/python
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -c constraints.txt -e ".[dev]"

# The main job: tfcli init a demo project, run a PPO CartPole experiment to the end, show results and the plot.
demo: setup
	bash scripts/demo.sh

lint: setup
	$(BIN)/ruff check torchforce tests bench
	$(BIN)/ruff format --check torchforce tests bench
	$(BIN)/mypy

# the log ends with the 25 slowest tests, to keep the suite's time in view (CI runs this target)
test: lint
	$(BIN)/python -m pytest -n 2 --dist loadgroup -q --durations=25

bench: setup
	$(PIP) install -q -c constraints.txt -e ".[dev,bench]"
	$(BIN)/python bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) demo build *.egg-info
