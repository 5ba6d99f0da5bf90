"""The local queue (torchforce/client/queue.py): at most so many runs at once on this machine, the others ``queued``
and started first in first as slots free, by the worker that frees one (at its exit) or by the next command that
reads a status; promotion race-free across processes; stop, delete and pause of a queued run; a Ray job waiting for
CPUs shown as pending; the state database of the previous schema migrated with every row kept.

The runs are real detached workers of a random agent (no learning: the cheapest run there is), a few thousand
timesteps each, about a second."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.client.conftest import fake_worker, wait_for
from tests.client.test_bad_input import bad
from torchforce.client import ClientError, Experiment, Project, queue
from torchforce.client.cli import main
from torchforce.client.store import STATUSES, ExperimentRecord, Store

RANDOM = {"type": "random"}


def new(project: Project, name: str, timesteps: int = 3000) -> Experiment:
    experiment = Experiment(project, name=name, agent=RANDOM, environment="cartpole", total_timesteps=timesteps)
    experiment.generate_locally()
    return experiment


def rows(project: Project) -> dict[str, tuple[str, int | None]]:
    """Each experiment's status and PID, read straight from the database (which moves no queue on)."""
    return {record.name: (record.status, record.pid) for record in project.store.experiments()}


def holding_a_slot(project: Project, name: str, pid: int) -> None:
    """The experiment ``name`` running with the worker ``pid`` (a fake one), as a start would leave it."""
    assert project.store.update_experiment(name, status="running", pid=pid, started_at=time.time())


def most_at_once(records: list) -> int:
    """The most runs whose [started_at, ended_at] overlap at any moment (an end before a start at the same time)."""
    events = sorted([(r.started_at, 1) for r in records] + [(r.ended_at, -1) for r in records])
    most = running = 0
    for _, change in events:
        running += change
        most = max(most, running)
    return most


def cli(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------------------------------- runs in their turn


@pytest.mark.slow
def test_one_slot_three_starts_each_run_started_by_the_exit_of_the_one_before(project):
    queue.set_max_parallel(project, 1)
    runs = [new(project, name) for name in ("first", "second", "third")]
    handles = [run.start() for run in runs]
    assert isinstance(handles[0], int) and handles[1:] == [None, None]
    assert {name: status for name, (status, _) in rows(project).items()} == {
        "first": "running",
        "second": "queued",
        "third": "queued",
    }
    assert [run.place() for run in runs] == [None, queue.Place(1, 2, 1, 1), queue.Place(2, 2, 1, 1)]
    assert runs[2].place().describe() == "position 2 of 2; 1 running, at most 1 at once"

    # no command runs from here on (the database is only read): each worker's exit starts the next run
    wait_for(lambda: all(status == "finished" for status, _ in rows(project).values()), timeout=60, what="three runs")
    records = sorted(project.store.experiments(), key=lambda record: record.started_at)
    assert [record.name for record in records] == ["first", "second", "third"]  # first in, first out
    assert most_at_once(records) == 1
    for run, following in (("first", "second"), ("second", "third")):
        log = (project.experiment_folder(run) / "results" / "worker.log").read_text()
        assert f"INFO started from the queue: {following}\n" in log
    assert all(Experiment.load(project, run.name).progress()["timesteps"] == 3000 for run in runs)
    assert [record.queued_at for record in records] == [None, None, None]


@pytest.mark.slow
def test_a_crashed_worker_frees_its_slot_and_a_follower_waits_in_the_queue_then_follows(project):
    queue.set_max_parallel(project, 1)
    new(project, "crashing")
    new(project, "waiting", timesteps=1000)
    with fake_worker(project.experiment_folder("crashing")) as pid:
        holding_a_slot(project, "crashing", pid)
        follower = subprocess.Popen(
            [sys.executable, "-m", "torchforce", "experiment", "start", "-e", "waiting", "--follow"],
            cwd=project.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_for(lambda: rows(project)["waiting"][0] == "queued", timeout=30, what="the start to queue the run")
        time.sleep(1.0)  # the follower polls: it must not start the run while the slot is held
        assert rows(project)["waiting"] == ("queued", None)
    # the fake worker is killed without a word to the database: its row still says running
    out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    lines = out.splitlines()
    queued = "'waiting' is queued (position 1 of 1; 1 running, at most 1 at once)"
    assert lines[0].startswith(queued + ": it starts by itself when a run ends")
    assert lines[1] == queued  # --follow: shown while it waits
    assert lines[-1] == "'waiting' is finished"
    assert rows(project)["waiting"] == ("finished", None)


def test_stop_and_delete_take_a_queued_run_out_of_the_queue_and_pause_and_start_are_refused(project, capsys):
    queue.set_max_parallel(project, 1)
    for name in ("holder", "fresh", "plain", "doomed"):
        new(project, name)
    earlier = project.experiment_folder("fresh") / "results"
    earlier.mkdir()
    (earlier / "episodes.jsonl").write_text('{"episode": 1}\n')
    assert project.store.update_experiment("fresh", status="failed", message="it crashed", started_at=5.0, ended_at=6.0)
    with fake_worker(project.experiment_folder("holder")) as pid:
        holding_a_slot(project, "holder", pid)
        assert Experiment.load(project, "fresh").start(fresh=True) is None
        code, out, err = cli(capsys, "experiment", "start", "-e", "plain")
        assert code == 0 and out.startswith("'plain' is queued (position 2 of 2; 1 running, at most 1 at once)"), err
        assert Experiment.load(project, "doomed").start() is None
        listed = {row["name"]: row for row in json.loads(cli(capsys, "experiment", "list", "--json")[1])}
        assert [listed[name]["status"] for name in ("holder", "fresh", "plain", "doomed")] == ["running"] + [
            "queued"
        ] * 3
        assert listed["plain"]["queue"] == {"position": 2, "length": 3, "running": 1, "at_once": 1}
        assert listed["holder"]["queue"] is None
        shown = cli(capsys, "experiment", "show", "-e", "doomed")[1]
        assert "Status       queued (position 3 of 3; 1 running, at most 1 at once)\n" in shown
        assert " queued 1/3 " in cli(capsys, "experiment", "list")[1]

        err = bad(project.root, capsys, "experiment", "pause", "-e", "plain")
        assert "experiment 'plain' is queued (position 2 of 3; 1 running, at most 1 at once), not running" in err
        assert "'tfcli experiment stop -e plain' takes it out of the queue" in err
        err = bad(project.root, capsys, "experiment", "start", "-e", "plain")
        assert "experiment 'plain' is already queued (position 2 of 3;" in err

        code, out, _ = cli(capsys, "experiment", "stop", "-e", "fresh")
        assert (code, out) == (0, "'fresh' left the queue; it is failed again\n")
        record = project.store.experiment("fresh")  # as it was, and --fresh has discarded nothing
        assert (record.status, record.message, record.started_at, record.ended_at) == ("failed", "it crashed", 5, 6)
        assert (earlier / "episodes.jsonl").read_text() == '{"episode": 1}\n'
        assert cli(capsys, "experiment", "stop", "-e", "plain")[1] == "'plain' left the queue; it is new again\n"
        assert Experiment.load(project, "doomed").place() == queue.Place(1, 1, 1, 1)
        assert (
            cli(capsys, "experiment", "delete", "-e", "doomed")[1]
            == "Deleted experiment 'doomed' (it left the queue)\n"
        )
        assert not project.experiment_folder("doomed").exists()
    assert Experiment.load(project, "plain").record().status == "new"  # no queue left to start
    assert rows(project) == {"holder": ("running", pid), "fresh": ("failed", None), "plain": ("new", None)}


# ---------------------------------------------------------------------------------------------- promotion races

PROMOTER = """
import json, sys, threading, time
from torchforce.client import Project
from torchforce.client.experiment import Experiment
from torchforce.client.queue import promote

root, log, at = sys.argv[1], sys.argv[2], float(sys.argv[3])


class Started:  # the run's start, written down instead of launching a worker: its row stays running, no PID yet
    def __init__(self, name):
        self.name = name

    def start_from_queue(self, launch, queued=None):
        with open(log, "a") as file:
            file.write(self.name + "\\n")


Experiment.load = classmethod(lambda cls, project, name, damaged=False: Started(name))
started = []
def promoting():
    project = Project(root)
    while time.time() < at:
        time.sleep(0.001)
    started.extend(promote(project))
threads = [threading.Thread(target=promoting) for _ in range(3)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps(started))
"""


def promote_at_once(project: Project, log: Path, processes: int = 6) -> list[str]:
    """``promote`` in ``processes`` processes of three threads each, all at the same moment; the names started."""
    at = time.time() + 1.5
    launched = [
        subprocess.Popen(
            [sys.executable, "-c", PROMOTER, str(project.root), str(log), str(at)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    started = []
    for process in launched:
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        started += json.loads(out)
    return started


@pytest.mark.slow
def test_promoters_in_many_processes_start_each_run_once_and_never_more_than_the_limit(project, tmp_path):
    queue.set_max_parallel(project, 3)
    names = [f"run-{index:02d}" for index in range(10)]
    for index, name in enumerate(names):
        project.store.add_experiment(name)
        assert project.store.update_experiment(
            name, status="queued", queued_at=1000.0 + index, launch=queue.Queued().to_json()
        )
    log = tmp_path / "started.log"
    assert sorted(promote_at_once(project, log)) == names[:3]  # first in, first out; three slots
    assert log.read_text().splitlines().count("run-00") == 1 and len(log.read_text().splitlines()) == 3
    assert [rows(project)[name] for name in names[:4]] == [("running", None)] * 3 + [("queued", None)]

    # one run ends, one crashes (its worker is gone, its row still says running), one is still starting
    project.store.update_experiment("run-00", status="finished", ended_at=time.time())
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    project.store.update_experiment("run-01", pid=gone.pid)
    assert sorted(promote_at_once(project, log)) == ["run-03", "run-04"]
    assert len(log.read_text().splitlines()) == 5 == len(set(log.read_text().splitlines()))
    assert [rows(project)[name][0] for name in names] == ["finished"] + ["running"] * 4 + ["queued"] * 5


def test_the_limit_counts_cpus_without_a_setting_and_runs_with_one(project):
    single = {"run_mode": "single", "num_workers": 1}
    assert queue.cpus_per_run(single) == 1
    assert queue.cpus_per_run({**single, "vectorization": "subprocess", "num_environments": 6}) == 6
    assert queue.cpus_per_run({**single, "vectorization": "sync", "num_environments": 6}) == 1
    assert queue.cpus_per_run({"run_mode": "multi-threaded", "num_workers": 4}) == 4
    assert queue.cpus_per_run({"run_mode": "distributed", "num_workers": 3}) == 4
    # torch_threads: a CPU each thread that runs the agent; subprocess environments step while those threads wait
    assert queue.cpus_per_run({**single, "torch_threads": 3}) == 3
    assert queue.cpus_per_run({**single, "torch_threads": 3, "vectorization": "subprocess", "num_environments": 2}) == 3
    assert queue.cpus_per_run({**single, "torch_threads": 3, "vectorization": "subprocess", "num_environments": 6}) == 6
    assert queue.cpus_per_run({"run_mode": "multi-threaded", "num_workers": 4, "torch_threads": 2}) == 8
    assert queue.cpus_per_run({"run_mode": "distributed", "num_workers": 3, "torch_threads": 2}) == 7

    by_cpus = queue.Limit(None, 4)
    assert [by_cpus.admits([], 8), by_cpus.admits([1, 1, 1], 1), by_cpus.admits([1, 1, 1, 1], 1)] == [
        True,  # a run larger than the machine runs alone
        True,
        False,
    ]
    assert [by_cpus.admits([3], 1), by_cpus.admits([3], 2), by_cpus.at_once(1), by_cpus.at_once(3)] == [
        True,
        False,
        4,
        1,
    ]
    by_count = queue.Limit(2, 4)
    assert [by_count.admits([8], 8), by_count.admits([1, 1], 1), by_count.at_once(3)] == [True, False, 2]

    assert queue.limit(project) == queue.Limit(None, len(os.sched_getaffinity(0)))
    queue.set_max_parallel(project, 2)
    assert Project(project.root).settings["queue"] == {"max_parallel": 2}
    assert queue.limit(Project(project.root)) == queue.Limit(2, len(os.sched_getaffinity(0)))
    # a project loaded before the limit changed (a watch or a follow running meanwhile) sees the new one
    loaded = Project(project.root)
    queue.set_max_parallel(Project(project.root), 1)
    assert queue.limit(loaded) == queue.Limit(1, len(os.sched_getaffinity(0)))


def test_project_config_sets_and_shows_the_limit(project, capsys):
    settings = project.root / ".tfcli" / "project.json"
    settings.chmod(0o600)  # as a gcloud link leaves it: the change keeps it private
    cpus = len(os.sched_getaffinity(0))
    code, out, _ = cli(capsys, "project", "config")
    assert (code, out) == (
        0,
        f"Experiments on this machine: as many runs at once as fit {cpus} CPU{'s' * (cpus > 1)} (no project setting)\n",
    )
    assert cli(capsys, "project", "config", "--max-parallel", "3")[1] == (
        "Experiments on this machine: at most 3 runs at once (project setting)\n"
    )
    assert json.loads(settings.read_text())["queue"] == {"max_parallel": 3} and settings.stat().st_mode & 0o777 == 0o600
    cli(capsys, "project", "config", "--max-parallel", "auto")
    assert "queue" not in json.loads(settings.read_text())
    for value in ("0", "two", "-1"):
        err = bad(project.root, capsys, "project", "config", "--max-parallel", value)
        assert "argument --max-parallel: expected a whole number >= 1, got" in err

    settings.write_text(json.dumps({**json.loads(settings.read_text()), "queue": {"max_parallel": "4"}}))
    with pytest.raises(ClientError, match=r"damaged 'queue': expected \{\"max_parallel\": N\}"):
        queue.limit(Project(project.root))


def test_promotion_with_a_start_that_fails_puts_the_run_back_and_the_queue_moves_on(project):
    queue.set_max_parallel(project, 1)
    new(project, "holder")
    resumed = new(project, "resumed")
    follower = new(project, "follower", timesteps=500)
    with fake_worker(project.experiment_folder("holder")) as pid:
        holding_a_slot(project, "holder", pid)
        latest = resumed.results / "checkpoints" / "latest.json"
        latest.parent.mkdir(parents=True)
        latest.write_text('{"timesteps": 100, "folder": "100"}')
        project.store.update_experiment("resumed", status="paused", started_at=7.0)
        assert resumed.start(resume=True) is None
        assert follower.start() is None
        latest.unlink()  # removed while it waited: it cannot resume
    with pytest.warns(Warning, match="experiment 'resumed' did not start from the queue: .*no checkpoint to resume"):
        assert follower.record().status in ("running", "finished")
    record = project.store.experiment("resumed")
    assert (record.status, record.started_at, record.pid) == ("paused", 7.0, None)
    assert record.message.startswith("the queued start failed: experiment 'resumed' has no checkpoint to resume")


# ---------------------------------------------------------------------------------------------- a start cut short
# A Ctrl-C (or an error) between the start's taking its slot and its recording the worker's PID: the slot was held by
# a row running with no worker (until judged dead, then 'failed'), or a worker ran that the database did not know.


def interrupted_start(capsys: pytest.CaptureFixture, name: str) -> None:
    code, out, err = cli(capsys, "experiment", "start", "-e", name)
    assert (code, out, err) == (130, "", "tfcli: interrupted\n")


def test_a_start_cut_once_its_slot_is_taken_gives_the_slot_back(project, capsys, monkeypatch):
    queue.set_max_parallel(project, 1)
    new(project, "cut")
    new(project, "next")
    admit = queue.admit

    def admitted_then_cut(*args, **kwargs):
        assert admit(*args, **kwargs) is None  # the slot is taken (committed), then the Ctrl-C arrives
        raise KeyboardInterrupt

    monkeypatch.setattr(queue, "admit", admitted_then_cut)
    interrupted_start(capsys, "cut")
    monkeypatch.undo()
    assert rows(project)["cut"] == ("new", None)  # as before the start: no slot held, nothing to judge dead
    assert isinstance(Experiment.load(project, "next").start(), int)  # the slot is free: not queued


def test_a_start_cut_as_its_worker_spawns_stops_the_worker_and_gives_the_slot_back(project, capsys, monkeypatch):
    from torchforce.client.backends import local

    queue.set_max_parallel(project, 1)
    new(project, "cut")
    spawned = []
    popen = local.subprocess.Popen

    def pressed_while_spawning(*args, **kwargs):
        spawned.append(popen(*args, **kwargs))
        os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C as the worker spawns, which this or another thread takes
        return spawned[-1]

    monkeypatch.setattr(local.subprocess, "Popen", pressed_while_spawning)
    # a Ctrl-C is tfcli's KeyboardInterrupt: an earlier test of this process (an in-process worker, a sweep driver)
    # may have left a handler of its own for SIGINT
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        interrupted_start(capsys, "cut")
    finally:
        signal.signal(signal.SIGINT, previous)
    monkeypatch.undo()
    (worker,) = spawned
    assert worker.poll() is not None  # stopped, not left running where no row names it
    assert rows(project)["cut"] == ("new", None)
    assert isinstance(Experiment.load(project, "cut").start(), int)  # started again: nothing holds its slot


def test_a_start_cut_before_it_recorded_its_worker_records_it(project, capsys, monkeypatch):
    queue.set_max_parallel(project, 1)
    new(project, "cut", timesteps=500)
    record_handle = Experiment._record_handle
    calls = []

    def cut_once(self, handle, backend):
        calls.append(handle)
        if len(calls) == 1:  # the Ctrl-C arrives before the PID is written
            raise KeyboardInterrupt
        record_handle(self, handle, backend)

    monkeypatch.setattr(Experiment, "_record_handle", cut_once)
    interrupted_start(capsys, "cut")
    monkeypatch.undo()
    pid = calls[0]
    assert rows(project)["cut"] == ("running", pid)  # the worker that runs is the one the row names
    wait_for(lambda: Experiment.load(project, "cut").record().status == "finished", timeout=60, what="the run")


def queued_behind_a_holder(project: Project) -> ExperimentRecord:
    """'first' and 'second' queued behind 'holder', whose worker has ended since: the row of 'first'."""
    queue.set_max_parallel(project, 1)
    for name in ("holder", "first", "second"):
        new(project, name)
    with fake_worker(project.experiment_folder("holder")) as pid:
        holding_a_slot(project, "holder", pid)
        assert Experiment.load(project, "first").start() is None
        assert Experiment.load(project, "second").start() is None
        before = project.store.experiment("first")
    assert before is not None and before.status == "queued"
    return before


def still_first_in_the_queue(project: Project, before: ExperimentRecord) -> None:
    after = project.store.experiment("first")
    assert after is not None
    kept = ("status", "pid", "job", "started_at", "ended_at", "queued_at", "launch", "message")
    assert [getattr(after, key) for key in kept] == [getattr(before, key) for key in kept]  # its place, not 'running'
    assert [record.name for record in queue.waiting(project.store.experiments())] == ["first", "second"]


def test_a_promotion_cut_before_its_start_puts_the_run_back_at_the_head_of_the_queue(project, monkeypatch):
    before = queued_behind_a_holder(project)

    def cut(self, choices, queued=None):  # the Ctrl-C of the list or watch that promotes, once the slot is taken
        raise KeyboardInterrupt

    monkeypatch.setattr(Experiment, "start_from_queue", cut)
    with pytest.raises(KeyboardInterrupt):
        queue.promote(project)
    monkeypatch.undo()
    still_first_in_the_queue(project, before)
    assert queue.promote(project) == ["first"]  # the slot was given back: the head of the queue starts next
    assert rows(project)["first"][0] == "running"


def test_a_promotion_cut_as_its_launch_runs_keeps_the_run_in_the_queue(project, monkeypatch):
    from torchforce.client.backends.local import LocalBackend

    before = queued_behind_a_holder(project)

    def cut(self, folder, project_root, launch):  # a Ctrl-C while the launch runs (a download, the spawn)
        raise KeyboardInterrupt

    monkeypatch.setattr(LocalBackend, "start", cut)
    with pytest.raises(KeyboardInterrupt):
        queue.promote(project)
    monkeypatch.undo()
    still_first_in_the_queue(project, before)

    def fails(self, folder, project_root, launch):  # a start that fails, not a Ctrl-C: out of the queue, as before
        raise ClientError("no room on the disk")

    monkeypatch.setattr(LocalBackend, "start", fails)
    with pytest.warns(Warning) as warned:
        queue.promote(project)
    monkeypatch.undo()
    said = [str(warning.message) for warning in warned]
    assert [text.split(":")[0] for text in said] == [
        f"experiment '{name}' did not start from the queue" for name in ("first", "second")
    ]
    assert all("no room on the disk" in text for text in said)
    assert rows(project)["first"] == rows(project)["second"] == ("new", None)


# ---------------------------------------------------------------------------------------------- a Ray cluster


def test_a_ray_job_waiting_for_cpus_shows_pending_cannot_pause_and_stops(project, capsys, monkeypatch, tmp_path):
    from torchforce.client.backends.ray import RayBackend

    storage = tmp_path / "storage"
    project.store.add_cluster(
        "far",
        {"type": "ray", "name": "far", "address": "127.0.0.1:9", "storage": str(storage)},
        "attached",
        {"dashboard": "http://127.0.0.1:9", "storage": str(storage)},
    )
    new(project, "waiting")
    project.store.update_experiment(
        "waiting", status="running", backend="ray", cluster="far", job="tfcli-waiting-1", started_at=time.time()
    )
    jobs = {"tfcli-waiting-1": "PENDING"}

    class Jobs:  # the cluster's Jobs client: stopping a pending job ends it STOPPED
        def stop_job(self, job: str) -> None:
            jobs[job] = "STOPPED"

    monkeypatch.setattr(RayBackend, "job_status", lambda self, handle, fresh=False: jobs.get(handle))
    monkeypatch.setattr(RayBackend, "client", property(lambda self: Jobs()))
    (row,) = json.loads(cli(capsys, "experiment", "list", "--json")[1])
    assert (row["status"], row["queue"]) == ("pending", None)
    assert (
        "Status       pending (its Ray job waits for the CPUs it asked for)\n"
        in cli(capsys, "experiment", "show", "-e", "waiting")[1]
    )
    err = bad(project.root, capsys, "experiment", "pause", "-e", "waiting")
    assert "its Ray job tfcli-waiting-1 waits for the CPUs it asked for on the cluster 'far'" in err

    code, out, err = cli(capsys, "experiment", "stop", "-e", "waiting", "--no-download")
    assert (code, out) == (0, "'waiting' is stopped\n"), err
    assert jobs == {"tfcli-waiting-1": "STOPPED"}
    record = project.store.experiment("waiting")
    assert (record.status, record.message) == (
        "stopped",
        "stopped before it started (its Ray job waited for the CPUs it asked for)",
    )


# ---------------------------------------------------------------------------------------------- the state database

PREVIOUS_SCHEMA = """
CREATE TABLE experiments (
    name        TEXT PRIMARY KEY,
    status      TEXT NOT NULL CHECK (status IN ('new', 'running', 'paused', 'stopped', 'finished', 'failed')),
    backend     TEXT NOT NULL DEFAULT 'local',
    cluster     TEXT,
    pid         INTEGER,
    job         TEXT,
    message     TEXT,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL,
    started_at  REAL,
    ended_at    REAL
);
CREATE TABLE clusters (
    name        TEXT PRIMARY KEY,
    spec        TEXT NOT NULL,
    status      TEXT NOT NULL,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL
);
"""


def previous_database(path: Path, *, without_job: bool = False) -> list[tuple]:
    """A database as the previous torchforce made it (``without_job``: as one before that), a row in every status
    it knew; the rows."""
    schema = PREVIOUS_SCHEMA.replace("    job         TEXT,\n", "") if without_job else PREVIOUS_SCHEMA
    old = ["new", "running", "paused", "stopped", "finished", "failed"]
    rows = [
        (
            f"run-{status}",
            status,
            "ray" if status == "paused" else "local",
            "far" if status == "paused" else None,
            4321 if status == "running" else None,
            f"message {index}",
            100.0 + index,
            200.0 + index,
            300.0 + index,
            None,
        )
        for index, status in enumerate(old)
    ]
    with sqlite3.connect(path) as connection:
        connection.executescript(schema)
        columns = "name, status, backend, cluster, pid, message, created_at, updated_at, started_at, ended_at"
        connection.executemany(f"INSERT INTO experiments ({columns}) VALUES ({', '.join('?' * 10)})", rows)
        connection.execute(
            "INSERT INTO clusters VALUES ('far', '{\"spec\": {}, \"runtime\": {}}', 'attached', 1.0, 2.0)"
        )
    connection.close()
    return rows


@pytest.mark.parametrize("without_job", [False, True])
def test_a_database_of_the_previous_schema_is_migrated_keeping_every_row(tmp_path, without_job):
    path = tmp_path / "state.db"
    rows = previous_database(path, without_job=without_job)
    opened: list[Store] = []
    errors: list[BaseException] = []

    def open_it() -> None:  # several processes' worth of first opens at once: one migrates, none fails
        try:
            opened.append(Store(path))
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=open_it) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(opened) == 8
    store = opened[0]
    kept = [
        (r.name, r.status, r.backend, r.cluster, r.pid, r.message, r.created_at, r.updated_at, r.started_at, r.ended_at)
        for r in store.experiments()
    ]
    assert kept == rows
    assert [(r.job, r.queued_at, r.launch) for r in store.experiments()] == [(None, None, None)] * 6
    assert [cluster.name for cluster in store.clusters()] == ["far"]
    assert store.check() == "ok"
    assert store.update_experiment("run-new", expect=("new",), status="queued", queued_at=1.0, launch="{}")
    assert store.experiment("run-new").status == "queued"
    with sqlite3.connect(path) as connection, pytest.raises(sqlite3.IntegrityError, match="CHECK constraint"):
        connection.execute("UPDATE experiments SET status = 'sleeping' WHERE name = 'run-new'")
    assert sorted(name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")) == [
        "clusters",
        "experiments",
    ]
    connection.close()
    assert Store(path).experiments() == store.experiments()  # migrated once: opening it again changes nothing
    assert STATUSES == ("new", "queued", "running", "paused", "stopped", "finished", "failed")


def test_a_first_open_answered_busy_at_once_is_tried_again_until_the_timeout(tmp_path, monkeypatch):
    from torchforce.client import store as store_module

    answers = iter([sqlite3.OperationalError("database is locked")] * 2)
    migrate = store_module._migrate

    def busy_twice(connection):  # SQLite's busy answer without waiting, as two first opens at once can get
        error = next(answers, None)
        if error is not None:
            raise error
        migrate(connection)

    monkeypatch.setattr(store_module, "_migrate", busy_twice)
    Store(tmp_path / "state.db")
    assert next(answers, None) is None  # both busy answers were met, and the third try opened it
    answers = iter([sqlite3.OperationalError("database is locked")] * 1000)
    with pytest.raises(ClientError, match="is busy"):
        Store(tmp_path / "other.db", timeout=0.2)  # busy past the timeout: the error that says who holds it
    answers = iter([sqlite3.OperationalError("no such column: foo")])
    with pytest.raises(ClientError, match="cannot be used"):
        Store(tmp_path / "third.db")  # any other error at once


@pytest.mark.parametrize(
    "launch",
    ['{"cpus": "2", "before": []}', '{"cpus": -3, "resume": 1}', "[1, 2]", "{not json", '{"max_restarts": true}'],
)
def test_a_damaged_launch_keeps_each_bad_field_at_its_default(launch):
    """A row's ``launch`` another program or a damaged disk wrote: the queue goes on with the defaults (one CPU, no
    earlier state), where sums and lookups over it failed every status-reading command."""
    record = ExperimentRecord("x", "running", launch=launch)
    kept = queue.Queued.of(record)
    assert kept.cpus == 1 and kept.before == {} and kept.resume is False and kept.max_restarts == 0
    assert kept.previous(record).status == "new"
    assert queue.Queued.of(ExperimentRecord("y", "running", launch='{"cpus": 2, "resume": true}')) == queue.Queued(
        resume=True, cpus=2
    )


def test_a_start_judged_dead_before_its_worker_spawned_and_taken_over_starts_nothing(project, monkeypatch):
    """A start whose preparations (a checkpoint downloaded, results removed) outlast the grace period is judged
    dead, and another start claims the run: the first one must not spawn a second worker into the same folder."""
    from torchforce.client.backends.local import LocalBackend

    experiment = new(project, "slow")
    spawned = []
    monkeypatch.setattr(LocalBackend, "start", lambda self, *args, **kwargs: spawned.append(1) or 12345)
    retire = Experiment._retire

    def taken_over_meanwhile(self, previous):  # what another tfcli did during this start's preparations
        retire(self, previous)
        assert project.store.update_experiment("slow", status="failed", message="the worker died")
        assert project.store.update_experiment("slow", status="running", message=None, started_at=time.time() + 1)

    monkeypatch.setattr(Experiment, "_retire", taken_over_meanwhile)
    with pytest.raises(ClientError, match="was judged dead meanwhile, and another start took it over"):
        experiment.start(fresh=True)
    assert spawned == []
    record = project.store.experiment("slow")
    assert record.status == "running" and record.pid is None  # the other start's claim, left as it was


@pytest.mark.slow
def test_a_queued_start_with_a_new_budget_writes_it_when_it_leaves_the_queue(project):
    queue.set_max_parallel(project, 1)
    trained, other = new(project, "trained"), new(project, "other")
    trained.start()
    wait_for(lambda: trained.record().status == "finished", timeout=60, what="the first run")
    spec_file = trained.folder / "experiment.json"
    with fake_worker(other.folder) as pid:
        holding_a_slot(project, "other", pid)
        assert trained.start(resume=True, budget={"total_timesteps": 6000}) is None  # queued behind 'other'
        assert json.loads(spec_file.read_text())["total_timesteps"] == 3000  # not while it waits
        assert trained.stop().status == "finished"  # out of the queue: as it was, budget and all
        assert json.loads(spec_file.read_text())["total_timesteps"] == 3000
        assert trained.start(resume=True, budget={"total_timesteps": 6000}) is None
    # the fake worker is gone: its slot goes to the queued start, which extends the finished run
    wait_for(lambda: trained.record().status == "finished" and trained.progress()["timesteps"] == 6000, timeout=60)
    assert json.loads(spec_file.read_text())["total_timesteps"] == 6000
    log = (trained.results / "worker.log").read_text()
    assert "resumed from checkpoint" in log and "running trained: 3,000 more timesteps" in log
