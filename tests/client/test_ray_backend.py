"""The Ray backend end to end, on one real 2-node Ray cluster on 127.0.0.1 that ``tfcli cluster create`` starts for
the module (the tests share it: ``xdist_group`` keeps them on one test worker) and ``tfcli cluster delete`` ends.

Experiments run as Ray jobs of the worker: started, paused, resumed, finished, downloaded, plotted; a worker actor
killed with ``kill -9`` is restarted; a killed driver resumes with ``--max-restarts``; bad input is refused with
exit code 2 and changes nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from functools import partial
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from tests.client.conftest import tfcli, wait_for  # noqa: E402
from torchforce.client import Experiment, Project  # noqa: E402
from torchforce.client import ray_cluster as clusters  # noqa: E402
from torchforce.client.backends.ray import RayBackend  # noqa: E402
from torchforce.execution.proc import is_loopback, listening_sockets, pid_alive  # noqa: E402
from torchforce.execution.ray_cluster import cluster_processes  # noqa: E402

pytestmark = [pytest.mark.xdist_group("ray-client"), pytest.mark.slow]
CLUSTER = "ray_local"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory):
    """A project with the shipped ray_local cluster started (2 nodes of 1 CPU); deleted at the end, and checked
    to leave no process of its own behind."""
    root = tmp_path_factory.mktemp("ray-project") / "project"
    root.mkdir()
    project, _ = Project.init(root)
    created = tfcli(root, "cluster", "create", "-f", CLUSTER, "--cpus", "1", timeout=180)
    assert created.returncode == 0, created.stderr
    record = project.store.cluster(CLUSTER)
    processes = cluster_processes(clusters.local_handle(record))
    assert len(record.runtime["pids"]) == 2 and processes
    try:
        yield project
    finally:
        processes |= cluster_processes(clusters.local_handle(record))
        deleted = tfcli(root, "cluster", "delete", "-c", CLUSTER, "--force", timeout=120)
        assert deleted.returncode == 0, deleted.stderr
        assert [pid for pid in processes if pid_alive(pid)] == []
        assert project.store.cluster(CLUSTER) is None


def new(project: Project, name: str, *flags: str, agent: str = "vpg_cartpole") -> Experiment:
    result = tfcli(project.root, "experiment", "new", "-n", name, "-A", agent, "-E", "cartpole", *flags)
    assert result.returncode == 0, result.stderr
    return Experiment.load(project, name)


def episodes(experiment: Experiment) -> list[dict]:
    return [json.loads(line) for line in (experiment.results / "episodes.jsonl").read_text().splitlines()]


def progress_at_least(experiment: Experiment, timesteps: int):
    return lambda: experiment.progress().get("timesteps", 0) >= timesteps


def wait_until_done(experiment: Experiment, timeout: float = 240.0) -> str:
    return wait_for(lambda: (r := experiment.record()).status != "running" and r, timeout, 0.3, "the job to end").status


def test_the_cluster_is_listed_live_and_listens_on_loopback_only(project):
    listed = tfcli(project.root, "cluster", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (cluster,) = json.loads(listed.stdout)["clusters"]
    assert (cluster["name"], cluster["state"], cluster["nodes"], cluster["cpus"]) == (CLUSTER, "alive", 2, 2)
    sockets = listening_sockets(cluster_processes(clusters.local_handle(project.store.cluster(CLUSTER))))
    assert sockets, "the cluster's processes listen somewhere"
    assert [s for s in sockets if not is_loopback(s[0])] == []


def test_a_distributed_experiment_pauses_resumes_finishes_and_downloads(project):
    distributed = ["--run-mode", "distributed", "--num-workers", "2", "--num-parameter-servers", "1"]
    experiment = new(
        project, "dist", *distributed, "-t", "16000", "-N", "2", agent="dqn_cartpole"
    )  # learns at every step: slow enough to be paused on the way, even on a loaded machine
    started = tfcli(project.root, "experiment", "start", "-e", "dist", "-c", CLUSTER)
    assert started.returncode == 0 and "Ray job" in started.stdout, started.stderr
    assert experiment.record().backend == "ray" and experiment.record().job
    wait_for(progress_at_least(experiment, 2000), timeout=180, what="progress")
    running = cluster_processes(clusters.local_handle(project.store.cluster(CLUSTER)))  # driver, servers, workers
    assert [s for s in listening_sockets(running) if not is_loopback(s[0])] == []
    paused = tfcli(project.root, "experiment", "pause", "-e", "dist")
    assert paused.returncode == 0, paused.stderr + experiment.log_tail()
    assert experiment.record().status == "paused"
    paused_at = experiment.checkpoint_timesteps()
    assert 2000 <= paused_at < 16000
    checkpoint = json.loads(experiment.storage().read_text("checkpoints/latest.json"))
    workers = Path(experiment.storage().local) / "checkpoints" / checkpoint["folder"] / "workers"
    assert sorted(path.name for path in workers.glob("*.pt")) == ["worker-0.pt", "worker-1.pt"]  # every Ray worker
    resumed = tfcli(project.root, "experiment", "start", "-e", "dist", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert wait_until_done(experiment) == "finished", experiment.log_tail()
    assert tfcli(project.root, "experiment", "download", "-e", "dist").returncode == 0
    log = episodes(experiment)
    assert [episode["episode"] for episode in log] == list(range(1, len(log) + 1))
    assert {episode["worker"] for episode in log} == {0, 1}
    assert log[-1]["timesteps"] <= 16000 <= experiment.progress()["timesteps"]
    assert "resumed from checkpoint" in experiment.logs()
    # the workers find the servers by name: Ray has no reference among their arguments to warn about (ray#53727)
    assert "constructor arguments in the object store" not in experiment.logs()
    shown = tfcli(project.root, "experiment", "show", "-e", "dist", "--json")
    rows = json.loads(shown.stdout)["workers"]
    assert [row["worker"] for row in rows] == [0, 1] and all(row["steps"] > 0 for row in rows)
    plotted = tfcli(project.root, "experiment", "plot", "-e", "dist")
    assert plotted.returncode == 0 and Path(plotted.stdout.split(": ")[-1].strip()).is_file(), plotted.stderr


def test_the_same_spec_runs_in_single_mode_here_and_on_the_cluster(project):
    spec = project.root / "single.json"
    spec.write_text(json.dumps({"agent": "vpg_cartpole", "environment": "cartpole", "total_timesteps": 1500}))
    for name, cluster in (("here", "local"), ("there", CLUSTER)):
        assert tfcli(project.root, "experiment", "new", "-f", str(spec), "-n", name).returncode == 0
        experiment = Experiment.load(project, name)
        experiment.start(cluster=cluster)
        assert wait_until_done(experiment) == "finished", experiment.log_tail()
        experiment.download()
        assert experiment.progress()["timesteps"] >= 1500 and episodes(experiment)
    assert Experiment.load(project, "there").record().backend == "ray"
    assert Experiment.load(project, "here").record().backend == "local"
    followed = tfcli(project.root, "experiment", "logs", "-e", "there", "--follow")  # the job's log, to its end
    assert followed.returncode == 0 and "experiment there finished" in followed.stdout, followed.stderr


def test_a_warm_start_travels_to_the_cluster_with_the_spec(project):
    """The checkpoint a warm start begins from is uploaded with experiment.json into the run's folder, where the
    job's worker reads it: a run shorter than its first update ends with the source's networks."""
    import torch

    from tests.client.test_lifecycle import final_parameters

    source = new(project, "warm-source", "-t", "1500", agent="vpg_cartpole")
    source.start()
    assert wait_until_done(source) == "finished", source.log_tail()
    warm = new(project, "warm", "-t", "100", "--warm-start", "warm-source", agent="vpg_cartpole")
    warm.start(cluster=CLUSTER)
    assert wait_until_done(warm) == "finished", warm.log_tail()
    assert "warm start from warm-source, latest checkpoint" in warm.logs()
    warm.download()
    expected, actual = final_parameters(source), final_parameters(warm)
    assert expected.keys() == actual.keys() and all(torch.equal(expected[k], actual[k]) for k in expected)


def test_an_attached_cluster_with_file_storage_runs_stops_and_downloads(project, tmp_path):
    """Attach to the running cluster as to someone else's (its Jobs address and token, results on a file:// URI),
    run a multi-threaded experiment there (one worker thread: a node here has one CPU) and stop it: it checkpoints,
    and stop downloads the results."""
    record = project.store.cluster(CLUSTER)
    address = record.runtime["dashboard"].removeprefix("http://")
    storage = f"file://{tmp_path / 'shared'}"
    environment = {**os.environ, "RAY_AUTH_TOKEN_PATH": record.runtime["token"]}
    attach = ["cluster", "create", "-f", "ray_remote", "-n", "lab", "--address", address, "--storage", storage]
    attached = subprocess.run(
        [sys.executable, "-m", "torchforce", *attach],
        cwd=project.root,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert attached.returncode == 0 and "Attached" in attached.stdout, attached.stderr
    experiment = new(project, "threads", "--run-mode", "multi-threaded", "--num-workers", "1", "-t", "200000")
    experiment.start(cluster="lab")
    assert experiment.storage().location.startswith(storage)
    wait_for(progress_at_least(experiment, 2000), timeout=180, what="progress")
    assert len(experiment.progress()["workers"]) == 1
    stopped = tfcli(project.root, "experiment", "stop", "-e", "threads")
    assert stopped.returncode == 0, stopped.stderr + experiment.log_tail()
    assert experiment.record().status == "stopped" and experiment.checkpoint_timesteps() >= 2000
    assert (tmp_path / "shared" / project.name / "threads" / "results" / "checkpoints" / "latest.json").is_file()
    assert (experiment.results / "checkpoints" / "latest.json").is_file()  # stop downloaded them
    forgotten = tfcli(project.root, "cluster", "delete", "-c", "lab")
    assert forgotten.returncode == 0 and "Forgot" in forgotten.stdout
    assert project.store.cluster(CLUSTER) is not None  # the cluster itself runs on


def ray_worker_pids(project: Project) -> list[int]:
    """The processes of the cluster that are the DistributedRunner's worker actors."""
    found = []
    for pid in cluster_processes(clusters.local_handle(project.store.cluster(CLUSTER))):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if command.startswith("ray::Worker"):
            found.append(pid)
    return found


def test_a_killed_worker_actor_is_restarted_and_the_run_finishes(project):
    experiment = new(project, "fault", "--run-mode", "distributed", "--num-workers", "2", "-t", "30000")
    experiment.start(cluster=CLUSTER)
    wait_for(progress_at_least(experiment, 2000), timeout=180, what="progress")
    victims = wait_for(lambda: ray_worker_pids(project), timeout=30, what="the worker actors")
    os.kill(victims[0], signal.SIGKILL)
    assert wait_until_done(experiment) == "finished", experiment.log_tail()
    experiment.download()
    log = episodes(experiment)
    assert [episode["episode"] for episode in log] == list(range(1, len(log) + 1))
    shown = json.loads(tfcli(project.root, "experiment", "show", "-e", "fault", "--json").stdout)
    assert sum(row["restarts"] for row in shown["workers"]) == 1
    assert "was lost" in experiment.logs()


def test_a_killed_driver_resumes_with_max_restarts_and_fails_without(project):
    for name, restarts in (("driver", "1"), ("driver-once", "0")):
        experiment = new(project, name, "-t", "15000", "--seed", "1")
        spec = json.loads((experiment.folder / "experiment.json").read_text())
        (experiment.folder / "experiment.json").write_text(json.dumps({**spec, "saver_frequency": "1000t"}))
        experiment = Experiment.load(project, name)
        experiment.start(cluster=CLUSTER, max_restarts=int(restarts))
        wait_for(lambda e=experiment: e.checkpoint_timesteps() >= 1000, timeout=120, what="a checkpoint")
        running = wait_for(lambda e=experiment: e.progress().get("pid"), timeout=30, what="the driver's PID")
        os.kill(running, signal.SIGKILL)
        status = wait_until_done(experiment)
        if restarts == "1":
            assert status == "finished", experiment.log_tail()
            assert experiment.progress()["restarts"] == 1
        else:
            assert status == "failed"
            assert "ended FAILED; its log ends:" in experiment.record().message
            experiment.start(resume=True)  # by hand: from the last checkpoint, on the cluster it ran on
            assert wait_until_done(experiment) == "finished", experiment.log_tail()
            assert experiment.record().cluster == CLUSTER


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["experiment", "start", "-e", "bad", "-c", "nope"], "no cluster named 'nope'"),
        (["experiment", "start", "-e", "bad", "-c", "gone"], "does not answer"),
        (["experiment", "start", "-e", "wide", "-c", CLUSTER], "needs 5 CPUs"),
        (["experiment", "start", "-e", "threaded", "-c", CLUSTER], "needs 3 CPUs"),  # --torch-threads 3
        (["experiment", "start", "-e", "two-threads", "-c", CLUSTER], "asks for 2 CPUs on one node for its job"),
        (  # a worker thread of the multi-threaded mode is a CPU at least: two are more than these nodes have
            ["experiment", "start", "-e", "two-workers", "-c", CLUSTER],
            "asks for 2 CPUs on one node for its job (2 worker threads x torch_threads)",
        ),
        (["cluster", "create", "-f", "ray_remote", "-n", "far", "--address", "127.0.0.1:9"], "no Ray cluster answers"),
        (["cluster", "create", "-f", CLUSTER], "exists already"),
        (["cluster", "delete", "-c", "nope"], "no cluster named 'nope'"),
    ],
)
def test_bad_cluster_input_is_refused_and_changes_nothing(project, arguments, message):
    if project.store.experiment("bad") is None:
        new(project, "bad", "-t", "1000")
        new(project, "wide", "--run-mode", "distributed", "--num-workers", "5", "-t", "1000")
        new(project, "threaded", "--torch-threads", "3", "-t", "1000")
        new(project, "two-threads", "--torch-threads", "2", "-t", "1000")
        new(project, "two-workers", "--run-mode", "multi-threaded", "--num-workers", "2", "-t", "1000")
        project.store.add_cluster(
            "gone",
            {"type": "ray", "name": "gone", "address": "127.0.0.1:9", "storage": "/tmp"},
            "attached",
            {"dashboard": "http://127.0.0.1:9", "storage": "/tmp"},
        )
    before = (project.store.experiments(), project.store.clusters())
    result = tfcli(project.root, *arguments)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert (project.store.experiments(), project.store.clusters()) == before


def test_a_job_asks_for_a_cpu_per_torch_thread_and_a_waiting_one_keeps_its_stop(project, monkeypatch):
    """Two worker threads of two torch threads each ask Ray for 4 CPUs on one node. This cluster of two 1-CPU nodes
    has none such, and start refuses the run (the bad-input test); let past that check, the real job waits as
    PENDING, where Ray does not stop a job (ray-project/ray#58353): stop says so within seconds instead of waiting,
    and the run keeps its request."""
    from ray.job_submission import JobSubmissionClient

    from torchforce.client import ClientError

    asked: list[dict] = []
    submit = JobSubmissionClient.submit_job

    def recorded(self: JobSubmissionClient, **kwargs: object) -> str:
        asked.append(kwargs)
        return submit(self, **kwargs)

    monkeypatch.setattr(JobSubmissionClient, "submit_job", recorded)
    monkeypatch.setattr(RayBackend, "check", lambda self, spec: None)
    experiment = new(
        project, "waits", "--run-mode", "multi-threaded", "--num-workers", "2", "--torch-threads", "2", "-t", "1000"
    )
    experiment.start(cluster=CLUSTER)
    (submitted,) = asked
    assert submitted["entrypoint_num_cpus"] == 4
    handle = experiment.record().job
    backend = RayBackend(project, CLUSTER)
    time.sleep(10)  # a job of one thread runs here within seconds (the other tests)
    assert backend.job_status(handle, fresh=True) == "PENDING"
    shown = tfcli(project.root, "experiment", "show", "-e", "waits")
    assert "Status       pending (its Ray job waits for the CPUs it asked for)" in shown.stdout, shown.stderr
    assert "Run mode     multi-threaded, 2 workers, 2 torch threads, seed" in shown.stdout
    began = time.monotonic()
    with pytest.raises(ClientError, match=r"does not stop a job before it places it \(ray-project/ray#58353\)"):
        experiment.stop(no_download=True)
    assert time.monotonic() - began < 60
    assert json.loads(experiment.storage().read_text("control.json"))["request"] == "stop"
    assert experiment.record().status == "running" and backend.job_status(handle, fresh=True) == "PENDING"
    # a dry run of the cluster's delete is refused as the delete would be (it said "Would end" regardless)
    dry = tfcli(project.root, "cluster", "delete", "-c", CLUSTER, "--dry-run")
    assert dry.returncode == 2 and f"cluster '{CLUSTER}' runs experiments: waits" in dry.stderr, dry.stderr
    dry = tfcli(project.root, "cluster", "delete", "-c", CLUSTER, "--dry-run", "--force")
    assert dry.stdout == f"Would end the Ray cluster '{CLUSTER}'; mark failed: waits\n", (dry.stdout, dry.stderr)
    assert experiment.record().status == "running" and project.store.cluster(CLUSTER) is not None


def test_a_ray_run_resumes_here_and_a_deleted_cluster_leaves_its_results_home(project, tmp_path):
    """Paused on a second cluster (made through the Python API), resumed on this machine with -c local; that
    cluster's deletion brings the results of what ran there home first."""
    from torchforce.client import Cluster

    second = Cluster(file="ray_local", name="second", nodes=1, cpus=1)
    record = second.create(project)
    assert second.status(project)["nodes"] == 1
    experiment = new(project, "moving", "-t", "200000", agent="dqn_cartpole")
    experiment.start(cluster="second")
    wait_for(progress_at_least(experiment, 1500), timeout=180, what="progress")
    assert experiment.pause().status == "paused"
    assert "running dist" not in experiment.logs() and "running moving" in experiment.logs()
    paused_at = experiment.checkpoint_timesteps()
    processes = cluster_processes(clusters.local_handle(record))
    second.delete(project)
    assert [pid for pid in processes if pid_alive(pid)] == [] and project.store.cluster("second") is None
    assert experiment.checkpoint_timesteps() == paused_at  # from the downloaded copy now
    assert not (experiment.results / "control.json").exists()  # the pause request stayed behind
    experiment.start(resume=True, cluster="local")
    wait_for(progress_at_least(experiment, paused_at + 500), timeout=120, what="progress here")
    assert experiment.record().status == "running"  # not paused at once by an old request
    assert experiment.stop().status == "stopped"
    log = episodes(experiment)
    assert [episode["episode"] for episode in log] == list(range(1, len(log) + 1))


def job_succeeded(project: Project, name: str, cluster: str) -> bool:
    """Whether the Ray job of experiment ``name`` has succeeded, asked of its cluster (its row is left alone)."""
    return RayBackend(project, cluster).job_status(project.store.experiment(name).job, fresh=True) == "SUCCEEDED"


def test_runs_that_have_ended_on_a_cluster_neither_block_its_delete_nor_show_in_its_list(project):
    """A run on a Ray cluster writes its end to its results, not to the state database: until something looks, its
    row says running. 'cluster delete' and 'cluster list' look, as 'experiment list' does: the delete of a cluster
    whose run has finished goes through without --force and the run stays finished with its results; the list
    shows nothing running on a cluster whose run has finished. One run on a second cluster, one on the shared one,
    at the same time."""
    from torchforce.client import Cluster

    second = Cluster(file="ray_local", name="second-ended", nodes=1, cpus=1)
    second.create(project)
    try:
        runs = {"ended-there": "second-ended", "ended-here": CLUSTER}
        for name, cluster in runs.items():
            new(project, name, "-t", "200").start(cluster=cluster)
        for name, cluster in runs.items():
            wait_for(partial(job_succeeded, project, name, cluster), timeout=180, what=f"{name}'s job")
            assert Experiment.load(project, name).progress()["state"] == "finished"
            assert project.store.experiment(name).status == "running"  # nothing has looked since
        deleted = tfcli(project.root, "cluster", "delete", "-c", "second-ended")
        assert deleted.returncode == 0, deleted.stderr
        assert (
            deleted.stdout.strip() == "Ended cluster 'second-ended'" and project.store.cluster("second-ended") is None
        )
    finally:
        if project.store.cluster("second-ended") is not None:  # refused: it goes all the same
            second.delete(project, force=True)
    ended = project.store.experiment("ended-there")
    assert (ended.status, ended.message) == ("finished", None)
    assert Experiment.load(project, "ended-there").progress()["timesteps"] >= 200  # brought home
    assert project.store.experiment("ended-here").status == "running"  # the delete looked at its own runs only
    listed = tfcli(project.root, "cluster", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    running = {cluster["name"]: cluster["experiments"] for cluster in json.loads(listed.stdout)["clusters"]}
    # (an earlier test of the module may leave a run of its own there, a job waiting for CPUs)
    assert "ended-here" not in running[CLUSTER] and "second-ended" not in running
    assert project.store.experiment("ended-here").status == "finished"


class Forwarder:
    """A loopback port that refuses connections until it is opened, then passes each one on to ``target`` and
    counts them: the real dashboard, silent for a moment."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target, self.connections = target, 0
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))  # bound, not listening: a connection is refused
        self.port = self.socket.getsockname()[1]

    def open(self) -> None:
        self.socket.listen()
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.socket.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.socket.accept()
            except OSError:
                return  # closed
            self.connections += 1
            upstream = socket.create_connection(self.target)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)


def test_a_status_read_believes_a_moment_old_silence_and_an_action_asks_again(project):
    """Listing a silent cluster's experiments waits once, not once each; but a start, a stop or a wait on one asks
    the cluster again (a queue that polled through one silent moment can start its next run)."""
    record = project.store.cluster(CLUSTER)
    real = urllib.parse.urlsplit(record.runtime["dashboard"])
    forwarder = Forwarder((str(real.hostname), int(real.port or 0)))
    address = f"127.0.0.1:{forwarder.port}"
    project.store.add_cluster(
        "flaky",
        {"type": "ray", "name": "flaky", "address": address, "storage": "/tmp"},
        "attached",
        {"dashboard": f"http://{address}", "storage": "/tmp", "token": record.runtime.get("token")},
    )
    try:
        assert RayBackend(project, "flaky").job_status("raysubmit_none") == "UNREACHABLE"  # nothing listens yet
        forwarder.open()
        assert RayBackend(project, "flaky").job_status("raysubmit_none") == "UNREACHABLE"
        assert forwarder.connections == 0  # a status read a moment later does not ask
        assert RayBackend(project, "flaky").job_status("raysubmit_none", fresh=True) is None  # known: no such job
        assert forwarder.connections > 0
        seen = forwarder.connections
        assert RayBackend(project, "flaky").job_status("raysubmit_none") is None  # the answer clears the silence
        assert RayBackend(project, "flaky").client is not None and forwarder.connections > seen  # actions ask
    finally:
        forwarder.close()
        project.store.remove_cluster("flaky")
