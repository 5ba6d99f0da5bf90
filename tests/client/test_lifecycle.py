"""The experiment lifecycle on the local backend, end to end: real tfcli processes, real detached workers."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest
import torch

from tests.client.conftest import kill_workers, tfcli, wait_for, wait_until_done
from torchforce.agents import create_agent
from torchforce.client import Experiment, Project
from torchforce.client.checkpoints import Checkpoints
from torchforce.client.commands.views import short_return
from torchforce.client.experiment_build import worker_agent_spec
from torchforce.configs import names
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


@pytest.fixture
def cli_root(tmp_path, monkeypatch):
    """A project made by the real ``tfcli init``."""
    root = tmp_path / "journey"
    root.mkdir()
    made = tfcli(root, "init")
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith("Project 'journey' in ") and "existing ones kept" not in made.stdout
    monkeypatch.chdir(root)
    yield root
    kill_workers(Project(root))


def table_row(table: str, name: str) -> list[str]:
    """The cells of the row of ``name`` in a ``list`` table (cells hold no spaces here)."""
    header, rule, *rows = table.splitlines()
    assert header.split()[:8] == [
        "Experiment",
        "Agent",
        "Environment",
        "Run-Mode",
        "Workers",
        "Cluster",
        "Status",
        "Progress",
    ]
    assert set(rule.replace(" ", "")) == {"-"}
    return next(row.split() for row in rows if row.split()[0] == name)


@pytest.mark.slow
def test_the_whole_journey_through_the_real_command_line(cli_root):
    root = cli_root
    created = tfcli(root, "experiment", "new", "-n", "journey", *PPO, "-t", "24000")
    assert created.returncode == 0, created.stderr
    assert "Created experiment 'journey'" in created.stdout
    assert tfcli(root, "experiment", "start", "-e", "journey").returncode == 0
    project = Project(root)
    experiment = Experiment.load(project, "journey")
    assert experiment.record().status == "running" and experiment.record().pid
    wait_for(progress_at_least(experiment, 4000), what="progress")

    paused = tfcli(root, "experiment", "pause", "-e", "journey")
    assert paused.returncode == 0, paused.stderr
    assert experiment.record().status == "paused" and experiment.has_checkpoint()
    at = experiment.checkpoint_timesteps()
    assert paused.stdout.startswith(f"'journey' is paused at timestep {at:,}; continue with:")
    row = table_row(tfcli(root, "experiment", "list").stdout, "journey")
    assert row[:7] == ["journey", "ppo", "CartPole-v1", "single", "1", "local", "paused"]
    assert row[7] == f"{100 * at / 24000:.0f}%"
    shown = tfcli(root, "experiment", "show", "-e", "journey").stdout.splitlines()
    assert "Status       paused" in shown and "Runs on      local" in shown and "Checkpoint   yes" in shown
    assert f"Progress     {at:,} timesteps," in "\n".join(shown)

    resumed = tfcli(root, "experiment", "start", "-e", "journey", "--resume", "--follow")
    assert resumed.returncode == 0, resumed.stderr
    assert "'journey' is finished" in resumed.stdout
    bars = [line for line in re.split(r"[\r\n]+", resumed.stdout) if line.startswith("journey: ")]
    assert f" {at}/24000 [" in bars[0]  # the bar starts at the checkpoint, so its steps/s is this run's
    assert "100%|" in bars[-1] and " 24000/24000 [" in bars[-1]
    assert experiment.progress()["timesteps"] >= 24000

    downloaded = tfcli(root, "experiment", "download", "-e", "journey")
    assert downloaded.returncode == 0 and "results" in downloaded.stdout
    assert list((experiment.results / "summaries").glob("events.out.tfevents.*"))
    plot = root / "curves.png"
    plotted = tfcli(root, "experiment", "plot", "-e", "journey", "-o", str(plot))
    assert plotted.returncode == 0, plotted.stderr
    assert plotted.stdout.strip().endswith(str(plot))  # absolute: valid wherever it is read
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    assert matplotlib.image.imread(plot).shape[2] in (3, 4)
    compared = tfcli(root, "experiment", "compare", "journey", "--threshold", "50")
    assert compared.returncode == 0 and "journey" in compared.stdout and "Steps to 50" in compared.stdout
    listed = json.loads(tfcli(root, "experiment", "list", "--json").stdout)
    assert [(row["name"], row["status"], row["progress"]) for row in listed] == [("journey", "finished", 1.0)]
    row = table_row(tfcli(root, "experiment", "list").stdout, "journey")
    assert row[5:8] == ["local", "finished", "100%"] and float(row[8]) == pytest.approx(
        listed[0]["mean_return_100"], abs=0.06
    )
    shown = json.loads(tfcli(root, "experiment", "show", "-e", "journey", "--json").stdout)
    assert shown["spec"]["agent"]["type"] == "ppo" and shown["has_checkpoint"] and len(shown["recent_returns"]) == 10
    text = tfcli(root, "experiment", "show", "-e", "journey").stdout
    assert text.startswith(
        "Experiment   journey\nStatus       finished\nAgent        ppo (configs/agents/ppo_cartpole.json)"
    )
    assert "Environment  CartPole-v1 x 4" in text and "Progress     24,000 timesteps" in text and "(100%)" in text
    recent = ", ".join(short_return(value) for value in shown["recent_returns"])
    assert f"Recent       {recent}\n" in text and "Results      experiments/journey/results" in text


@pytest.mark.slow
def test_a_pause_right_after_start_pauses_and_the_run_resumes(project):
    experiment = Experiment(
        project, name="early", agent="ppo_cartpole", environment="cartpole", total_timesteps=2000, seed=0
    )
    experiment.generate_locally()
    experiment.start()
    record = experiment.pause()  # the worker's Python is still starting: its handlers are not installed yet
    assert record.status == "paused", experiment.log_tail()
    assert experiment.has_checkpoint() and experiment.checkpoint_timesteps() <= 2000
    experiment.start(resume=True)
    assert wait_until_done(experiment) == "finished", experiment.log_tail()
    assert experiment.progress()["timesteps"] >= 2000


@pytest.mark.slow
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


def test_a_finished_run_trained_longer_ends_as_one_run_of_the_longer_budget(cli_root):
    """``start --resume -t N`` on a finished run goes on from its final checkpoint to the new total: the same
    episodes and parameters as a run given that budget from the start; the new budget is the spec's."""
    project = Project(cli_root)
    for name, budget in (("short", "6000"), ("long", "12000")):
        made = tfcli(cli_root, "experiment", "new", "-n", name, *PPO, "-t", budget)
        assert made.returncode == 0, made.stderr
        started = tfcli(cli_root, "experiment", "start", "-e", name)
        assert started.returncode == 0, started.stderr
    short, long = (Experiment.load(project, name) for name in ("short", "long"))
    assert wait_until_done(short) == "finished" and wait_until_done(long) == "finished"
    assert short.checkpoint_timesteps() == 6000

    resumed = tfcli(cli_root, "experiment", "start", "-e", "short", "--resume", "-t", "12000")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.startswith("Resumed 'short'")
    assert wait_until_done(short) == "finished"

    short = Experiment.load(project, "short")
    assert short.spec["total_timesteps"] == 12000 and short.progress()["timesteps"] == 12000
    assert episodes(short) == episodes(long)
    expected, actual = final_parameters(long), final_parameters(short)
    assert expected.keys() == actual.keys()
    for name in expected:
        assert torch.equal(expected[name], actual[name]), name


def episode_scalars(summaries: Path) -> list[tuple[int, float]]:
    """The episode returns TensorBoard shows (it drops what a resumed run's ``purge_step`` purges)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(summaries), size_guidance={"scalars": 0})
    accumulator.Reload()
    return [(event.step, event.value) for event in accumulator.Scalars("episode/return")]


@pytest.mark.slow
def test_a_killed_worker_fails_and_resumes_as_an_uninterrupted_run_losing_at_most_a_saver_period(project):
    period = 6.0  # seconds: by timesteps a period would pass between two reads of the progress file
    common = dict(
        agent="ppo_cartpole",
        environment="cartpole",
        total_timesteps=80000,
        num_environments=4,
        seed=1,
        saver_frequency=f"{period:.0f}s",
    )
    straight = Experiment(project, name="straight", **common)
    crash = Experiment(project, name="crash", **common)
    for experiment in (straight, crash):
        experiment.generate_locally()
    straight.start()
    pid = crash.start()
    checkpoints = Checkpoints(crash.results / "checkpoints")

    def late_in_a_saver_period():  # 60-75% of a period after the last checkpoint: a quarter period to kill in
        latest = checkpoints.latest()
        return latest if latest and 0.6 * period <= time.time() - latest["saved_at"] <= 0.75 * period else None

    before = wait_for(late_in_a_saver_period, interval=0.01, what="a checkpoint, then most of a saver period")
    os.kill(pid, signal.SIGKILL)
    killed = time.time()
    assert crash.progress()["state"] == "running", "the run ended before the kill: give it a larger budget"
    record = wait_for(lambda: (r := crash.record()).status == "failed" and r, timeout=10, what="failed")
    assert "the worker died" in record.message and record.pid is None
    listed = json.loads(tfcli(project.root, "experiment", "list", "--json").stdout)
    assert {row["name"]: row["status"] for row in listed}["crash"] == "failed"

    restart = checkpoints.latest()
    assert restart == before  # the kill came late in that period, before the next checkpoint
    assert 0.6 * period <= killed - restart["saved_at"] <= period + 0.5  # so at most one saver period is lost
    assert crash.progress()["timesteps"] > restart["timesteps"]  # and that much work really is redone
    crash.start(resume=True)
    assert wait_until_done(crash) == "finished", crash.log_tail()
    assert wait_until_done(straight) == "finished", straight.log_tail()

    log = episodes(crash)
    assert [entry["episode"] for entry in log] == list(range(1, len(log) + 1))  # none lost, none repeated
    assert log == episodes(straight)  # the resumed run is the uninterrupted one
    expected, actual = final_parameters(straight), final_parameters(crash)
    for name in expected:
        assert torch.equal(expected[name], actual[name]), name
    # TensorBoard shows each step once: the resumed writer purged what the killed worker wrote after the checkpoint
    assert episode_scalars(crash.results / "summaries") == episode_scalars(straight.results / "summaries")


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


# simple_a3c's distributed workers take the run in chunks of 1,000 steps, so one worker takes a short run alone: its
# DQN updates a CNN on Atari frames every 4 steps (minutes in 1,000 steps here); 300 steps end 3 of its episodes
TIMESTEPS = {"simple_a3c": 300}


@pytest.mark.slow
@pytest.mark.parametrize("name", names("experiments"))
def test_every_shipped_experiment_runs_a_few_episodes(project, name):
    # episodes cut at 100 steps, so that every experiment ends some within 1,000 (a Pong game lasts longer)
    timesteps = TIMESTEPS.get(name, 1000)
    experiment = Experiment(
        project, file=name, name=name.replace("_", "-"), total_timesteps=timesteps, max_timesteps_per_episode=100
    )
    experiment.generate_locally()
    experiment.start(cluster="local")  # simple_a3c names 2018's GKE cluster; here it runs on this machine
    assert wait_until_done(experiment, timeout=300) == "finished", experiment.log_tail()
    progress = experiment.progress()
    assert progress["timesteps"] >= timesteps and progress["episodes"] >= 1


@pytest.mark.slow
def test_a_distributed_experiment_runs_pauses_and_resumes_on_a_private_ray_cluster(project):
    experiment = Experiment(
        project,
        name="ray",
        agent="vpg_cartpole",
        environment="cartpole",
        run_mode="distributed",
        num_workers=2,
        num_parameter_servers=2,
        total_timesteps=40000,
        seed=0,
        saver_frequency="2000t",
    )
    experiment.generate_locally()
    experiment.start()
    wait_for(progress_at_least(experiment, 2000), what="progress")
    assert experiment.pause().status == "paused", experiment.log_tail()
    paused_at = experiment.checkpoint_timesteps()
    assert paused_at >= 2000
    experiment.start(resume=True)
    wait_for(progress_at_least(experiment, paused_at + 4000), what="progress after resuming")
    # ray.init replaces the SIGTERM handler; the worker puts its own back, so stop still checkpoints
    assert experiment.stop(no_download=True).status == "stopped", experiment.log_tail()
    assert experiment.checkpoint_timesteps() >= paused_at + 4000
    log = episodes(experiment)
    assert {episode["worker"] for episode in log} == {0, 1}
    assert [episode["episode"] for episode in log] == list(range(1, len(log) + 1))
    assert "resumed from checkpoint" in (experiment.results / "worker.log").read_text()


@pytest.mark.slow
def test_a_multi_threaded_experiment_runs_pauses_and_resumes(project):
    experiment = Experiment(
        project,
        name="threads",
        agent="vpg_cartpole",
        environment="cartpole",
        run_mode="multi-threaded",
        num_workers=3,
        total_timesteps=40000,
        seed=0,
        saver_frequency="1000t",
    )
    experiment.generate_locally()
    experiment.start()
    wait_for(progress_at_least(experiment, 2000), what="progress")
    assert experiment.pause().status == "paused", experiment.log_tail()
    paused_at = experiment.checkpoint_timesteps()
    assert paused_at >= 2000
    experiment.start(resume=True)
    assert wait_until_done(experiment) == "finished", experiment.log_tail()
    log = episodes(experiment)
    assert {episode["worker"] for episode in log} == {0, 1, 2}
    assert [episode["episode"] for episode in log] == list(range(1, len(log) + 1))  # one history across the pause
    assert experiment.progress()["timesteps"] >= 40000 > paused_at


def shown_workers(project: Project, name: str) -> tuple[dict, dict[int, dict]]:
    """``experiment show --json``: the experiment's row and its workers' rows by worker."""
    shown = tfcli(project.root, "experiment", "show", "-e", name, "--json")
    assert shown.returncode == 0, shown.stderr
    row = json.loads(shown.stdout)
    return row, {worker["worker"]: worker for worker in row["workers"]}


@pytest.mark.slow
def test_a_multi_threaded_runs_worker_rows_count_the_whole_run_across_pauses(project):
    """Each worker's row counts its steps and episodes since the run began, earlier sessions' included, so the rows
    add up to the totals (they counted only the last session's); a checkpoint without the per-worker counts (saved
    before torchforce kept them) resumes with its counts shared out evenly among the workers."""
    experiment = Experiment(
        project,
        name="rows",
        agent="ppo_cartpole",
        environment="cartpole",
        run_mode="multi-threaded",
        num_workers=2,
        total_timesteps=40000,  # not reached before the second pause, even where a pause comes late
        seed=0,
        saver_frequency="1000t",
    )
    experiment.generate_locally()

    def adds_up() -> dict[int, dict]:
        row, workers = shown_workers(project, "rows")
        assert sorted(workers) == [0, 1], row["workers"]
        assert sum(worker["steps"] for worker in workers.values()) == row["timesteps"], row
        assert sum(worker["episodes"] for worker in workers.values()) == row["episodes"], row
        return workers

    experiment.start()
    wait_for(progress_at_least(experiment, 2000), what="progress")
    assert experiment.pause().status == "paused", experiment.log_tail()
    first = adds_up()
    experiment.start(resume=True)
    wait_for(progress_at_least(experiment, experiment.checkpoint_timesteps() + 2000), what="progress after resuming")
    assert experiment.pause().status == "paused", experiment.log_tail()
    second = adds_up()
    for index, worker in second.items():  # each worker went on from its own counts
        assert worker["steps"] > first[index]["steps"] and worker["episodes"] >= first[index]["episodes"]
    assert second[0]["steps"] + second[1]["steps"] == experiment.checkpoint_timesteps()
    # the checkpoint made as if by an earlier torchforce: without the per-worker counts
    checkpoint = experiment.results / "checkpoints" / Checkpoints(experiment.results / "checkpoints").latest()["folder"]
    record = json.loads((checkpoint / Checkpoints.RUNNER).read_text())
    runner = record["state"]["runner"]
    assert runner.pop("worker_timesteps") == [second[0]["steps"], second[1]["steps"]]
    assert runner.pop("worker_episodes") == [second[0]["episodes"], second[1]["episodes"]]
    (checkpoint / Checkpoints.RUNNER).write_text(json.dumps(record) + "\n")
    experiment.start(resume=True)
    assert wait_until_done(experiment) == "finished", experiment.log_tail()
    assert "resumed from checkpoint" in (experiment.results / "worker.log").read_text()
    last = adds_up()
    assert experiment.progress()["timesteps"] >= 40000
    assert all(worker["steps"] > 0 and worker["episodes"] > 0 for worker in last.values())


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_gke_cluster_in_the_spec_needs_a_link_or_runs_here_with_c_local(project):
    root = project.root
    created = tfcli(root, "experiment", "new", "-n", "clustered", *PPO, "-t", "400", "--cluster", "small_cluster")
    assert created.returncode == 0, created.stderr
    refused = tfcli(root, "experiment", "start", "-e", "clustered")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "runs on the GKE cluster 'small-cluster', but this project is not linked" in refused.stderr
    assert "tfcli gcloud link" in refused.stderr and "-c local" in refused.stderr
    assert project.store.experiment("clustered").status == "new" and project.store.clusters() == []
    started = tfcli(root, "experiment", "start", "-e", "clustered", "-c", "local", "--follow")
    assert started.returncode == 0, started.stderr
    assert started.stderr == ""
    listed = json.loads(tfcli(root, "experiment", "list", "--json").stdout)
    assert (listed[0]["cluster"], listed[0]["spec_cluster"]) == ("local", "small-cluster")
    table = tfcli(root, "experiment", "list").stdout
    assert table_row(table, "clustered")[5] == "local" and "small-cluster" not in table
    shown = tfcli(root, "experiment", "show", "-e", "clustered").stdout
    assert "Runs on      local (its spec names the cluster 'small-cluster'; this run is on this machine)" in shown


@pytest.mark.slow
def test_progress_is_complete_when_the_episode_limit_ends_the_run(project):
    root = project.root
    created = tfcli(root, "experiment", "new", "-n", "by-episodes", *PPO, "--episodes", "8", "-t", "100000")
    assert created.returncode == 0
    followed = tfcli(root, "experiment", "start", "-e", "by-episodes", "--follow")
    assert followed.returncode == 0 and "'by-episodes' is finished" in followed.stdout
    bars = [line for line in re.split(r"[\r\n]+", followed.stdout) if line.startswith("by-episodes: ")]
    assert "100%|" in bars[-1]  # the bar ends full, as list says
    listed = json.loads(tfcli(root, "experiment", "list", "--json").stdout)
    assert (listed[0]["episodes"], listed[0]["progress"]) == (8, 1.0) and listed[0]["timesteps"] < 100000
    assert table_row(tfcli(root, "experiment", "list").stdout, "by-episodes")[7] == "100%"


def test_the_worker_logs_progress_lines_and_debug_lines_when_asked(project):
    quiet = Experiment(project, name="quiet", agent="ppo_cartpole", environment="cartpole", total_timesteps=300)
    chatty = Experiment(
        project, name="chatty", agent="ppo_cartpole", environment="cartpole", total_timesteps=300, debug_logging=True
    )
    for experiment in (quiet, chatty):
        experiment.generate_locally()
        experiment.start()
    for experiment in (quiet, chatty):
        assert wait_until_done(experiment) == "finished", experiment.log_tail()
    progress_line = re.compile(r" INFO episode \d+, timesteps 300, \d+ steps/s, mean return \(last \d+\) -?[\d.]+\n")
    quiet_log, chatty_log = (e.results / "worker.log" for e in (quiet, chatty))
    assert progress_line.search(quiet_log.read_text()) and " DEBUG " not in quiet_log.read_text()
    assert (
        " DEBUG experiment spec: {" in chatty_log.read_text() and " DEBUG episode 1: return " in chatty_log.read_text()
    )
