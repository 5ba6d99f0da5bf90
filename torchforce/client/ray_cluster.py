"""Ray clusters of a project: one started on this machine (``"address": "local"``) or one that exists already.

A spec of ``"type": "ray"``::

    {"type": "ray", "name": "ray_local", "address": "local", "nodes": 2, "cpus": 1, "gpus": 0}
    {"type": "ray", "name": "lab", "address": "10.0.0.5:8265", "storage": "file:///mnt/shared/torchforce"}

``address: local`` starts a head and ``nodes - 1`` worker nodes of ``ray start`` on 127.0.0.1 (every process
listening on loopback only), each node with ``cpus``/``gpus``, in a private temporary folder; the project's state
database records the PIDs, so ``delete`` ends exactly those processes (never ``ray stop``, which would end every
Ray on the machine). Any other address is the Ray Jobs (dashboard) address of a cluster someone else runs: this
project attaches to it and never stops it. Experiments reach a cluster as Ray Jobs (``backends/ray.py``); their
results go to ``storage``, a folder or URI that both this machine and the cluster reach (for a local cluster, a
folder under ``.tfcli/clusters/<name>/`` unless given).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from torchforce.client.errors import ClientError
from torchforce.client.experiment_file import NAME_PATTERN, NAME_RULE
from torchforce.client.store import ClusterRecord
from torchforce.spec import SpecError, did_you_mean, expect_dict, expect_int

KEYS = ("file", "type", "name", "description", "address", "nodes", "cpus", "gpus", "storage", "python")
ADDRESS = re.compile(r"(?:https?://)?(?P<host>[A-Za-z0-9.-]+|\[[0-9A-Fa-f:]+\]):(?P<port>[0-9]{1,5})")
MAX_LOCAL_NODES = 16
REACH_TIMEOUT = 5.0  # seconds to wait for a cluster's Jobs API to answer


class RayCluster:
    """A Ray cluster spec (see the module docstring); ``create``/``delete``/``status`` act on it."""

    type = "ray"

    def __init__(self, **values: Any) -> None:
        from torchforce.client.cluster import check_keys

        check_keys(values, KEYS, "field of a Ray cluster")
        name = values.get("name")
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            raise SpecError(
                "cluster.name",
                "not a valid cluster name",
                got=name,
                expected=NAME_RULE,
            )
        self.name = name
        self.description = str(values.get("description") or "")
        address = values.get("address", "local")
        if not isinstance(address, str) or (address != "local" and not ADDRESS.fullmatch(address)):
            raise SpecError(
                "cluster.address",
                "not a Ray cluster address",
                got=address,
                expected='"local" (start one on this machine) or the Ray Jobs address "HOST:PORT" '
                "(the dashboard, usually port 8265)",
            )
        self.address = address
        self.nodes = expect_int(values.get("nodes", 1), "cluster.nodes", minimum=1, maximum=MAX_LOCAL_NODES)
        self.cpus = expect_int(values.get("cpus", 1), "cluster.cpus", minimum=1, maximum=1024)
        self.gpus = expect_int(values.get("gpus", 0), "cluster.gpus", minimum=0, maximum=64)
        storage = values.get("storage")
        if storage is not None and (not isinstance(storage, str) or not storage.strip()):
            raise SpecError("cluster.storage", "not a folder or URI", got=storage, expected='"file:///path" or a path')
        if isinstance(storage, str) and "://" in storage and not storage.startswith("file://"):
            raise SpecError(
                "cluster.storage",
                "only a folder that both sides reach (a path, or file://) is supported on Ray clusters so far",
                got=storage,
                hint="Mount a shared folder (NFS, a bucket mount) and give its path; runs that write to a gs:// "
                "bucket are the GKE backend's ('tfcli gcloud link').",
            )
        if isinstance(storage, str) and not storage.startswith("file://"):
            storage = str(Path(storage).expanduser().resolve())  # the client and the jobs resolve it alike
        if storage is None and not self.local:
            raise SpecError(
                "cluster.storage",
                "a cluster this machine did not start needs a storage location",
                expected="a folder or URI that both this machine and the cluster reach "
                '(e.g. "file:///mnt/shared/torchforce", or "gs://bucket/path")',
            )
        self.storage = storage
        python = values.get("python")
        if python is not None and (not isinstance(python, str) or not python or python.startswith("-")):
            raise SpecError("cluster.python", "not a program name", got=python, expected='"python3" or a path')
        self.python = python

    @property
    def local(self) -> bool:
        return self.address == "local"

    def delete(self, project: Any, *, force: bool = False) -> list[str]:
        """End (or, attached, forget) this cluster of ``project``; see the module function ``delete``."""
        return delete(project, find(project, self.name), force=force)

    def status(self, project: Any) -> dict[str, Any]:
        """Its live state from Ray (see the module function ``status``)."""
        return status(find(project, self.name))

    @property
    def dashboard(self) -> str:
        """The Ray Jobs address of an attached cluster, as an HTTP URL."""
        return self.address if self.address.startswith("http") else f"http://{self.address}"

    def spec(self) -> dict[str, Any]:
        values = {
            "type": "ray",
            "name": self.name,
            "address": self.address,
            "nodes": self.nodes,
            "cpus": self.cpus,
            "gpus": self.gpus,
            "storage": self.storage,
        }
        if self.python:
            values["python"] = self.python
        return values

    # ------------------------------------------------------------------ lifecycle

    def create(self, project: Any) -> ClusterRecord:
        """Start the cluster (local) or check that it answers (attached), and record it in the project."""
        if project.store.cluster(self.name) is not None:
            raise ClientError(
                f"cluster '{self.name}' exists already in this project",
                hint=f"See it with 'tfcli cluster list', or delete it with 'tfcli cluster delete -c {self.name}'.",
            )
        if not self.local:
            # a cluster with token authentication (Ray's default): the token Ray's own tools would use
            token = os.environ.get("RAY_AUTH_TOKEN_PATH")
            runtime: dict[str, Any] = {
                "dashboard": self.dashboard,
                "storage": self.storage,
                **({"token": token} if token else {}),
            }
            runtime["ray_version"] = reach(self.dashboard, runtime=runtime)
            return project.store.add_cluster(self.name, self.spec(), "attached", runtime)
        from torchforce.execution.ray_cluster import dashboard_available, start_local_cluster, stop_local_cluster

        if not dashboard_available():  # experiments reach a cluster through its Jobs API, which the dashboard serves
            raise ClientError(
                "starting a Ray cluster for experiments needs Ray's dashboard, which this Ray lacks",
                hint="pip install 'torchforce[ray]' (it installs ray[default]).",
            )

        folder = project.root / ".tfcli" / "clusters" / self.name
        storage = self.storage or str(folder / "storage")
        temp_dir = tempfile.mkdtemp(prefix="tf-ray-")  # Ray's socket paths must stay short: not in the project
        try:
            started = start_local_cluster(nodes=self.nodes, cpus=self.cpus, gpus=self.gpus, temp_dir=temp_dir)
        except Exception as error:
            shutil.rmtree(temp_dir, ignore_errors=True)
            raise ClientError(f"starting the Ray cluster '{self.name}' failed: {error}") from None
        runtime = {
            "address": started.address,
            "dashboard": started.dashboard_address,
            "temp_dir": temp_dir,
            "pids": list(started.pids),
            "start_times": {str(k): v for k, v in started.start_times.items()},
            "token": str(started.auth_token_path),
            "storage": storage,
        }
        try:
            folder.mkdir(parents=True, exist_ok=True)
            return project.store.add_cluster(self.name, self.spec(), "running", runtime)
        except BaseException:
            stop_local_cluster(started)
            shutil.rmtree(temp_dir, ignore_errors=True)
            raise


def from_record(record: ClusterRecord) -> RayCluster:
    return RayCluster(**record.spec)


def local_handle(record: ClusterRecord) -> Any:
    """The ``LocalRayCluster`` a record of a started cluster describes (to stop it, or list its processes)."""
    from torchforce.execution.ray_cluster import LocalRayCluster

    runtime = record.runtime
    pids = [int(pid) for pid in runtime.get("pids", [])]
    start_times = {int(pid): int(ticks) for pid, ticks in (runtime.get("start_times") or {}).items()}
    return LocalRayCluster(
        address=runtime.get("address", ""),
        dashboard_address=runtime.get("dashboard"),
        temp_dir=runtime.get("temp_dir", ""),
        pids=pids,
        start_times=start_times,
    )


def headers(runtime: dict[str, Any]) -> dict[str, str]:
    """The HTTP headers that authenticate to a cluster's dashboard: the token of a cluster this project started."""
    token = runtime.get("token")
    if not token:
        return {}
    try:
        return {"Authorization": "Bearer " + Path(token).read_text().strip()}
    except OSError:
        return {}


def get_json(url: str, runtime: dict[str, Any], timeout: float) -> Any:
    """GET ``url`` (never through a proxy for a loopback address) and parse its JSON."""
    request = urllib.request.Request(url, headers=headers(runtime))
    local = urllib.parse.urlsplit(url).hostname in ("127.0.0.1", "localhost", "::1")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({})) if local else urllib.request.build_opener()
    with opener.open(request, timeout=timeout) as response:
        return json.loads(response.read().decode())


def delete(project: Any, record: ClusterRecord, *, force: bool = False) -> list[str]:
    """End what the project started for the cluster (an attached one is only forgotten); returns the experiments
    that were running there. Refuses while experiments run on it, unless ``force`` (they are marked failed)."""
    from torchforce.client.cluster import forget, running_on

    running = running_on(project, record.name, force=force)
    ran_here = [r for r in project.store.experiments() if r.cluster == record.name]
    _stop_and_bring_home(project, record, ran_here)
    if record.spec.get("address", "local") == "local" and record.runtime.get("pids"):
        from torchforce.execution.ray_cluster import stop_local_cluster

        stop_local_cluster(local_handle(record))
        shutil.rmtree(record.runtime.get("temp_dir") or "/nonexistent", ignore_errors=True)
    forget(project, record.name, running)
    return running


def _stop_and_bring_home(project: Any, record: ClusterRecord, experiments: list[Any]) -> None:
    """Before a cluster goes: end the jobs of ours still running there and download every experiment's results
    (``show``, ``plot`` and ``--resume -c local`` then find them). Best effort: a cluster that does not answer,
    or storage that cannot be read, leaves what was downloaded before."""
    from torchforce.client.backends.ray import RayBackend

    try:
        backend = RayBackend(project, record.name)
    except ClientError:
        return
    for row in experiments:
        if row.status == "running" and row.job:
            try:
                backend.client.stop_job(row.job)
            except Exception:  # noqa: BLE001 - a job or cluster that is gone already
                pass
        try:
            backend.download(project.experiment_folder(row.name))
        except (ClientError, OSError):
            pass  # best effort: the cluster goes either way, and what was downloaded before stays


def reach(dashboard: str, timeout: float = REACH_TIMEOUT, runtime: dict[str, Any] | None = None) -> str:
    """The Ray version a cluster's Jobs API reports; a ClientError if nothing answers there."""
    try:
        data = get_json(f"{dashboard.rstrip('/')}/api/version", runtime or {}, timeout)
    except (OSError, ValueError, urllib.error.URLError) as error:
        reason = getattr(error, "reason", error)
        raise ClientError(
            f"no Ray cluster answers at {dashboard}: {reason}",
            hint="Give the Ray Jobs (dashboard) address, usually HOST:8265, of a running cluster; check that this "
            "machine reaches it (a firewall, a port-forward).",
        ) from None
    return str(data.get("ray_version", "?"))


def status(record: ClusterRecord) -> dict[str, Any]:
    """The cluster's live state from Ray itself: whether it answers, its nodes alive, CPUs and GPUs in all and free,
    and the CPUs of its largest node (``cpus_one_node``: what one job's process or one actor can have at most); the
    nodes from Ray's state API, what is in use from the autoscaler's report, a few seconds behind."""
    dashboard = record.runtime.get("dashboard")
    result: dict[str, Any] = {
        "state": "unreachable",
        "nodes": None,
        "cpus": None,
        "cpus_free": None,
        "cpus_one_node": None,
        "gpus": None,
        "gpus_free": None,
    }
    if not dashboard:
        return result
    try:
        nodes = get_json(f"{dashboard}/api/v0/nodes?limit=1000", record.runtime, REACH_TIMEOUT)
        nodes = [node for node in nodes["data"]["result"]["result"] if node.get("state") == "ALIVE"]
        report = get_json(f"{dashboard}/api/cluster_status", record.runtime, REACH_TIMEOUT)
    except (OSError, ValueError, KeyError, TypeError) as error:
        result["state"] = f"unreachable ({getattr(error, 'reason', error)})"
        return result
    load = (((report.get("data") or {}).get("clusterStatus") or {}).get("loadMetricsReport") or {}).get("usage") or {}
    result.update(state="alive", nodes=len(nodes))
    for resource, key in (("CPU", "cpus"), ("GPU", "gpus")):
        per_node = [float((node.get("resources_total") or {}).get(resource, 0.0)) for node in nodes]
        total, used = sum(per_node), float((load.get(resource) or [0.0])[0])
        result[key], result[f"{key}_free"] = total, max(total - used, 0.0)
        if resource == "CPU":
            result["cpus_one_node"] = max(per_node, default=0.0)
    return result


def find(project: Any, name: str) -> ClusterRecord:
    """The project's cluster ``name``; a ClientError with a did-you-mean if there is none."""
    record = project.store.cluster(name)
    if record is None and name in project.config_names("clusters"):
        values, _ = project.load_config(name, "clusters", "cluster")
        kind = values.get("type", "gke") if isinstance(values, dict) else "?"
        raise ClientError(
            f"no cluster named '{name}' in this project: configs/clusters/ has a {kind} spec of that name, but no "
            "such cluster was created",
            hint=f"Create it with 'tfcli cluster create -f {name}'"
            + (" (in the linked Google Cloud project; see 'tfcli gcloud link')." if kind == "gke" else "."),
        )
    if record is None:
        known = [r.name for r in project.store.clusters()]
        guess = did_you_mean(name, known)
        raise ClientError(
            f"no cluster named '{name}' in this project",
            hint=(f"Did you mean '{guess}'? " if guess else "")
            + ("Known: " + ", ".join(known) + ". " if known else "")
            + "Create one with 'tfcli cluster create -f ray_local', or give -c local to run on this machine.",
        )
    return record


def load_spec(values: Any, path: str = "cluster") -> RayCluster:
    return RayCluster(**expect_dict(values, path))
