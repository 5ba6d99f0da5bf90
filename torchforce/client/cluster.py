"""Cluster specs. A spec's ``type`` says which kind: ``gke`` (the default, the 2018 client's Cluster: nodes, machine
type, GPUs, disk, location; docs/tensorforce-0.4.md, Clusters), ``ray`` (a Ray cluster on this machine or one to attach
to: ``ray_cluster.py``) or ``local`` (this machine, no cluster at all).

For GKE the spec is checked here; creating, listing and deleting GKE clusters (the ``gcloud`` and ``kubectl`` calls,
the cost shown first) is ``gke.py``'s, which ``Cluster.create``/``delete``/``ssh_parallel`` call.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from torchforce.client.errors import ClientError
from torchforce.client.gcloud import ZONE
from torchforce.spec import SpecError, did_you_mean, expect_bool, expect_choice, expect_dict, expect_int, load_file

GPU_TYPES = ("nvidia-tesla-t4", "nvidia-l4", "nvidia-tesla-a100", "nvidia-h100-80gb")
LEGACY_GPU_TYPES = ("nvidia-tesla-k80", "nvidia-tesla-p100")  # the 2018 names; retired on GKE
KEYS = (
    "file",
    "name",
    "machine_type",
    "cpus_per_node",
    "gpus_per_node",
    "gpu_type",
    "memory_per_node",
    "num_nodes",
    "disk_size",
    "location",
    "spot",
    "min_nodes",
    "max_nodes",
    "type",
)
NAME = re.compile(r"[a-z]([a-z0-9-]{0,38}[a-z0-9])?")
# What gcloud takes for these (checked before a value goes into a command line: none may start with '-')
LOCATION = re.compile(r"[a-z]+(-[a-z0-9]+){1,3}")
MACHINE_TYPE = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+){1,4}")


def _gcloud_value(value: Any, path: str, pattern: re.Pattern[str], expected: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise SpecError(path, "not a value gcloud takes here", got=value, expected=expected)
    return value


def check_keys(values: dict[str, Any], keys: tuple[str, ...] = KEYS, what: str = "cluster field") -> None:
    """Refuse a field ``keys`` lacks, with a did-you-mean (shared by every kind of cluster spec)."""
    for key in values:
        if key not in keys:
            guess = did_you_mean(key, keys)
            raise SpecError(
                f"cluster.{key}",
                f"unknown {what}",
                hint=f"Did you mean '{guess}'?" if guess else "Known: " + ", ".join(keys) + ".",
            )


def find_cluster_file(value: str) -> Path:
    """The cluster spec file ``value`` names: an existing path, else (as ``Experiment(file=...)`` looks names up)
    ``configs/clusters/<name>[.json]`` of the project around the current folder, or outside any project the
    config torchforce ships by that name."""
    from torchforce.client.project import Project
    from torchforce.configs import folder, names

    path = Path(value).expanduser()
    if path.is_file():
        return path
    try:
        project = Project.find()
    except ClientError:
        project = None
    if project is not None:
        return project.find_config(value, "clusters", "cluster.file")
    bare = path.name if path.suffix in (".json", ".yaml", ".yml") else path.name + ".json"
    if len(path.parts) == 1 and (folder("clusters") / bare).is_file():
        return folder("clusters") / bare
    guess = did_you_mean(Path(bare).stem, names("clusters"))
    raise SpecError(
        "cluster.file",
        f"file not found: '{value}', nor a shipped cluster config '{bare}'",
        hint="Known: " + ", ".join(names("clusters")) + "." + (f" Did you mean '{guess}'?" if guess else ""),
    )


class Cluster:
    """``Cluster(file=..., name=..., num_nodes=3, machine_type=... | cpus_per_node + memory_per_node, ...)``.

    Keyword arguments override the values in ``file``. ``_`` in names becomes ``-`` (GKE names allow no ``_``).
    """

    type = "gke"

    def __new__(cls, **kwargs: Any) -> Any:
        """``Cluster(...)`` of a Ray spec (``type`` "ray", given or in ``file``) is a ``RayCluster``."""
        kind = kwargs.get("type")
        if kind is None and isinstance(kwargs.get("file"), (str, Path)) and kwargs["file"]:
            try:
                data = load_file(find_cluster_file(str(kwargs["file"])))
            except SpecError:
                data = None  # __init__ reports it
            kind = data.get("type") if isinstance(data, dict) else None
        if cls is Cluster and kind == "ray":
            from torchforce.client.ray_cluster import RayCluster

            values = {}
            if kwargs.get("file"):
                values = dict(expect_dict(load_file(find_cluster_file(str(kwargs["file"]))), "cluster"))
            values.update({key: value for key, value in kwargs.items() if key != "file" and value is not None})
            return RayCluster(**values)
        return super().__new__(cls)

    def __init__(self, **kwargs: Any) -> None:
        check_keys(kwargs)
        values: dict[str, Any] = {}
        if kwargs.get("file") is not None and not isinstance(kwargs["file"], (str, Path)):
            raise SpecError("cluster.file", "not a file name", got=kwargs["file"], expected="a string")
        if kwargs.get("file"):
            path = find_cluster_file(str(kwargs["file"]))
            try:
                values = dict(expect_dict(load_file(path), "cluster"))
                check_keys({key: value for key, value in values.items() if key != "file"})
            except SpecError as error:
                raise error.with_file(str(path)) from None
        values.update({key: value for key, value in kwargs.items() if key != "file" and value is not None})
        values.pop("type", None)
        for key in ("machine_type", "gpu_type", "location"):  # they become gcloud arguments
            if values.get(key) is not None and not isinstance(values[key], str):
                raise SpecError(f"cluster.{key}", "not a string", got=values[key], expected="a string or null")
        self.file = kwargs.get("file")
        name = values.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name.replace("_", "-").lower()):
            raise SpecError(
                "cluster.name",
                "not a valid cluster name",
                got=name,
                expected="1-40 letters, digits, '-' or '_', starting with a letter and ending with a letter or digit "
                "(made lower-case, '_' as '-')",
            )
        self.name = name.replace("_", "-").lower()
        self.num_nodes = expect_int(values.get("num_nodes", 3), "cluster.num_nodes", minimum=1)
        self.disk_size = expect_int(values.get("disk_size", 100), "cluster.disk_size", minimum=10)
        self.cpus_per_node = expect_int(
            values.get("cpus_per_node"), "cluster.cpus_per_node", minimum=1, allow_none=True
        )
        self.memory_per_node = expect_int(
            values.get("memory_per_node"), "cluster.memory_per_node", minimum=1, allow_none=True
        )
        self.gpus_per_node = expect_int(values.get("gpus_per_node", 0) or 0, "cluster.gpus_per_node", minimum=0)
        self.gpu_type = values.get("gpu_type")
        if self.gpus_per_node:
            self.gpu_type = expect_choice(
                self.gpu_type or GPU_TYPES[0], "cluster.gpu_type", GPU_TYPES + LEGACY_GPU_TYPES
            )
            if self.gpu_type in GPU_TYPES:  # a count the machines of that GPU come with
                from torchforce.client.prices import gpu_machine_type

                gpu_machine_type(self.gpu_type, self.gpus_per_node)
        self.location = _gcloud_value(
            values.get("location"),
            "cluster.location",
            LOCATION,
            "a zone like 'europe-west1-d' (lower-case letters, digits and '-')",
        )
        if self.location is not None and not ZONE.fullmatch(self.location):
            raise SpecError(
                "cluster.location",
                "a zone, not a region: a cluster in a region runs num_nodes nodes in each of its zones (three times "
                "the nodes and the cost shown)",
                got=self.location,
                expected=f"a zone of it, like '{self.location}-b'",
            )
        self.machine_type = _gcloud_value(
            values.get("machine_type"),
            "cluster.machine_type",
            MACHINE_TYPE,
            "a machine type like 'n1-standard-4' or 'custom-4-16384'",
        )
        self.machine_type = self.machine_type or self._custom_machine_type()
        if (
            self.gpus_per_node
            and self.gpu_type == "nvidia-tesla-t4"
            and not self.machine_type.startswith(("n1-", "custom-"))
        ):
            raise SpecError(
                "cluster.machine_type",
                "T4 GPUs attach to N1 machines only",
                got=self.machine_type,
                expected="an n1-* machine type, or cpus_per_node and memory_per_node (an N1 custom machine)",
            )
        self.spot = expect_bool(values.get("spot", False), "cluster.spot")
        if self.gpus_per_node and self.gpu_type in GPU_TYPES and not self.spot:
            from torchforce.client.prices import gpu_machine_type, spot_only

            machine = gpu_machine_type(self.gpu_type, self.gpus_per_node)
            if spot_only(machine):  # refused now: GKE refuses the pool after the cluster is made, and it bills
                raise SpecError(
                    "cluster.spot",
                    f"{machine} nodes ({self.gpus_per_node} x {self.gpu_type}) are offered only as Spot VMs",
                    got=False,
                    expected='true ("spot": true), or 8 GPUs a node',
                )
        self.min_nodes = expect_int(values.get("min_nodes"), "cluster.min_nodes", minimum=0, allow_none=True)
        self.max_nodes = expect_int(values.get("max_nodes"), "cluster.max_nodes", minimum=1, allow_none=True)
        if (self.min_nodes is None) != (self.max_nodes is None):
            raise SpecError(
                "cluster.max_nodes" if self.max_nodes is None else "cluster.min_nodes",
                "autoscaling needs both min_nodes and max_nodes",
                got={"min_nodes": self.min_nodes, "max_nodes": self.max_nodes},
            )
        if self.max_nodes is not None and not (self.min_nodes or 0) <= self.num_nodes <= self.max_nodes:
            raise SpecError(
                "cluster.num_nodes",
                "the starting size must lie within the autoscaling range",
                got=self.num_nodes,
                expected=f"between min_nodes {self.min_nodes} and max_nodes {self.max_nodes}",
            )

    def _custom_machine_type(self) -> str:
        if self.cpus_per_node is None and self.memory_per_node is None:
            return "e2-standard-4"  # 2018 had n1-standard-1, too small for a Ray pod beside GKE's own
        if self.cpus_per_node is None or self.memory_per_node is None:
            raise SpecError(
                "cluster.machine_type",
                "give machine_type, or both cpus_per_node and memory_per_node",
                got={"cpus_per_node": self.cpus_per_node, "memory_per_node": self.memory_per_node},
            )
        return f"custom-{self.cpus_per_node}-{self.memory_per_node * 1024}"

    def spec(self) -> dict[str, Any]:
        """The settings that matter, as stored in an experiment (the 2018 Cluster's ``get_spec``)."""
        return {
            "type": "gke",
            "name": self.name,
            "num_nodes": self.num_nodes,
            "machine_type": self.machine_type,
            "gpus_per_node": self.gpus_per_node,
            "gpu_type": self.gpu_type,
            "disk_size": self.disk_size,
            "location": self.location,
            "spot": self.spot,
            "min_nodes": self.min_nodes,
            "max_nodes": self.max_nodes,
        }

    get_spec = spec

    def create_command(self, link: Any) -> list[str]:
        """The ``gcloud`` command line that creates this cluster in the linked project (the first of
        ``gke.create_commands``). Every value is checked against a strict pattern and passed as ``--flag=value``, so
        none can become a flag of its own; print it with ``shlex.join``."""
        from torchforce.client import gke

        return gke.create_commands(self, link)[0]

    def delete_command(self, link: Any) -> list[str]:
        from torchforce.client import gke

        return gke.delete_command(self, link)

    def create(self, *, yes: bool = True, dry_run: bool = False) -> Any:
        """Create the cluster in the project's linked Google Cloud project (the project around the current folder)
        and point kubectl at it; returns its record. ``yes=False`` asks for confirmation after showing the cost."""
        from torchforce.client import gke
        from torchforce.client.project import Project

        return gke.create(Project.find(), self, yes=yes, dry_run=dry_run)

    def delete(self, *, force: bool = False, dry_run: bool = False) -> list[str]:
        """Delete (shut down) the cluster in the cloud; returns the experiments that were running on it."""
        from torchforce.client import gke
        from torchforce.client.project import Project

        project = Project.find()
        return gke.delete(project, gke.find(project, self.name), force=force, dry_run=dry_run)

    def ssh_parallel(self, *items: str | tuple[str, str], silent: bool = True) -> list[Any]:
        """Run commands on every node of the cluster at once: a string is a command (``gcloud compute ssh``), a
        pair (from, to) copies a file to each node (``gcloud compute scp``). Returns each call's result."""
        from torchforce.client import gke
        from torchforce.client.project import Project

        return gke.ssh_parallel(Project.find(), self.name, list(items), silent=silent)


class LocalCluster:
    """``{"type": "local"}``: this machine, where experiments run by default."""

    type = "local"

    def __init__(self, **values: Any) -> None:
        unknown = set(values) - {"type", "name", "description", "file"}
        if unknown:
            raise SpecError(f"cluster.{sorted(unknown)[0]}", "unknown field of a local cluster", hint="Known: name.")
        self.name = str(values.get("name") or "local")

    def spec(self) -> dict[str, Any]:
        return {"type": "local", "name": self.name}


CLUSTER_TYPES = ("gke", "ray", "local")


def runs_on(project: Any, name: str) -> list[str]:
    """The experiments running on the cluster ``name`` now. A row that says running is first checked against its
    workload, as 'tfcli experiment list' does (``Experiment.reconciled``): a run on a cluster writes its end to its
    results, not to the project's state database, so a run that has finished, paused, stopped or failed since the
    last look takes that status here and is not counted."""
    from torchforce.client.experiment import Experiment

    running = []
    for record in project.store.experiments():
        if record.cluster != name or record.status != "running":
            continue
        try:
            now = Experiment.load(project, record.name, damaged=True).reconciled()
        except ClientError:  # deleted meanwhile
            continue
        if now.status == "running" and now.cluster == name:
            running.append(record.name)
    return running


def running_on(project: Any, name: str, *, force: bool) -> list[str]:
    """The experiments running on the cluster ``name`` (``runs_on``); deleting it is refused while there are some,
    unless ``force`` (``forget`` then marks them failed)."""
    running = runs_on(project, name)
    if running and not force:
        raise ClientError(
            f"cluster '{name}' runs experiments: {', '.join(running)}",
            hint="Pause or stop them first, or give --force to end them with the cluster.",
        )
    return running


def forget(project: Any, name: str, running: list[str]) -> None:
    """The cluster ``name`` is gone: the experiments that ran on it fail, and the project forgets it."""
    import time

    for experiment in running:
        project.store.update_experiment(
            experiment,
            expect=("running",),
            status="failed",
            pid=None,
            job=None,
            ended_at=time.time(),
            message=f"its cluster '{name}' was deleted while it ran",
        )
    project.store.remove_cluster(name)


def cluster_from_spec(values: Any, path: str = "cluster") -> Any:
    """The cluster a spec describes, by its ``type`` (default ``gke``, as 2018's cluster files have none)."""
    values = dict(expect_dict(values, path))
    kind = expect_choice(values.get("type", "gke"), f"{path}.type", CLUSTER_TYPES)
    if kind == "ray":
        from torchforce.client.ray_cluster import RayCluster

        return RayCluster(**values)
    if kind == "local":
        return LocalCluster(**values)
    return Cluster(**values)


def get_cluster_from_string(cluster: str, running_clusters: dict[str, Any] | None = None) -> Any:
    """A cluster from a spec file or a known cluster's name: one of ``running_clusters`` (names to specs), else one
    the project has created, else a spec file (a path, or a name in configs/clusters/)."""
    if running_clusters and cluster in running_clusters:
        return cluster_from_spec(running_clusters[cluster])
    from torchforce.client.project import Project

    project = Project.find()
    record = project.store.cluster(cluster)  # by its exact name: 'single_node_cluster' is the file's
    if record is not None:
        return cluster_from_spec(record.spec)
    data, _ = project.load_config(cluster, "clusters", "cluster")
    return cluster_from_spec(data)
