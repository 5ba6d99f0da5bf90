"""``tfcli cluster create | delete | list``: the project's Ray clusters (started here or attached) and GKE clusters
(in the linked Google Cloud project)."""

from __future__ import annotations

import argparse
from typing import Any

from torchforce.client.cluster import running_on, runs_on
from torchforce.client.commands import add_command, command, positive_int
from torchforce.client.commands.output import format_table, print_json
from torchforce.client.errors import ClientError
from torchforce.client.project import Project
from torchforce.client.ray_cluster import NAME_RULE


def add_parser(groups: argparse._SubParsersAction) -> None:
    group = add_command(
        groups,
        "cluster",
        help="the project's clusters: Ray (here or attached) and GKE",
        description='Clusters experiments run on. A Ray cluster is started on this machine ("address": "local": '
        'a head\nand worker nodes on 127.0.0.1) or attached to ("address": "HOST:8265"). A GKE cluster (a spec '
        'without\n"type", or "type": "gke") is created in the project\'s linked Google Cloud project '
        "(see 'tfcli gcloud link')\nwith KubeRay; its cost per hour is shown first. Experiments run on any of "
        "them with\n'tfcli experiment start -e NAME -c CLUSTER'.",
        examples=[
            "tfcli cluster create -f ray_local",
            "tfcli cluster create -f single_node_gpu_cluster --yes",
            "tfcli cluster list",
            "tfcli cluster delete -c ray_local",
        ],
    )
    clusters = group.add_subparsers(dest="command", metavar="COMMAND", help="one of:")
    create = add_command(
        clusters,
        "create",
        help="create a GKE cluster, start a Ray cluster here, or attach to one",
        description="Create a cluster from a spec file and/or flags (flags override the file). A Ray spec with\n"
        '"address": "local" starts its nodes on this machine (loopback only) and records their processes;\n'
        "another address attaches to a running cluster (checked to answer). A GKE spec is created in the\n"
        "linked Google Cloud project with the Ray operator (KubeRay) and a GPU node pool for GPU specs: its\n"
        "cost per hour is shown, then confirmed (--yes to skip asking). --dry-run prints every gcloud and\n"
        "kubectl call instead of running it.",
        examples=[
            "tfcli cluster create -f ray_local",
            "tfcli cluster create -f ray_local -n big --nodes 3 --cpus 2",
            "tfcli cluster create -f ray_remote --address 10.0.0.5:8265 --storage file:///mnt/shared/tf",
            "tfcli cluster create -f small_cluster --dry-run",
            "tfcli cluster create -f single_node_gpu_cluster --gpu-type nvidia-l4 --spot --yes",
        ],
    )
    create.add_argument("-f", "--file", help="a cluster spec file, or a name in configs/clusters/")
    create.add_argument(
        "-n",
        "--name",
        help=f"the cluster's name: {NAME_RULE} (GKE also takes upper-case letters: its name is made lower-case, "
        "'_' as '-')",
    )
    create.add_argument("--address", help="Ray: 'local', or the Ray Jobs address HOST:PORT of a running cluster")
    create.add_argument("--nodes", type=positive_int, help="Ray, local: number of nodes (head included)")
    create.add_argument("--cpus", type=positive_int, help="Ray, local: CPUs of each node")
    create.add_argument("--storage", help="Ray: where results go, a folder or URI both sides reach")
    create.add_argument("-s", "--size", type=positive_int, default=None, help="GKE: number of nodes (default 3)")
    create.add_argument("-m", "--machine-type", help="GKE: the machine type of every node (default e2-standard-4)")
    create.add_argument("--disk-size", type=positive_int, default=None, help="GKE: GB of disk per node")
    create.add_argument("--zone", help="GKE: the zone (default: the spec's location, else the link's zone)")
    create.add_argument("--gpus", type=int, default=None, help="GKE: GPUs per node (0 for none)")
    create.add_argument("--gpu-type", help="GKE: nvidia-tesla-t4, nvidia-l4, nvidia-tesla-a100 or nvidia-h100-80gb")
    create.add_argument("--spot", action="store_true", default=None, help="GKE: spot nodes (cheaper, can be taken)")
    create.add_argument("-y", "--yes", action="store_true", help="GKE: create without asking (the cost is shown)")
    create.add_argument("--dry-run", action="store_true", help="print what would be done instead of doing it")
    delete = add_command(
        clusters,
        "delete",
        help="delete a GKE cluster, end a local Ray cluster (or forget an attached one)",
        description="Delete a GKE cluster in the cloud (gcloud container clusters delete; results stay in the "
        "bucket).\nEnd exactly the processes the project started for a local Ray cluster (never 'ray stop', "
        "which\nwould end every Ray on the machine); an attached cluster is only forgotten. Refused while\n"
        "experiments run on it, unless --force (they are marked failed). Each run's status is read from its\n"
        "results first, as 'experiment list' does: a run that has finished, paused, stopped or failed there\n"
        "does not count, and keeps that status.",
        examples=["tfcli cluster delete -c ray_local", "tfcli cluster delete --all --force"],
    )
    delete.add_argument("-c", "--cluster", help="the name of the cluster to delete")
    delete.add_argument("--all", action="store_true", help="delete every cluster of this project")
    delete.add_argument(
        "--force", action="store_true", help="also while experiments run on it (those still running are marked failed)"
    )
    delete.add_argument("--dry-run", action="store_true", help="GKE: print the gcloud call instead of running it")
    listing = add_command(
        clusters,
        "list",
        help="the project's clusters, live, and the cluster specs",
        description="A table of the project's Ray clusters as Ray reports them now (nodes alive, CPUs and GPUs\n"
        "total and free, experiments on it); the linked Google Cloud project's GKE clusters as gcloud lists\n"
        "them (status, nodes, GPUs, cost per hour, experiments on it); then the specs in configs/clusters/.",
        examples=["tfcli cluster list", "tfcli cluster list --json"],
    )
    listing.add_argument("--json", action="store_true", help="machine-readable output")


# The flags of 'cluster create' that set a key of a cluster spec, as the user writes them, by kind of cluster.
SPEC_FLAGS = {
    "ray": {"--address": "address", "--nodes": "nodes", "--cpus": "cpus", "--storage": "storage"},
    "gke": {
        "-s/--size": "num_nodes",
        "-m/--machine-type": "machine_type",
        "--disk-size": "disk_size",
        "--zone": "location",
        "--gpus": "gpus_per_node",
        "--gpu-type": "gpu_type",
        "--spot": "spot",
    },
}


def _spec_values(project: Project, args: argparse.Namespace) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if args.file:
        values, _ = project.load_config(args.file, "clusters", "cluster")
        if not isinstance(values, dict):
            from torchforce.spec import expect_dict

            values = dict(expect_dict(values, "cluster"))
    if args.file:  # a file says its kind, GKE where it names none (the cluster spec's default)
        kind = values.get("type") or "gke"
    else:
        kind = "ray" if any(v is not None for v in (args.address, args.nodes, args.cpus)) else "gke"
    own, other = ("ray", "gke") if kind == "ray" else ("gke", "ray")
    wrong = _given(args, other)
    if wrong:  # named as the user typed it: --gpus, not the key it sets (gpus_per_node)
        raise ClientError(
            f"{next(iter(wrong))} is not a setting of a {kind} cluster",
            hint=f"A {kind} cluster takes " + ", ".join(SPEC_FLAGS[own]) + ".",
        )
    overrides = {SPEC_FLAGS[own][flag]: value for flag, value in _given(args, own).items()}
    merged = {**values, "type": kind, **({"name": args.name} if args.name is not None else {}), **overrides}
    if "gpu_type" in overrides and not merged.get("gpus_per_node"):  # (a cluster without GPUs takes no type)
        raise ClientError(
            f"--gpu-type {overrides['gpu_type']} without GPUs: the cluster would have none",
            hint="Give --gpus N too (GPUs per node), e.g. --gpus 1.",
        )
    return merged


def _given(args: argparse.Namespace, kind: str) -> dict[str, Any]:
    """The flags of ``SPEC_FLAGS[kind]`` the user gave, with their values."""
    values = {flag: getattr(args, flag.split("/")[-1].lstrip("-").replace("-", "_")) for flag in SPEC_FLAGS[kind]}
    return {flag: value for flag, value in values.items() if value is not None}


@command("cluster", "create")
def cluster_create(args: argparse.Namespace) -> None:
    from torchforce.client.cluster import cluster_from_spec

    project = Project.find()
    cluster = cluster_from_spec(_spec_values(project, args))
    if cluster.type == "local":
        raise ClientError("the local cluster is this machine: there is nothing to create", hint="Run experiments.")
    if cluster.type == "gke":
        from torchforce.client import gke

        record = gke.create(project, cluster, yes=args.yes, dry_run=args.dry_run)
        if record is None:
            print("Dry run: nothing was changed.")
            return
        print(
            f"Created GKE cluster '{record.name}' in {record.runtime['zone']} "
            f"(kubectl context {record.runtime['context']})"
        )
        print(f"Run an experiment on it: tfcli experiment start -e NAME -c {record.name}")
        print(f"It costs money until deleted: tfcli cluster delete -c {record.name}")
        return
    if args.dry_run:
        where = (
            f"start {cluster.nodes} Ray node(s) of {cluster.cpus} CPU(s) on 127.0.0.1"
            if cluster.local
            else f"attach to the Ray cluster at {cluster.dashboard}"
        )
        print(f"Would {where} as cluster '{cluster.name}'")
        return
    record = cluster.create(project)
    if cluster.local:
        print(
            f"Started Ray cluster '{record.name}': {cluster.nodes} node(s) on 127.0.0.1, Ray Jobs at "
            f"{record.runtime['dashboard']}; processes {', '.join(map(str, record.runtime['pids']))}"
        )
    else:
        print(
            f"Attached to the Ray cluster '{record.name}' at {record.runtime['dashboard']} "
            f"(Ray {record.runtime['ray_version']})"
        )
    print(f"Run an experiment on it: tfcli experiment start -e NAME -c {record.name}")


@command("cluster", "delete")
def cluster_delete(args: argparse.Namespace) -> None:
    from torchforce.client import ray_cluster

    project = Project.find()
    if args.all == bool(args.cluster):
        raise ClientError("give -c CLUSTER or --all", hint="See the clusters with 'tfcli cluster list'.")
    records = project.store.clusters() if args.all else [ray_cluster.find(project, args.cluster)]
    if args.all and not args.force:  # refuse before deleting any, so --all does all or nothing
        for record in records:
            running_on(project, record.name, force=False)
    for record in records:
        if record.spec.get("type") == "gke":
            from torchforce.client import gke

            ended = gke.delete(project, record, force=args.force, dry_run=args.dry_run)
            done = "Would delete" if args.dry_run else "Deleted"
            print(f"{done} the GKE cluster '{record.name}'" + (f"; marked failed: {', '.join(ended)}" if ended else ""))
            continue
        if args.dry_run:  # refused as the delete would be, or saying what --force would mark failed
            running = running_on(project, record.name, force=args.force)
            print(
                f"Would end the Ray cluster '{record.name}'"
                + (f"; mark failed: {', '.join(running)}" if running else "")
            )
            continue
        ended = ray_cluster.delete(project, record, force=args.force)
        what = "Ended" if record.spec.get("address", "local") == "local" else "Forgot the attached"
        print(f"{what} cluster '{record.name}'" + (f"; marked failed: {', '.join(ended)}" if ended else ""))
    if args.all and not records:
        print("This project has no clusters.")


@command("cluster", "list")
def cluster_list(args: argparse.Namespace) -> None:
    from torchforce.client import ray_cluster
    from torchforce.client.cluster import cluster_from_spec

    project = Project.find()
    live = []
    for record in project.store.clusters():
        if record.spec.get("type") == "gke":
            continue  # gcloud lists them, below
        state = ray_cluster.status(record)
        experiments = runs_on(project, record.name)
        live.append(
            {
                "name": record.name,
                "type": record.spec.get("type", "ray"),
                "address": record.runtime.get("dashboard") or record.spec.get("address"),
                **state,
                "experiments": experiments,
                "pids": record.runtime.get("pids", []),
            }
        )
    specs = []
    for name in project.config_names("clusters"):
        values, _ = project.load_config(name, "clusters", "cluster")
        try:
            cluster = cluster_from_spec(values)
        except Exception as error:  # noqa: BLE001 - a broken spec file is listed as such
            specs.append({"file": name, "type": "?", "name": None, "summary": f"unreadable: {error}"})
            continue
        specs.append({"file": name, "type": cluster.type, "name": cluster.name, "summary": _summary(cluster)})
    gke_rows, gke_error = _gke_clusters(project)
    if args.json:
        print_json({"clusters": live, "gke": gke_rows, "gke_error": gke_error, "specs": specs})
        return

    def amount(free: float | None, total: float | None) -> str | None:
        return None if total is None else f"{free:g}/{total:g}"

    if live:
        rows = [
            [
                c["name"],
                c["type"],
                c["address"],
                c["state"],
                c["nodes"],
                amount(c["cpus_free"], c["cpus"]),
                amount(c["gpus_free"], c["gpus"]),
                ", ".join(c["experiments"]) or None,
            ]
            for c in live
        ]
        print(format_table(["Cluster", "Type", "Address", "State", "Nodes", "CPUs free", "GPUs free", "Running"], rows))
    elif gke_rows is None or not gke_rows:
        print(
            "This project has no Ray clusters; experiments run on this machine. Start one: tfcli cluster create -f "
            "ray_local"
        )
    if gke_rows:
        print()
        rows = [
            [
                c["name"] + ("" if c["known"] else " (not this project's)"),
                c["zone"],
                c["status"],
                c["nodes"],
                c["machines"],
                c["gpus"] or None,
                None if c["per_hour"] is None else f"${c['per_hour']:.2f}",
                ", ".join(c["experiments"]) or (f"(for {c['owner']})" if c["owner"] else None),
            ]
            for c in gke_rows
        ]
        print(format_table(["GKE cluster", "Zone", "Status", "Nodes", "Machines", "GPUs", "Per hour", "Running"], rows))
    elif gke_error is not None:
        print(f"\nGKE clusters could not be listed: {gke_error}")
    elif gke_rows is not None:
        print("The linked Google Cloud project has no GKE clusters. Create one: tfcli cluster create -n NAME -s 2")
    print()
    print(
        format_table(
            ["Spec file", "Type", "Name", "Settings"], [[s["file"], s["type"], s["name"], s["summary"]] for s in specs]
        )
    )


def _summary(cluster: Any) -> str:
    if cluster.type == "ray":
        if cluster.local:
            return f"{cluster.nodes} node(s) x {cluster.cpus} CPU(s), {cluster.gpus} GPU(s), on this machine"
        return f"attach to {cluster.address}, storage {cluster.storage}"
    if cluster.type == "local":
        return "this machine"
    gpus = f", {cluster.gpus_per_node} x {cluster.gpu_type}" if cluster.gpus_per_node else ""
    return f"GKE: {cluster.num_nodes} x {cluster.machine_type}{gpus} in {cluster.location or '(default zone)'}"


def _gke_clusters(project: Project) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The linked project's GKE clusters (None when the project is not linked), and why gcloud could not list
    them (the rest of the listing is still shown)."""
    from torchforce.client import gke
    from torchforce.client.gcloud import Link

    try:
        Link.of(project.settings)
    except ClientError:
        return None, None
    try:
        return gke.live(project), None
    except ClientError as error:
        return None, error.message
