"""How an experiment's run mode is settled: 2018's default of one parameter server, and a 2018 agent config's
``execution`` driving the run mode (or contradicting the experiment's own, which is an error); and the distributed
run's ``worker_timeout``."""

from __future__ import annotations

import time

import pytest

from torchforce.client.experiment_build import worker_agent_spec
from torchforce.client.experiment_file import resolve_experiment, worker_timeout_of
from torchforce.execution.distributed import WORKER_TIMEOUT
from torchforce.spec import SpecError, SpecWarning

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


def test_the_worker_timeout_is_seconds_or_null_and_ten_minutes_by_default(project):
    spec = resolve(project, run_mode="distributed")
    assert spec["worker_timeout"] == 600.0 == WORKER_TIMEOUT == worker_timeout_of(spec)
    assert resolve(project, run_mode="distributed", worker_timeout=90)["worker_timeout"] == 90.0
    endless = resolve(project, run_mode="distributed", worker_timeout=None)  # null: wait for ever, not the default
    assert endless["worker_timeout"] is None and worker_timeout_of(endless) is None
    assert resolve(project, **endless)["worker_timeout"] is None  # as the stored spec is read again
    from torchforce.client import Experiment

    python_api = Experiment(project, name="endless", agent="ppo_cartpole", environment="cartpole", worker_timeout=None)
    assert python_api.validate()["worker_timeout"] is None  # (None was taken for "not given": 600 s)
    older = {key: value for key, value in spec.items() if key != "worker_timeout"}  # resolved before the field
    assert worker_timeout_of(older) == WORKER_TIMEOUT
    expected = "expected a number of seconds > 0, or null to wait for ever"
    for value, problem in ((0, "out of range"), (-5, "out of range"), ("10m", "not a number of seconds")):
        with pytest.raises(SpecError, match=f"^experiment.worker_timeout: {problem}; {expected}, got"):
            resolve(project, run_mode="distributed", worker_timeout=value)
    with pytest.raises(SpecError, match="experiment.worker_timeout: not a number of seconds"):
        resolve(project, run_mode="distributed", worker_timeout=True)


def test_a_short_worker_timeout_is_warned_about(project):
    raw = {"name": "x", "environment": "cartpole", "agent": PPO, "total_timesteps": 1000, "run_mode": "distributed"}
    with pytest.warns(SpecWarning, match="experiment.worker_timeout: 5 s is short: a Ray worker whose chunk"):
        resolve_experiment(project, {**raw, "worker_timeout": 5})


def test_a_pause_not_answered_in_time_says_what_a_distributed_run_may_still_do(project, capsys, monkeypatch):
    """A distributed run waits for a hung Ray worker's replacement (up to its worker_timeout) before it checkpoints,
    longer than the client waits for an answer: the message said only that the worker did not pause."""
    from tests.client.conftest import fake_worker
    from torchforce.client import experiment_control
    from torchforce.client.cli import main

    monkeypatch.setattr(experiment_control, "SIGNAL_TIMEOUT", 1.0)
    flags = ["-A", "ppo_cartpole", "-E", "cartpole", "-t", "4000", "--run-mode", "distributed", "--num-workers", "2"]
    assert main(["experiment", "new", "-n", "dist", *flags]) == 0
    capsys.readouterr()
    deaf = "import signal, time; signal.signal(signal.SIGUSR1, signal.SIG_IGN); time.sleep(60)"
    with fake_worker(project.root / "experiments" / "dist", deaf) as pid:  # a worker that answers nothing
        assert project.store.update_experiment("dist", status="running", pid=pid)
        time.sleep(1.0)  # its handler in place
        assert main(["experiment", "pause", "-e", "dist"]) == 2
    err = capsys.readouterr().err
    assert "did not pause within 1 s" in err
    assert "A distributed run waits for a hung Ray worker to be replaced (its worker_timeout)" in err
    assert "it may still pause (on GKE its RayJob is suspended only by a 'pause' given again then)." in err
