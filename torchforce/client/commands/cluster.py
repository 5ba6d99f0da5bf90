"""``tfcli cluster create | delete | list``: cluster specs (creating GKE clusters comes with the GKE backend)."""

from __future__ import annotations

import argparse
from typing import Any

from torchforce.client.commands import add_command, command, positive_int
from torchforce.client.commands.output import format_table
from torchforce.client.errors import ClientError
from torchforce.client.project import Project


def add_parser(groups: argparse._SubParsersAction) -> None:
    group = add_command(
        groups,
        "cluster",
        help="cluster specs (the GKE backend is to come)",
        description="Cluster specs: the machines an experiment would run on with the GKE backend (still to come).\n"
        "Experiments run on this machine meanwhile; these commands check specs and show the gcloud commands.",
        examples=["tfcli cluster list", "tfcli cluster create -f small_cluster --dry-run"],
    )
    clusters = group.add_subparsers(dest="command", metavar="COMMAND", help="one of:")
    create = add_command(
        clusters,
        "create",
        help="create a GKE cluster (not available yet; --dry-run works)",
        description="Create a GKE cluster from a spec file and/or flags (flags override the file). Creating it\n"
        "needs the GKE backend, still to come; --dry-run prints the gcloud command that would run.",
        examples=["tfcli cluster create -f small_cluster --dry-run", "tfcli cluster create -n big -s 8 --dry-run"],
    )
    create.add_argument("-f", "--file", help="a cluster spec file, or a name in configs/clusters/")
    create.add_argument("-n", "--name", help="the cluster's name (letters, digits, '-')")
    create.add_argument("-s", "--size", type=positive_int, default=None, help="number of nodes (default 3)")
    create.add_argument("-m", "--machine-type", help="the GCE machine type of every node (default n1-standard-1)")
    create.add_argument("-d", "--disk-size", type=positive_int, default=None, help="GB of disk per node (default 100)")
    create.add_argument("--dry-run", action="store_true", help="print the gcloud command instead of running it")
    delete = add_command(
        clusters,
        "delete",
        help="delete a GKE cluster (not available yet)",
        description="Delete a GKE cluster (or all of them). This needs the GKE backend, still to come.",
        examples=["tfcli cluster delete -c small-cluster", "tfcli cluster delete --all"],
    )
    delete.add_argument("-c", "--cluster", help="the name of the cluster to delete")
    delete.add_argument("-A", "--all", action="store_true", help="delete every cluster of this project")
    add_command(
        clusters,
        "list",
        help="list the cluster specs of this project",
        description="A table of the cluster specs in configs/clusters/: location, machine type, nodes, GPUs.",
        examples=["tfcli cluster list"],
    )


@command("cluster", "create")
def cluster_create(args: argparse.Namespace) -> None:
    from torchforce.client.cluster import Cluster

    project = Project.find()
    values: dict[str, Any] = {}
    if args.file:
        values, _ = project.load_config(args.file, "clusters", "cluster")
    overrides = {
        "name": args.name,
        "num_nodes": args.size,
        "machine_type": args.machine_type,
        "disk_size": args.disk_size,
    }
    cluster = Cluster(**{**values, **{k: v for k, v in overrides.items() if v is not None}})
    if args.dry_run:
        print(" ".join(cluster.create_command()))
        return
    cluster.create()


@command("cluster", "delete")
def cluster_delete(args: argparse.Namespace) -> None:
    raise ClientError("deleting GKE clusters is not available yet (the GKE backend is still to come)")


@command("cluster", "list")
def cluster_list(args: argparse.Namespace) -> None:
    from torchforce.client.cluster import Cluster

    project = Project.find()
    rows = []
    for name in project.config_names("clusters"):
        values, _ = project.load_config(name, "clusters", "cluster")
        cluster = Cluster(**values)
        rows.append(
            [
                cluster.name,
                cluster.location or "(default)",
                cluster.machine_type,
                cluster.num_nodes,
                cluster.gpus_per_node,
                "spec only",
            ]
        )
    print(format_table(["Cluster", "Location", "Machine-Type", "Nodes", "GPUs/Node", "Status"], rows))
    print("\nExperiments run on this machine by default; creating GKE clusters comes with the GKE backend.")
