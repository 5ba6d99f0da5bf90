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

# The main job: train PPO on CartPole-v1 with a progress bar, write results and a learning-curve PNG.
demo: setup
	$(BIN)/python -m torchforce.examples.cartpole --out demo

test: setup
	$(BIN)/ruff check torchforce tests
	$(BIN)/python -m pytest -n 2 -q

bench: setup
	$(PIP) install -q -c constraints.txt -e ".[dev,bench]"
	$(BIN)/python bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) demo build *.egg-info
