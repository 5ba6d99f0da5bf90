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


def test_per_worker_steps_give_each_point_its_workers_times_the_steps(distributed):
    """``--per-worker``: 8 workers run 8 x the steps, so the point lasts about as long as 1 worker's where they
    scale (the one process runs the steps as given); without it every point runs the same steps."""
    plan = distributed.planned_points(distributed.parse(["--workers", "1", "8", "--steps", "500", "--per-worker"]))
    assert [(function.__name__, arguments[1]) for function, arguments in plan] == [
        ("one_process", 500),
        ("distributed", 500),
        ("distributed", 4000),
    ]
    plan = distributed.planned_points(distributed.parse(["--workers", "1", "8", "--sync-every", "1", "4"]))
    assert [arguments[1] for _, arguments in plan] == [40_000] * 5
    assert [(arguments[3], arguments[5]) for _, arguments in plan[1:]] == [(1, 1), (8, 1), (1, 4), (8, 4)]
