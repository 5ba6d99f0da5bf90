"""The experiment lifecycle on the local backend, end to end: real tfcli processes, real detached workers."""

from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest
import torch

from tests.client.conftest import tfcli, wait_for, wait_until_done
from torchforce.agents import create_agent
from torchforce.client import Experiment
from torchforce.client.spec import worker_agent_spec
from torchforce.client.worker import Checkpoints
from torchforce.environments import make

PPO = ["-A", "ppo_cartpole", "-E", "cartpole", "-N", "4", "--seed", "5"]


def episodes(experiment: Experiment) -> list[dict]:
    """The episode log without wall times (which differ between runs)."""
    lines = (experiment.results / "episodes.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k != "wall_time"} for line in lines]


def final_parameters(experiment: Experiment) -> dict[str, torch.Tensor]:
    spec = experiment.spec
    environment = make(spec["environment"])
    agent = create_agent(worker_agent_spec(spec), states=environment.states, actions=environment.actions)
    checkpoints = Checkpoints(experiment.results / "checkpoints")
    agent.restore_model(checkpoints.folder / checkpoints.latest()["folder"])
    environment.close()
    return agent.get_parameters()


def progress_at_least(experiment: Experiment, timesteps: int):
    return lambda: experiment.progress().get("timesteps", 0) >= timesteps


def test_the_whole_journey_through_the_real_command_line(project):
    root = project.root
    created = tfcli(root, "experiment", "new", "-n", "journey", *PPO, "-t", "24000")
    assert created.returncode == 0, created.stderr
    assert "Created experiment 'journey'" in created.stdout
    assert tfcli(root, "experiment", "start", "-e", "journey").returncode == 0
    experiment = Experiment.load(project, "journey")
    assert experiment.record().status == "running" and experiment.record().pid
    wait_for(progress_at_least(experiment, 4000), what="progress")

    paused = tfcli(root, "experiment", "pause", "-e", "journey")
    assert paused.returncode == 0, paused.stderr
    assert experiment.record().status == "paused" and experiment.has_checkpoint()
    resumed = tfcli(root, "experiment", "start", "-e", "journey", "--resume", "--follow")
    assert resumed.returncode == 0, resumed.stderr
    assert "'journey' is finished" in resumed.stdout
    assert experiment.progress()["timesteps"] >= 24000

    downloaded = tfcli(root, "experiment", "download", "-e", "journey")
    assert downloaded.returncode == 0 and "results" in downloaded.stdout
    assert list((experiment.results / "summaries").glob("events.out.tfevents.*"))
    plot = root / "curves.png"
    plotted = tfcli(root, "experiment", "plot", "-e", "journey", "-o", str(plot))
    assert plotted.returncode == 0, plotted.stderr
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    assert matplotlib.image.imread(plot).shape[2] in (3, 4)
    compared = tfcli(root, "experiment", "compare", "journey", "--threshold", "50")
    assert compared.returncode == 0 and "journey" in compared.stdout and "Steps to 50" in compared.stdout
    listed = json.loads(tfcli(root, "experiment", "list", "--json").stdout)
    assert [(row["name"], row["status"], row["progress"]) for row in listed] == [("journey", "finished", 1.0)]
    shown = json.loads(tfcli(root, "experiment", "show", "-e", "journey", "--json").stdout)
    assert shown["spec"]["agent"]["type"] == "ppo" and shown["has_checkpoint"] and len(shown["recent_returns"]) == 10


def test_a_paused_and_resumed_run_ends_exactly_as_an_uninterrupted_one(project):
    budget = 16000
    straight = Experiment(
        project,
        name="straight",
        agent="ppo_cartpole",
        environment="cartpole",
        total_timesteps=budget,
        num_environments=4,
        seed=5,
    )
    paused = Experiment(
        project,
        name="paused",
        agent="ppo_cartpole",
        environment="cartpole",
        total_timesteps=budget,
        num_environments=4,
        seed=5,
        saver_frequency="100000t",
    )
    for experiment in (straight, paused):
        experiment.generate_locally()
    straight.start()
    assert wait_until_done(straight) == "finished"
    paused.start()
    wait_for(progress_at_least(paused, 3000), what="progress")
    assert paused.pause().status == "paused"
    stopped_at = paused.progress()["timesteps"]
    assert 3000 <= stopped_at < budget
    paused.start(resume=True)
    assert wait_until_done(paused) == "finished"

    assert episodes(paused) == episodes(straight)
    expected, actual = final_parameters(straight), final_parameters(paused)
    assert expected.keys() == actual.keys()
    for name in expected:
        assert torch.equal(expected[name], actual[name]), name


def test_a_killed_worker_shows_as_failed_and_resumes_from_its_last_checkpoint(project):
    period = 2000
    experiment = Experiment(
        project,
        name="crash",
        agent="ppo_cartpole",
        environment="cartpole",
        total_timesteps=20000,
        num_environments=4,
        seed=1,
        saver_frequency=f"{period}t",
    )
    experiment.generate_locally()
    pid = experiment.start()
    checkpoints = Checkpoints(experiment.results / "checkpoints")
    wait_for(lambda: (checkpoints.latest() or {}).get("timesteps", 0) >= 2 * period, what="two checkpoints")
    os.kill(pid, signal.SIGKILL)
    killed_at = experiment.progress()["timesteps"]
    record = wait_for(lambda: (r := experiment.record()).status == "failed" and r, timeout=10, what="failed")
    assert "the worker died" in record.message and record.pid is None
    listed = json.loads(tfcli(project.root, "experiment", "list", "--json").stdout)
    assert listed[0]["status"] == "failed"

    restart_from = checkpoints.latest()["timesteps"]
    assert killed_at - restart_from <= period + 4  # at most one saver period (plus one vectorized step) is lost
    experiment.start(resume=True)
    assert wait_until_done(experiment) == "finished"
    log = episodes(experiment)
    assert [entry["episode"] for entry in log] == list(range(1, len(log) + 1))  # none lost, none repeated
    assert np.all(np.diff([entry["timesteps"] for entry in log]) >= 0)
    assert experiment.progress()["timesteps"] >= 20000


def test_stop_checkpoints_and_ends_for_good(project):
    experiment = Experiment(
        project,
        name="stopper",
        agent="ppo_cartpole",
        environment="cartpole",
        total_timesteps=500000,
        num_environments=2,
        seed=0,
    )
    experiment.generate_locally()
    experiment.start()
    wait_for(progress_at_least(experiment, 1000), what="progress")
    record = experiment.stop()
    assert record.status == "stopped" and record.pid is None and experiment.has_checkpoint()
    result = tfcli(project.root, "experiment", "start", "-e", "stopper")
    assert result.returncode == 2 and "has already run (status: stopped)" in result.stderr


@pytest.mark.parametrize("name", ["cartpole_ppo", "cartpole_dqn", "pendulum_ppo"])
def test_shipped_experiments_that_run_locally_run_a_few_episodes(project, name):
    experiment = Experiment(project, file=name, name=name.replace("_", "-"), total_timesteps=1000)
    experiment.generate_locally()
    experiment.start()
    assert wait_until_done(experiment) == "finished", experiment.log_tail()
    progress = experiment.progress()
    assert progress["timesteps"] >= 1000 and progress["episodes"] >= 2


def test_logs_watch_and_delete(project):
    root = project.root
    assert tfcli(root, "experiment", "new", "-n", "small", *PPO, "-t", "400").returncode == 0
    missing = tfcli(root, "experiment", "logs", "-e", "small")
    assert missing.returncode == 2 and "has no log yet" in missing.stderr
    assert tfcli(root, "experiment", "start", "-e", "small").returncode == 0
    watched = tfcli(root, "experiment", "watch", "-e", "small")
    assert watched.returncode == 0 and "'small' is finished" in watched.stdout
    logs = tfcli(root, "experiment", "logs", "-e", "small", "--follow")
    assert logs.returncode == 0 and "experiment small finished" in logs.stdout
    deleted = tfcli(root, "experiment", "delete", "-e", "small")
    assert deleted.returncode == 0
    assert not (root / "experiments" / "small").exists() and project.store.experiment("small") is None
