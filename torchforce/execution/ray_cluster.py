"""Private Ray clusters on this machine that listen on loopback (127.0.0.1) only.

Two ways to get one:

* :func:`init_private` starts a single-node cluster inside the calling process (``ray.init(address="local")``),
  the way :class:`~torchforce.execution.distributed.DistributedRunner` does when Ray is not running yet.
* :func:`start_local_cluster` starts a head and worker nodes as ``ray start --block`` processes, with the dashboard
  (and so the Ray Jobs API) on 127.0.0.1; :func:`stop_local_cluster` ends exactly those processes again.

What makes Ray 2.60 listen on loopback only (found in the installed sources and binaries, checked with
``torchforce.execution.proc.listening_sockets``):

1. There is no bind-address setting: no flag, no ``RAY_...`` variable, no ``_system_config`` entry (the C++
   binaries only know ``node_ip_address``). Every server derives where it listens from the node IP. If that is a
   loopback literal (``127.0.0.1``, ``::1``, ``localhost``), all listen on loopback; otherwise the GCS, the raylets,
   the core workers (drivers included), the dashboard agent's gRPC and metrics servers and the metrics servers of the
   dashboard and of the autoscaler listen on all interfaces (``get_all_interfaces_ip``), and the runtime-env agent,
   the dashboard agent's HTTP server and the Ray Client server on the node IP. So the node IP must be 127.0.0.1:
   ``--node-ip-address=127.0.0.1`` / ``_node_ip_address="127.0.0.1"``.
2. Ray rewrites a loopback node IP (and a loopback GCS address) into the host's outward IP
   (``services.resolve_ip_for_localhost``: the address of the interface that routes to 8.8.8.8) unless
   ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``. Without that variable, ``--node-ip-address=127.0.0.1`` silently becomes
   e.g. ``192.0.2.2`` and the raylet, the core workers and the agents listen on ``*``/``0.0.0.0``. Ray reads the
   variable once, when ``ray._private.ray_constants`` is imported.
3. With ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, ``ray start --address=...`` (a worker node) refuses to run
   ("Multi-node Ray clusters are not supported on Windows and OSX"), and with it unset it rewrites both
   ``--node-ip-address=127.0.0.1`` and ``--address=127.0.0.1:PORT`` (ray-project/ray#59110). The two are the same
   switch, so no flag or variable gives a loopback worker node: worker nodes run the same ``ray start`` command
   through :data:`_WORKER_NODE_LAUNCHER`, which lifts the guard and keeps the loopback addresses in that one process.

Besides binding, each cluster from :func:`start_local_cluster` gets its own 256-bit token
(``RAY_AUTH_MODE=token``, ``RAY_AUTH_TOKEN_PATH`` in its folder): loopback is reachable by every local user, and a
Ray cluster runs any code it is sent.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchforce.execution.proc import proc_stat, same_process, start_time

LOOPBACK = "127.0.0.1"

# Talks to the dashboard directly: an http_proxy from the environment must not see (or fail) loopback requests.
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))

# The variables every Ray process of ours needs, whatever its role (see the module docstring, point 2).
_LOOPBACK_VARIABLES = {
    # Keeps 127.0.0.1 as the node IP and GCS address instead of the host's outward IP, so that every server binds
    # to loopback. (On Linux this switch only matters for that; its name comes from its other use.)
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    # No usage report to Ray's servers: the clusters are private, and CI has no internet.
    "RAY_USAGE_STATS_ENABLED": "0",
}

# AF_UNIX socket paths are limited to 107 bytes on Linux. Ray's longest is
# <temp_dir>/session_YYYY-MM-DD_HH-MM-SS_ffffff_<pid>/sockets/plasma_store.<node>, 67 characters past the folder
# with a 7-digit PID and a 2-digit node number.
MAX_TEMP_DIR_LENGTH = 107 - 67

# Runs ``ray start`` for a worker node (the arguments follow ``-c``) with two changes, in this process only, that
# no flag or variable of Ray 2.60 can make (module docstring, point 3):
# * ENABLE_RAY_CLUSTER = True lifts the "no multi-node clusters on Windows and OSX" guard, which on Linux is tied
#   to RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 (the variable every process of the cluster needs, this one included);
# * resolve_ip_for_localhost returns its argument: with the guard lifted it would turn --node-ip-address=127.0.0.1
#   and --address=127.0.0.1:PORT into the host's outward IP.
# The node's own processes (raylet, agents, workers) inherit RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 and are not patched.
_WORKER_NODE_LAUNCHER = """\
import sys
from ray._private import ray_constants, services
ray_constants.ENABLE_RAY_CLUSTER = True
services.resolve_ip_for_localhost = lambda host: host
from ray.scripts.scripts import main
sys.argv[0] = "ray"
sys.exit(main())
"""

# Prints the alive nodes of the cluster at sys.argv[1] as JSON, once at least int(sys.argv[2]) are alive, or fails
# after sys.argv[3] seconds. Runs in a short-lived subprocess with the cluster's environment (token), so that the
# calling process never connects to the cluster as a driver.
_NODES_SCRIPT = """\
import json, sys, time
from ray._raylet import GcsClient
from ray.core.generated.gcs_pb2 import GcsNodeInfo
address, wanted, deadline = sys.argv[1], int(sys.argv[2]), time.monotonic() + float(sys.argv[3])
client, problem = None, "no answer"
while True:
    try:
        client = client or GcsClient(address=address)
        infos = client.get_all_node_info(timeout=5, state_filter=GcsNodeInfo.GcsNodeState.ALIVE)
        nodes = [{"node_id": node_id.hex(), "address": info.node_manager_address,
                  "cpus": info.resources_total.get("CPU", 0.0), "gpus": info.resources_total.get("GPU", 0.0)}
                 for node_id, info in infos.items()]
        if len(nodes) >= wanted:
            print(json.dumps(nodes))
            sys.exit(0)
        problem = f"{len(nodes)} of {wanted} nodes alive"
    except Exception as error:
        problem = repr(error)
    if time.monotonic() > deadline:
        sys.exit(f"nodes not ready: {problem}")
    time.sleep(0.25)
"""


def loopback_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``base`` (default ``os.environ``) with what Ray processes need to listen on loopback only.

    That is ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (Ray would otherwise replace a 127.0.0.1 node IP by the host's
    outward IP, and bind to all interfaces) and ``RAY_USAGE_STATS_ENABLED=0``. The node IP itself is a flag:
    ``--node-ip-address=127.0.0.1`` or ``_node_ip_address="127.0.0.1"``.
    """
    environment = dict(os.environ if base is None else base)
    environment.update(_LOOPBACK_VARIABLES)
    return environment


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def no_proxy_for_loopback(url: str) -> None:
    """For a dashboard on loopback: this process's ``NO_PROXY``/``no_proxy`` name the loopback hosts, so that Ray's
    Jobs client (``requests``, which sends loopback through ``http_proxy`` unless ``no_proxy`` says otherwise) talks
    to the cluster itself, and its token never travels to a proxy. Other addresses are left to the user's proxy
    settings."""
    from urllib.parse import urlsplit

    if urlsplit(url if "//" in url else f"//{url}").hostname not in LOOPBACK_HOSTS:
        return
    for name in ("NO_PROXY", "no_proxy"):
        present = [host.strip() for host in os.environ.get(name, "").split(",") if host.strip()]
        os.environ[name] = ",".join(present + [host for host in LOOPBACK_HOSTS if host not in present])


def init_private(*, num_cpus: int, num_gpus: int = 0, object_store_memory: int, temp_dir: str) -> None:
    """Start a new single-node Ray cluster in this process, listening on 127.0.0.1 only, and connect to it.

    No dashboard, no forwarding of the workers' output to this process, and Ray leaves Python's logging alone.
    ``temp_dir`` should be short (:data:`MAX_TEMP_DIR_LENGTH`), e.g. ``tempfile.mkdtemp(prefix="tf-ray-")``.

    Sets ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` and ``RAY_USAGE_STATS_ENABLED=0`` in ``os.environ`` for good:
    ``ray.init`` starts the GCS, the raylet, the agents and the workers with this process's environment, and they
    must all keep 127.0.0.1.
    """
    _check_temp_dir(temp_dir)
    os.environ.update(_LOOPBACK_VARIABLES)
    import ray
    from ray._private import ray_constants

    # Ray reads RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER when ray_constants is first imported; if that happened before the
    # line above, ray.init would still turn _node_ip_address="127.0.0.1" into the outward IP (and every server of
    # the new cluster would listen on all interfaces). So the flag is set for the call itself, and put back.
    enabled = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        ray.init(
            address="local",
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            object_store_memory=object_store_memory,
            include_dashboard=False,
            _temp_dir=temp_dir,
            _node_ip_address=LOOPBACK,
            log_to_driver=False,
            configure_logging=False,
        )
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = enabled


@dataclass
class LocalRayCluster:
    """A Ray cluster made of ``ray start --block`` processes on this machine (see :func:`start_local_cluster`).

    ``address`` is the GCS ("127.0.0.1:PORT"), ``dashboard_address`` the dashboard and Ray Jobs API
    ("http://127.0.0.1:PORT", None without a dashboard), ``pids`` the ``ray start`` processes, head first, and
    ``start_times`` their start times (clock ticks after boot, from /proc), so that a PID that was reused by another
    process after ours ended is never taken for ours. The cluster's token is ``auth_token_path``.
    """

    address: str
    dashboard_address: str | None
    temp_dir: str
    pids: list[int]
    start_times: dict[int, int] = field(default_factory=dict)
    _processes: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False, compare=False)

    def __post_init__(self) -> None:
        # A cluster read back from JSON (e.g. by another process, to stop it) has its start times keyed by strings.
        self.pids = [int(pid) for pid in self.pids]
        self.start_times = {int(pid): int(started) for pid, started in self.start_times.items()}

    @property
    def auth_token_path(self) -> Path:
        """The file holding the cluster's authentication token."""
        return Path(self.temp_dir) / "auth_token"

    def auth_headers(self) -> dict[str, str]:
        """HTTP headers that authenticate to the dashboard, e.g. ``JobSubmissionClient(..., headers=...)``."""
        return {"Authorization": "Bearer " + self.auth_token_path.read_text().strip()}

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """An environment for a process that uses this cluster: ``ray.init()`` there connects to it, with its token.

        Also the environment of the cluster's own processes.
        """
        environment = loopback_environment(base)
        environment.pop("RAY_AUTH_TOKEN", None)  # it would take precedence over RAY_AUTH_TOKEN_PATH
        environment.update(
            RAY_ADDRESS=self.address, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(self.auth_token_path)
        )
        return environment

    def job_client(self) -> Any:
        """A ``ray.job_submission.JobSubmissionClient`` for this cluster, authenticated."""
        if self.dashboard_address is None:
            raise RuntimeError("this cluster runs without a dashboard, so without the Ray Jobs API")
        from ray.job_submission import JobSubmissionClient

        no_proxy_for_loopback(self.dashboard_address)
        return JobSubmissionClient(self.dashboard_address, headers=self.auth_headers())

    def stop(self, timeout: float = 30) -> None:
        """Same as :func:`stop_local_cluster`."""
        stop_local_cluster(self, timeout)


def dashboard_available() -> bool:
    """Whether the installed Ray can run the dashboard (``ray[default]``: aiohttp, pydantic, ...)."""
    try:
        import ray.dashboard.optional_deps  # noqa: F401
    except ImportError:
        return False
    return True


def start_local_cluster(
    *,
    nodes: int,
    cpus: int,
    gpus: int = 0,
    temp_dir: str | Path,
    object_store_memory: int = 200 * 1024**2,
    timeout: float = 120,
    dashboard: bool | None = None,
) -> LocalRayCluster:
    """Start a Ray cluster of ``nodes`` nodes on this machine (a head and ``nodes - 1`` workers), loopback only.

    Each node is a ``ray start --block`` process in a session of its own, with ``cpus`` CPUs, ``gpus`` GPUs and
    ``object_store_memory`` bytes of object store, logging to ``head.log`` / ``worker-N.log`` in ``temp_dir``, which
    also holds Ray's session folders, the cluster's token and the temporary files of its processes (their
    ``TMPDIR``); keep it short (:data:`MAX_TEMP_DIR_LENGTH`, e.g. ``tempfile.mkdtemp(prefix="tf-ray-")``). The head
    runs the dashboard, on 127.0.0.1, if ``dashboard`` is true or, by default, if the installed Ray can
    (:func:`dashboard_available`). Returns once every node is alive and the dashboard answers; on any failure, ends
    what it started and raises RuntimeError with the end of the head's log.
    """
    if nodes < 1:
        raise ValueError(f"a cluster has at least one node, got nodes={nodes}")
    temp_dir = os.path.abspath(temp_dir)
    _check_temp_dir(temp_dir)
    Path(temp_dir).mkdir(parents=True, exist_ok=True)
    if dashboard is None:
        dashboard = dashboard_available()
    # Ports that Ray would otherwise take from fixed defaults (GCS 6379, dashboard 8265, Ray Client 10001, dashboard
    # agent 52365 on every node, metrics 44217 and 44227), so that clusters, ours or other people's, do not collide.
    gcs_port, dashboard_port, client_port, autoscaler_metrics, dashboard_metrics, *agent_ports = _free_ports(5 + nodes)
    cluster = LocalRayCluster(
        address=f"{LOOPBACK}:{gcs_port}",
        dashboard_address=f"http://{LOOPBACK}:{dashboard_port}" if dashboard else None,
        temp_dir=temp_dir,
        pids=[],
    )
    _write_token(cluster.auth_token_path)
    environment = cluster.environment()
    # The processes of the cluster get the GCS address from their flags; RAY_ADDRESS is for drivers.
    environment.pop("RAY_ADDRESS")
    name, _, value = _cluster_marker(cluster).partition("=")
    environment[name] = value  # what the cluster starts, and only that, is found by it when the cluster stops
    # So that `python` in a job's entrypoint is this interpreter, the one with Ray (and torchforce).
    environment["PATH"] = os.pathsep.join(filter(None, [str(Path(sys.executable).parent), environment.get("PATH")]))
    environment.update(AUTOSCALER_METRIC_PORT=str(autoscaler_metrics), DASHBOARD_METRIC_PORT=str(dashboard_metrics))
    # Temporary files of the cluster's processes (and of the jobs they run) go in its folder too: the dashboard's
    # forkserver, for one, makes a pymp-* folder in the temp dir that its end by signal leaves behind.
    environment["TMPDIR"] = temp_dir
    common = [
        f"--node-ip-address={LOOPBACK}",
        f"--num-cpus={cpus}",
        f"--num-gpus={gpus}",
        f"--object-store-memory={object_store_memory}",
        "--disable-usage-stats",
    ]
    deadline = time.monotonic() + timeout
    try:
        head = [
            str(Path(sys.executable).parent / "ray"),
            *["start", "--head", "--block", f"--port={gcs_port}", f"--temp-dir={temp_dir}", *common],
            f"--ray-client-server-port={client_port}",
            f"--dashboard-agent-listen-port={agent_ports[0]}",
            f"--include-dashboard={'true' if dashboard else 'false'}",
        ]
        if dashboard:
            head += [f"--dashboard-host={LOOPBACK}", f"--dashboard-port={dashboard_port}"]
        _launch(cluster, head, environment, "head.log")
        _wait_for_port(cluster, gcs_port, deadline)
        for number in range(1, nodes):
            worker = [
                *[sys.executable, "-c", _WORKER_NODE_LAUNCHER, "start", "--block", f"--address={cluster.address}"],
                *common,
                f"--dashboard-agent-listen-port={agent_ports[number]}",
            ]
            _launch(cluster, worker, environment, f"worker-{number}.log")
        alive = _nodes(cluster, nodes, deadline)
        strays = sorted({node["address"] for node in alive} - {LOOPBACK})
        if strays:
            raise RuntimeError(f"nodes registered with addresses other than {LOOPBACK}: {strays}")
        if dashboard:
            _wait_for_dashboard(cluster, deadline)
    except BaseException as error:
        stop_local_cluster(cluster, timeout=5)  # a node still starting may not act on SIGTERM soon
        if isinstance(error, Exception):
            raise RuntimeError(f"the local Ray cluster did not start: {error}\n{_log_tail(cluster)}") from error
        raise
    return cluster


def cluster_nodes(cluster: LocalRayCluster, timeout: float = 30) -> list[dict[str, Any]]:
    """The cluster's alive nodes: ``node_id``, ``address``, ``cpus`` and ``gpus`` each (asked in a subprocess)."""
    return _nodes(cluster, 1, time.monotonic() + timeout)


def stop_local_cluster(cluster: LocalRayCluster, timeout: float = 30) -> None:
    """End the cluster's processes, and only them: the ``ray start`` processes, their descendants, their sessions.

    The set is collected first; then the ``ray start`` processes get SIGTERM (they end their children), and
    whatever is left of the set once they have ended (or after ``timeout`` seconds) gets SIGKILL, as does any
    member a later look finds (one started meanwhile). Every signal goes to a PID only while it is still the
    process collected. Idempotent; leaves ``temp_dir`` alone.
    """
    members = _members(cluster)
    roots = {pid: members[pid] for pid in cluster.pids if pid in members}
    for pid in roots:
        _signal(pid, signal.SIGTERM, members)
    # A `ray start` process ends its node's processes before itself; what outlives it by a moment (all of it, if
    # the `ray start` processes were gone already) is killed, and so is everything after `timeout`.
    deadline = time.monotonic() + timeout
    _wait_until_gone(cluster, roots, timeout)
    if not _wait_until_gone(cluster, members, min(2.0, max(0.0, deadline - time.monotonic()))):
        _kill(cluster, members)
    # A process the cluster started while it was being stopped (a worker a raylet was starting) is not in the set:
    # look again, a few times, until a look finds none.
    for _ in range(3):
        late = _members(cluster)
        if not late:
            break
        _kill(cluster, late)


def cluster_processes(cluster: LocalRayCluster) -> set[int]:
    """The live PIDs of the cluster: its ``ray start`` processes, their descendants and the members of their
    sessions (each ``ray start`` leads a session of its own, which keeps processes that lost their parent)."""
    return set(_members(cluster))


# -- internals --------------------------------------------------------------------------------------------------


def _check_temp_dir(temp_dir: str | Path) -> None:
    if len(os.path.abspath(temp_dir)) > MAX_TEMP_DIR_LENGTH:
        raise ValueError(
            f"Ray's temp dir must be at most {MAX_TEMP_DIR_LENGTH} characters long (its Unix sockets are limited to "
            f"107), got {temp_dir!r}: use e.g. tempfile.mkdtemp(prefix='tf-ray-')"
        )


def _write_token(path: Path) -> None:
    """A fresh 256-bit token, readable by this user only (Ray's own tokens are 64 hex digits too)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(secrets.token_hex(32))


def _free_ports(count: int) -> list[int]:
    """``count`` different TCP ports that are free on 127.0.0.1 now (all held open until all are found)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            probe = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            probe.bind((LOOPBACK, 0))
            ports.append(probe.getsockname()[1])
        return ports


def _launch(cluster: LocalRayCluster, command: list[str], environment: dict[str, str], log: str) -> None:
    with open(Path(cluster.temp_dir) / log, "ab") as output:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=environment,
            cwd=cluster.temp_dir,
            start_new_session=True,  # its own session: stop_local_cluster finds what it leaves behind
        )
    cluster._processes.append(process)
    cluster.pids.append(process.pid)
    started = start_time(process.pid)
    if started is not None:
        cluster.start_times[process.pid] = started


def _check_running(cluster: LocalRayCluster) -> None:
    for process, log in zip(cluster._processes, _log_names(cluster), strict=False):
        if process.poll() is not None:
            raise RuntimeError(f"`ray start` ({log}) exited with status {process.returncode}")


def _wait_for_port(cluster: LocalRayCluster, port: int, deadline: float) -> None:
    """Until the GCS accepts connections: worker nodes started earlier would spend their first seconds retrying."""
    while True:
        _check_running(cluster)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.settimeout(1)
            if probe.connect_ex((LOOPBACK, port)) == 0:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the GCS did not open port {port}")
        time.sleep(0.1)


def _nodes(cluster: LocalRayCluster, wanted: int, deadline: float) -> list[dict[str, Any]]:
    command = [sys.executable, "-c", _NODES_SCRIPT, cluster.address, str(wanted), str(deadline - time.monotonic())]
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cluster.environment(),
        cwd=cluster.temp_dir,
        start_new_session=True,
    ) as probe:
        try:
            while probe.poll() is None:  # while it waits, a node that dies fails the start at once
                _check_running(cluster)
                if time.monotonic() > deadline + 30:
                    raise RuntimeError("the node query did not finish")
                time.sleep(0.1)
        finally:
            if probe.poll() is None:
                probe.kill()
            output, errors = probe.communicate()
    if probe.returncode != 0:
        lines = errors.decode(errors="replace").strip().splitlines()
        raise RuntimeError(lines[-1] if lines else f"the node query failed with status {probe.returncode}")
    return json.loads(output)


def _wait_for_dashboard(cluster: LocalRayCluster, deadline: float) -> None:
    """Until the Jobs API answers ``GET /api/version`` (the dashboard starts its modules after the nodes)."""
    request = urllib.request.Request(f"{cluster.dashboard_address}/api/version", headers=cluster.auth_headers())
    while True:
        _check_running(cluster)
        try:
            with _NO_PROXY.open(request, timeout=5) as response:
                if response.status == 200:
                    return
                problem = f"HTTP {response.status}"
        except (urllib.error.URLError, OSError) as error:
            problem = str(error)
        if time.monotonic() > deadline:
            raise RuntimeError(f"the dashboard at {cluster.dashboard_address} did not answer: {problem}")
        time.sleep(0.25)


def _log_names(cluster: LocalRayCluster) -> list[str]:
    return ["head.log"] + [f"worker-{number}.log" for number in range(1, len(cluster.pids))]


def _log_tail(cluster: LocalRayCluster) -> str:
    """The end of the head's log (40 lines) and of the worker nodes' logs (10 lines each)."""
    tails = []
    for number, log in enumerate(_log_names(cluster)):
        try:
            text = (Path(cluster.temp_dir) / log).read_text(errors="replace").splitlines()[-(10 if number else 40) :]
        except OSError:
            continue
        tails.append(f"--- {log} (last {len(text)} lines) ---\n" + "\n".join(text))
    return "\n".join(tails)


def _members(cluster: LocalRayCluster) -> dict[int, int]:
    """pid -> start time of the cluster's live processes: see :func:`cluster_processes`.

    A ``ray start`` PID counts only while it is still the process we started (same start time), so that a reused
    PID never pulls in someone else's processes, and so does its session, while its leader lives: once the leader
    is gone, a process that reused its PID may lead a session of its own, whose members are not ours. The cluster's
    processes that left their session (a job's driver that outlived its job) carry its marker in their environment
    (``_cluster_marker``), which only what the cluster starts inherits.
    """
    table: dict[int, tuple[int, int, int]] = {}  # pid -> (ppid, session, start time) of every live process
    for entry in os.listdir("/proc"):
        fields = proc_stat(int(entry)) if entry.isdigit() else None
        if fields is not None and fields[0] not in ("Z", "X"):
            table[int(entry)] = (int(fields[1]), int(fields[3]), int(fields[19]))
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)

    def ours(pid: int) -> bool:
        recorded = cluster.start_times.get(pid)
        return pid not in table or recorded is None or table[pid][2] == recorded

    roots = [pid for pid in cluster.pids if pid in table and ours(pid)]
    sessions = set(roots)
    stack = roots + [pid for pid, (_, session, _) in table.items() if session in sessions]
    stack += _marked(cluster, table)  # e.g. a job's driver that outlived its job, in a session of its own
    found: set[int] = set()
    while stack:
        pid = stack.pop()
        if pid not in found:
            found.add(pid)
            stack.extend(children.get(pid, []))
    found.discard(os.getpid())  # never the calling process, whatever became of the PIDs it was given
    return {pid: table[pid][2] for pid in found}


def _cluster_marker(cluster: LocalRayCluster) -> str:
    """The environment entry ``NAME=VALUE`` that the cluster's own processes get at its start (its private folder
    names it) and pass on to every process they start; ``environment()``, for clients of the cluster, leaves it out,
    so that stopping the cluster never takes a client's processes (a user's shell that exported the token path)."""
    return f"TORCHFORCE_RAY_CLUSTER={cluster.temp_dir}"


def _marked(cluster: LocalRayCluster, table: dict[int, tuple[int, int, int]]) -> list[int]:
    """The processes whose environment holds the cluster's marker (``_cluster_marker``), wherever they ended up in
    the process tree."""
    if not cluster.pids:
        return []
    marker = _cluster_marker(cluster).encode()
    found = []
    for pid in table:
        try:
            with open(f"/proc/{pid}/environ", "rb") as file:
                if marker in file.read().split(b"\0"):
                    found.append(pid)
        except OSError:
            continue
    return found


def _signal(pid: int, signum: int, members: dict[int, int]) -> None:
    """Send ``signum`` to ``pid`` if it is one of the collected members and still that process (not a new one)."""
    if pid in members and same_process(pid, members[pid]):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def _kill(cluster: LocalRayCluster, members: dict[int, int]) -> None:
    """SIGKILL every one of ``members`` that is still the process collected, and wait (5 s at most) for their end."""
    for pid in members:
        _signal(pid, signal.SIGKILL, members)
    _wait_until_gone(cluster, members, 5)


def _wait_until_gone(cluster: LocalRayCluster, members: dict[int, int], timeout: float) -> bool:
    """Wait until none of ``members`` is alive (our own children reaped meanwhile); whether that happened."""
    deadline = time.monotonic() + timeout
    while True:
        for process in cluster._processes:
            process.poll()  # collects the exit status of our `ray start` children: no zombies left behind
        if not any(same_process(pid, started) for pid, started in members.items()):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
