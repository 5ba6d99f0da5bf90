"""bench/distributed.py's workloads: the shipped agent on CartPole-v1, or a task's experiment (Breakout from pixels),
with the agents on the device asked for and no seed of their own (each point seeds its agents). The points
themselves start Ray clusters and run for minutes: bench/README.md has their runs, on this machine and on a GPU."""

import pytest

from tests.bench_modules import BENCH, bench_module


@pytest.fixture(scope="module")
def distributed():
    return bench_module("distributed")  # the standard library only at import: its neighbours are imported by what runs


def test_the_default_workload_is_the_shipped_agent_on_cartpole_on_the_device_asked_for(distributed):
    environment, agent, extra = distributed.workload("dqn_cartpole", None, "cuda")
    assert environment == "CartPole-v1" and extra == {}
    assert agent["type"] == "dqn" and agent["device"] == "cuda"


def test_an_experiments_workload_is_its_environment_and_agent_without_a_seed(distributed, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))  # as when distributed.py runs: the experiment comes from tasks.py
    environment, agent, extra = distributed.workload("dqn_cartpole", "breakout_ppo", "auto")
    assert environment["type"] == "atari" and environment["game"] == "Breakout"
    assert agent["type"] == "ppo" and agent["device"] == "auto" and "seed" not in agent
    assert agent["update_mode"]["batch_size"] == 1024  # the shipped ppo_atari's, not CartPole's config
    assert set(extra) <= {"network"}
