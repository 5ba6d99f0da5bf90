"""How an experiment's run mode is settled: 2018's default of one parameter server, and a 2018 agent config's
``execution`` driving the run mode (or contradicting the experiment's own, which is an error)."""

from __future__ import annotations

import pytest

from torchforce.client.experiment_file import resolve_experiment, worker_agent_spec
from torchforce.spec import SpecError

PPO = {"type": "ppo", "network": [{"type": "dense", "size": 8}]}
HOSTS = {"ps": ["localhost:22222"], "worker": ["a:1", "b:2", "c:3"]}
EXECUTION = {"type": "distributed", "distributed_spec": {"cluster_spec": HOSTS}}


def resolve(project, **fields):
    raw = {"name": "x", "environment": "cartpole", "agent": PPO, "total_timesteps": 1000, **fields}
    return resolve_experiment(project, raw, build=False)


def test_the_distributed_run_mode_alone_has_one_parameter_server(project):
    spec = resolve(project, run_mode="distributed")
    assert (spec["run_mode"], spec["num_parameter_servers"], spec["num_workers"]) == ("distributed", 1, 1)


def test_a_2018_execution_drives_the_run_mode_and_counts_the_hosts(project):
    spec = resolve(project, agent={**PPO, "execution": EXECUTION})
    assert (spec["run_mode"], spec["num_parameter_servers"], spec["num_workers"]) == ("distributed", 1, 3)
    assert "execution" not in worker_agent_spec(spec)  # the run mode has taken it over
    threaded = resolve(project, agent={**PPO, "execution": {"type": "multi-threaded"}}, num_workers=2)
    assert (threaded["run_mode"], threaded["num_workers"]) == ("multi-threaded", 2)


def test_an_experiment_run_mode_that_contradicts_the_execution_is_refused(project):
    with pytest.raises(SpecError, match="experiment.run_mode: contradicts the agent config's execution type"):
        resolve(project, run_mode="single", agent={**PPO, "execution": EXECUTION})
    assert resolve(project, run_mode="single", agent={**PPO, "execution": {"type": "single"}})["run_mode"] == "single"


def test_an_unknown_execution_type_names_its_path(project):
    with pytest.raises(SpecError, match="experiment.agent.execution.type"):
        resolve(project, agent={**PPO, "execution": {"type": "mpi"}})
