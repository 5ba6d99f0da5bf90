# One entry point for setting up, running and testing torchforce. See README.md.
PY ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip

.PHONY: setup demo test test-quick test-learning lint bench clean

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

# Every test but the long learning runs; the log ends with the 25 slowest, to keep the suite's time in view (CI runs
# this target: 19-21 minutes of tests on two slow cores). A third test process was tried (2026-11-30): 18.5 minutes
# once here, 20.6 in a fresh clone's CI, no gain worth more contention among the Ray tests; so two.
test: lint
	$(BIN)/python -m pytest -n 2 --dist loadgroup -q --durations=25 -m "not long"

# The quick loop while working: every test but those marked slow (Ray clusters, real runs, the fresh install: about
# 100 tests, three quarters of the suite's time) and the long learning runs; about 7 minutes on two cores.
test-quick: setup
	$(BIN)/python -m pytest -n 2 --dist loadgroup -q --durations=10 -m "not slow and not long"

# The long learning runs: every learning agent's shipped config on CartPole or Pendulum, over seeds (about 7 minutes
# on two cores). Run them after changing an agent, a shipped config or what they build on.
test-learning: setup
	$(BIN)/python -m pytest -n 2 --dist loadgroup -q --durations=10 -m long

bench: setup
	$(PIP) install -q -c constraints.txt -e ".[dev,bench]"
	$(BIN)/python bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) demo build *.egg-info
