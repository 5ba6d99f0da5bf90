"""Private Ray clusters that listen on loopback only: a two-node cluster of `ray start` processes (the GCS, both
raylets, the agents, the dashboard and Jobs API, every worker) and a cluster inside a process (init_private); jobs
run through the Jobs API; stopping ends every process of the cluster and nothing else."""

import os
import select
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from torchforce.execution.proc import is_loopback, listening_sockets, pid_alive  # noqa: E402
from torchforce.execution.ray_cluster import (  # noqa: E402
    LOOPBACK,
    LocalRayCluster,
    cluster_nodes,
    cluster_processes,
    start_local_cluster,
    stop_local_cluster,
)

# one test worker runs the module: one cluster for it (half a minute to start)
pytestmark = [pytest.mark.xdist_group("ray-cluster"), pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster():
    """One two-node cluster (a CPU each) for the module, in a short private folder; stopped at the end."""
    with tempfile.TemporaryDirectory(prefix="tf-ray-") as folder:
        cluster = start_local_cluster(nodes=2, cpus=1, temp_dir=folder)
        try:
            yield cluster
        finally:
            stop_local_cluster(cluster)


def processes_with_token(cluster):
    """PIDs of the processes, this one aside, whose environment holds the cluster's marker: every process the
    cluster starts inherits it, wherever it ends up in the process tree (clients of the cluster, which name its
    token file too, do not)."""
    marker = f"TORCHFORCE_RAY_CLUSTER={cluster.temp_dir}".encode()
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid() and pid_alive(int(entry)):
            try:
                with open(f"/proc/{entry}/environ", "rb") as file:
                    if marker in file.read().split(b"\0"):
                        found.add(int(entry))
            except OSError:
                pass  # the process ended while we looked
    return found


def intact_environment(pid):
    """The NAME=value entries of a process's environment, or None when it has ended or its environment has been
    written over, even in part (a worker's title, then zeros: entries with no '=' before the last)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            variables = file.read().split(b"\0")
    except OSError:
        return None
    if variables[-1] != b"" or not all(b"=" in variable for variable in variables[:-1]):
        return None
    return variables[:-1]


def owners(sockets):
    """pid -> command name of the processes that own the sockets."""
    names = {}
    for _, _, pid in sockets:
        try:
            with open(f"/proc/{pid}/comm") as file:
                names[pid] = file.read().strip()
        except OSError:
            pass  # the process ended while we looked
    return names


def test_loopback_addresses_are_told_apart_from_the_others():
    for address in ("127.0.0.1", "127.3.2.1", "::1", "::ffff:127.0.0.1"):
        assert is_loopback(address), address
    for address in ("0.0.0.0", "::", "192.0.2.2", "::ffff:10.0.0.1", "fd00::2"):
        assert not is_loopback(address), address


def test_listening_sockets_sees_tcp_and_udp_sockets_on_every_address():
    with socket.socket() as everywhere, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as datagrams:
        everywhere.bind(("0.0.0.0", 0))
        everywhere.listen()
        datagrams.bind((LOOPBACK, 0))
        found = listening_sockets([os.getpid()])
        assert ("0.0.0.0", everywhere.getsockname()[1], os.getpid()) in found
        assert (LOOPBACK, datagrams.getsockname()[1], os.getpid()) in found


def test_a_temp_dir_too_long_for_rays_unix_sockets_is_refused_before_anything_starts():
    with pytest.raises(ValueError, match="at most"):
        start_local_cluster(nodes=1, cpus=1, temp_dir="/tmp/" + "x" * 100)


def test_a_cluster_that_fails_to_start_is_ended_and_explained_by_the_heads_log():
    with tempfile.TemporaryDirectory(prefix="tf-ray-") as folder:
        with pytest.raises(RuntimeError, match="minimum allowed") as failure:  # Ray's words, from head.log
            start_local_cluster(nodes=1, cpus=1, temp_dir=folder, object_store_memory=1000, timeout=60)
        assert "head.log" in str(failure.value)
        leftover = LocalRayCluster(address="", dashboard_address=None, temp_dir=folder, pids=[])
        assert processes_with_token(leftover) == set()


def test_both_nodes_are_alive_on_loopback_with_their_cpus(cluster):
    nodes = cluster_nodes(cluster)
    assert len(nodes) == 2
    assert sum(node["cpus"] for node in nodes) == 2
    assert {node["address"] for node in nodes} == {LOOPBACK}
    assert cluster.address.startswith(f"{LOOPBACK}:")


def test_every_process_of_the_cluster_listens_on_loopback_only(cluster):
    sockets = listening_sockets(cluster_processes(cluster))
    # The servers that listen on every interface when Ray gets the node IP wrong are there to be checked: the GCS,
    # both raylets, ...
    names = list(owners(sockets).values())
    assert names.count("gcs_server") == 1 and names.count("raylet") == 2
    assert int(cluster.address.rsplit(":", 1)[1]) in {port for _, port, _ in sockets}
    # ... and none of them, nor any other process of the cluster, listens on another address.
    assert [entry for entry in sockets if not is_loopback(entry[0])] == []


def test_the_clusters_processes_keep_their_temporary_files_in_its_folder(cluster):
    """Every process of the cluster has the cluster's folder as its temp dir, so what Ray leaves there (the
    dashboard's forkserver folder, which outlives the signal that ends it) goes when the folder goes."""
    # One read of each process's environment serves both checks: Ray's workers write their titles over their
    # environments at any moment, so a second read may find what the first did not.
    checked = set()
    for pid in cluster_processes(cluster):
        variables = intact_environment(pid)
        if variables is None or f"RAY_AUTH_TOKEN_PATH={cluster.auth_token_path}".encode() not in variables:
            continue  # ended, written over (in whole or in part), or not the cluster's
        assert f"TMPDIR={cluster.temp_dir}".encode() in variables, pid
        checked.add(pid)
    assert set(cluster.pids) <= checked  # the processes the cluster started itself keep their environments
    if cluster.dashboard_address is not None:
        assert list(Path(cluster.temp_dir).glob("pymp-*")), sorted(os.listdir(cluster.temp_dir))


JOB = """
import os, sys, time
import ray
ray.init()  # the cluster's, from RAY_ADDRESS
print("tf-job-ok", int(ray.cluster_resources()["CPU"]), os.getpid(), flush=True)
deadline = time.monotonic() + 60
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:  # until the test has seen its sockets
    time.sleep(0.05)
"""


def test_a_job_submitted_through_the_jobs_api_runs_on_the_cluster_and_listens_on_loopback(cluster, tmp_path):
    if cluster.dashboard_address is None:
        pytest.skip("the installed Ray has no dashboard (pip install 'ray[default]==2.60.0'), so no Jobs API")
    from ray.job_submission import JobStatus, JobSubmissionClient

    assert cluster.dashboard_address.startswith(f"http://{LOOPBACK}:")
    script, release = tmp_path / "job.py", tmp_path / "release"
    script.write_text(JOB)
    client = JobSubmissionClient(cluster.dashboard_address, headers=cluster.auth_headers())
    job = client.submit_job(entrypoint=f"python {script} {release}")  # `python`: the cluster's PATH starts with ours
    deadline = time.monotonic() + 60
    while "tf-job-ok" not in (logs := client.get_job_logs(job)) and not client.get_job_status(job).is_terminal():
        assert time.monotonic() < deadline, logs
        time.sleep(0.1)
    assert "tf-job-ok 2 " in logs, logs
    driver = int(logs.split("tf-job-ok 2 ")[1].split()[0])
    # The job's driver is a process of the cluster (under a raylet), and its server listens on loopback too.
    sockets = listening_sockets(cluster_processes(cluster))
    assert driver in {pid for _, _, pid in sockets}
    assert [entry for entry in sockets if not is_loopback(entry[0])] == []
    release.touch()
    while not client.get_job_status(job).is_terminal():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert client.get_job_status(job) == JobStatus.SUCCEEDED, client.get_job_logs(job)


INIT_PRIVATE = """
import sys
import ray  # before init_private sets anything: Ray has read its settings by now
from torchforce.execution.ray_cluster import init_private
init_private(num_cpus=1, object_store_memory=80 * 1024**2, temp_dir=sys.argv[1])
assert ray.get(ray.remote(lambda: 1).remote()) == 1  # a worker process, listening too
print("ready", flush=True)
sys.stdin.readline()
ray.shutdown()
"""


def test_a_cluster_started_inside_a_process_listens_on_loopback_only():
    environment = dict(os.environ)
    environment.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)  # init_private must see to it itself
    with tempfile.TemporaryDirectory(prefix="tf-ray-") as folder:
        process = subprocess.Popen(
            [sys.executable, "-c", INIT_PRIVATE, folder],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=environment,
            start_new_session=True,
        )
        # The process, its descendants and its session, as for a cluster of `ray start` processes.
        tree = LocalRayCluster(address="", dashboard_address=None, temp_dir=folder, pids=[process.pid])
        try:
            assert select.select([process.stdout], [], [], 90)[0], "init_private did not finish in 90 s"
            assert process.stdout.readline().strip() == b"ready"
            sockets = listening_sockets(cluster_processes(tree))
            assert process.pid in {pid for _, _, pid in sockets}  # the driver's own server
            assert {"gcs_server", "raylet"} <= set(owners(sockets).values())
            assert [entry for entry in sockets if not is_loopback(entry[0])] == []
            process.communicate(b"\n", timeout=60)
            assert process.returncode == 0
        finally:
            if process.poll() is None:
                process.kill()
            stop_local_cluster(tree, timeout=10)


def test_stopping_ends_every_process_of_the_cluster_and_only_those(cluster):
    # a client of the cluster, started as a user's shell that exported its token path would start it
    client = subprocess.Popen(["sleep", "300"], env=cluster.environment())
    carriers = processes_with_token(cluster)  # first: a process started between the two looks is in members
    members = cluster_processes(cluster)
    assert client.pid not in members and client.pid not in carriers
    assert set(cluster.pids) <= members and len(members) > len(cluster.pids)
    assert os.getpid() not in members and os.getppid() not in members
    # the tree and the sessions hold every process of the cluster (that has not ended between the two looks)
    assert carriers and {pid for pid in carriers if pid_alive(pid)} <= members
    started = time.monotonic()
    stop_local_cluster(cluster)
    assert time.monotonic() - started < 30
    assert [pid for pid in members if pid_alive(pid)] == []
    assert cluster_processes(cluster) == set()
    assert processes_with_token(cluster) == set()
    assert pid_alive(os.getpid()) and client.poll() is None  # the client lives on
    client.kill()
    client.wait()
    stop_local_cluster(cluster)  # a second time: nothing to do
