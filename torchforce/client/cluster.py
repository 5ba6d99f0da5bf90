"""The Cluster of seed 000: a GKE cluster spec (nodes, machine type, GPUs, disk, location).

Only the spec is handled here: checking it and turning it into ``gcloud`` command lines. Creating and deleting
clusters for real belongs to the GKE backend, which is not built yet; ``create``/``delete`` say so plainly.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from torchforce.client.errors import ClientError
from torchforce.spec import SpecError, did_you_mean, expect_choice, expect_dict, expect_int, load_file

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
    "type",
)
NAME = re.compile(r"[a-z]([a-z0-9-]{0,38}[a-z0-9])?")


def _check_keys(values: dict[str, Any]) -> None:
    for key in values:
        if key not in KEYS:
            guess = did_you_mean(key, KEYS)
            raise SpecError(
                f"cluster.{key}",
                "unknown cluster field",
                hint=f"Did you mean '{guess}'?" if guess else "Known: " + ", ".join(KEYS) + ".",
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

    def __init__(self, **kwargs: Any) -> None:
        _check_keys(kwargs)
        values: dict[str, Any] = {}
        if kwargs.get("file"):
            path = find_cluster_file(str(kwargs["file"]))
            try:
                values = dict(expect_dict(load_file(path), "cluster"))
                _check_keys({key: value for key, value in values.items() if key != "file"})
            except SpecError as error:
                raise error.with_file(str(path)) from None
        values.update({key: value for key, value in kwargs.items() if key != "file" and value is not None})
        values.pop("type", None)
        self.file = kwargs.get("file")
        name = values.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name.replace("_", "-").lower()):
            raise SpecError(
                "cluster.name",
                "not a valid cluster name",
                got=name,
                expected="1-40 letters, digits, '-' or '_', starting with a letter",
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
        self.location = values.get("location")
        self.machine_type = values.get("machine_type") or self._custom_machine_type()

    def _custom_machine_type(self) -> str:
        if self.cpus_per_node is None and self.memory_per_node is None:
            return "n1-standard-1"
        if self.cpus_per_node is None or self.memory_per_node is None:
            raise SpecError(
                "cluster.machine_type",
                "give machine_type, or both cpus_per_node and memory_per_node",
                got={"cpus_per_node": self.cpus_per_node, "memory_per_node": self.memory_per_node},
            )
        return f"custom-{self.cpus_per_node}-{self.memory_per_node * 1024}"

    def spec(self) -> dict[str, Any]:
        """The settings that matter, as stored in an experiment (seed 000's ``get_spec``)."""
        return {
            "name": self.name,
            "num_nodes": self.num_nodes,
            "machine_type": self.machine_type,
            "gpus_per_node": self.gpus_per_node,
            "gpu_type": self.gpu_type,
            "disk_size": self.disk_size,
            "location": self.location,
        }

    get_spec = spec

    def create_command(self) -> list[str]:
        """The ``gcloud`` command line that creates this cluster."""
        command = [
            "gcloud",
            "container",
            "clusters",
            "create",
            self.name,
            "--machine-type",
            self.machine_type,
            "--disk-size",
            str(self.disk_size),
            "--num-nodes",
            str(self.num_nodes),
        ]
        if self.location:
            command += ["--zone", self.location]
        if self.gpus_per_node:
            command += ["--accelerator", f"type={self.gpu_type},count={self.gpus_per_node}"]
        return command

    def delete_command(self) -> list[str]:
        command = ["gcloud", "container", "clusters", "delete", self.name, "--quiet", "--async"]
        return command + (["--zone", self.location] if self.location else [])

    def create(self) -> None:
        raise ClientError(
            "creating GKE clusters is not available yet (the GKE backend is still to come)",
            hint="Run experiments locally: leave out -C/--cluster.",
        )

    def delete(self) -> None:
        raise ClientError("deleting GKE clusters is not available yet (the GKE backend is still to come)")


def get_cluster_from_string(cluster: str, running_clusters: dict[str, Any] | None = None) -> Cluster:
    """A Cluster from a spec file or a known cluster's name (``running_clusters`` maps names to specs)."""
    if running_clusters and cluster in running_clusters:
        return Cluster(**running_clusters[cluster])
    from torchforce.client.project import Project

    project = Project.find()
    data, _ = project.load_config(cluster, "clusters", "cluster")
    return Cluster(**data)
