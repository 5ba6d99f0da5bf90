"""GKE clusters: create, list, delete, and run commands on their nodes, through ``gcloud`` and ``kubectl``.

A cluster is made in the project's linked Google Cloud project (``gcloud.py``) with GKE's Ray operator add-on
(KubeRay) and the Cloud Storage FUSE driver, so that an experiment is a RayJob whose pods see the project's bucket
as a folder (``backends/gke.py``). A GPU spec gets a small default pool (the Ray heads, the system pods) and a GPU
node pool of ``num_nodes`` nodes, whose driver GKE installs. Creating one is preceded by its cost per hour from the
shipped price table, and asks for confirmation unless told ``yes``.

After ``get-credentials``, each cluster gets what its workloads need: the Kubernetes service account
``tfcli-worker`` bound to the linked Google service account (Workload Identity: pods reach the bucket without a
key), and a Secret holding this user's checkpoint-signing key, so checkpoints written there are trusted here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from torchforce.client import manifests
from torchforce.client.errors import ClientError
from torchforce.client.gcloud import GKE_TOOLS, Cloud, Link
from torchforce.client.store import ClusterRecord
from torchforce.spec import SpecError

SYSTEM_MACHINE = "e2-standard-4"  # the default pool of a GPU cluster: Ray heads and system pods
GPU_POOL = "gpu-pool"
# KubeRay and the bucket's FUSE driver; gcloud turns off the add-ons --addons does not name, so GKE's defaults too
ADDONS = "RayOperator,GcsFuseCsiDriver,HttpLoadBalancing,HorizontalPodAutoscaling"


class NotCreated(ClientError):
    """``gcloud container clusters create`` failed and the cloud has no cluster of ours by that name (a quota, a
    machine type the zone lacks, a missing permission, a name taken): gcloud's error, and nothing to delete."""


def zone(cluster: Any, link: Link) -> str:
    """A spec's ``location`` if it has one, else the link's zone."""
    return str(cluster.location or link.zone)


def context(link: Link, name: str, in_zone: str) -> str:
    """The kubeconfig context ``gcloud container clusters get-credentials`` writes."""
    return f"gke_{link.project}_{in_zone}_{name}"


def kubectl_call(kube_context: str, *arguments: str) -> list[str]:
    """A ``kubectl`` call on the cluster of ``kube_context``, in the namespace of tfcli's objects
    (``manifests.NAMESPACE``). Both are named on every call: neither the kubeconfig's current context nor a
    namespace the user set on the context (``kubens``, ``kubectl config set-context --namespace``) changes which
    objects tfcli sees, and a RayJob looked for in another namespace would be judged gone, its run failed."""
    return ["kubectl", f"--context={kube_context}", f"--namespace={manifests.NAMESPACE}", *arguments]


def _where(cluster: Any, link: Link) -> list[str]:
    return [f"--project={link.project}", f"--zone={zone(cluster, link)}"]


def _pool_machine(cluster: Any) -> str:
    """The machine of the GPU pool: T4s attach to the spec's (N1) machine; L4, A100 and H100 come with their own."""
    from torchforce.client.prices import gpu_machine_type

    if cluster.gpu_type == "nvidia-tesla-t4":
        return str(cluster.machine_type)
    return gpu_machine_type(cluster.gpu_type, cluster.gpus_per_node)


def create_commands(cluster: Any, link: Link) -> list[list[str]]:
    """Every ``gcloud`` call that creates the cluster, in order: the cluster, its GPU pool, the kubeconfig entry."""
    gpus = bool(cluster.gpus_per_node)
    command = ["gcloud", "container", "clusters", "create", cluster.name, *_where(cluster, link)]
    command += [
        f"--machine-type={SYSTEM_MACHINE if gpus else cluster.machine_type}",
        f"--num-nodes={1 if gpus else cluster.num_nodes}",
        f"--disk-size={cluster.disk_size}",
        f"--addons={ADDONS}",
        f"--workload-pool={link.project}.svc.id.goog",
        f"--service-account={link.service_account}",
        "--release-channel=regular",
    ]
    scaling = (
        ["--enable-autoscaling", f"--min-nodes={cluster.min_nodes}", f"--max-nodes={cluster.max_nodes}"]
        if cluster.max_nodes is not None
        else []
    )
    spot = ["--spot"] if cluster.spot else []
    commands = [command + spot + ([] if gpus else scaling) + ["--format=json"]]
    if gpus:
        accelerator = f"type={cluster.gpu_type},count={cluster.gpus_per_node},gpu-driver-version=default"
        commands.append(
            [
                "gcloud",
                "container",
                "node-pools",
                "create",
                GPU_POOL,
                f"--cluster={cluster.name}",
                *_where(cluster, link),
            ]
            + [f"--machine-type={_pool_machine(cluster)}", f"--num-nodes={cluster.num_nodes}"]
            + [f"--disk-size={cluster.disk_size}", f"--accelerator={accelerator}"]
            # the nodes' account, as the cluster's: without it a pool runs as the project's default Compute
            # Engine account, which may not read the project's images or bucket
            + [f"--service-account={link.service_account}"]
            + spot
            + scaling
            + ["--format=json"]
        )
    commands.append(["gcloud", "container", "clusters", "get-credentials", cluster.name, *_where(cluster, link)])
    return commands


def delete_command(cluster: Any, link: Link, made: dict[str, Any] | None = None) -> list[str]:
    """``clusters delete``: in the project and zone the cluster was made in (``made``: its record's runtime) where
    known, whatever the project is linked to now, else where the link and the spec place it."""
    made = made or {}
    where = (
        [f"--project={made['project']}", f"--zone={made['zone']}"]
        if made.get("project") and made.get("zone")
        else _where(cluster, link)
    )
    return ["gcloud", "container", "clusters", "delete", cluster.name, *where, "--quiet"]


def cost(cluster: Any, link: Link | None = None) -> Any:
    """What the cluster costs per hour (an ``Estimate`` from the shipped price table)."""
    from torchforce.client.prices import estimate

    region = zone(cluster, link).rsplit("-", 1)[0] if link is not None else None
    if cluster.gpus_per_node:
        return estimate(
            SYSTEM_MACHINE,
            1,
            gpu_type=cluster.gpu_type,
            gpus_per_node=cluster.gpus_per_node,
            gpu_nodes=cluster.num_nodes,
            gpu_machine_type=_pool_machine(cluster),
            spot=cluster.spot,
            region=region,
        )
    return estimate(cluster.machine_type, cluster.num_nodes, spot=cluster.spot, region=region)


def check_gpus(cluster: Any, link: Link, cloud: Cloud) -> None:
    """Refuse a retired GPU type, or one the cluster's zone does not offer (asked of gcloud)."""
    from torchforce.client.cluster import GPU_TYPES

    if not cluster.gpus_per_node:
        return
    if cluster.gpu_type not in GPU_TYPES:
        raise SpecError(
            "cluster.gpu_type",
            "this GPU type is retired on GKE",
            got=cluster.gpu_type,
            expected="one of " + ", ".join(GPU_TYPES),
        )
    in_zone = zone(cluster, link)
    offered = cloud.json(
        ["gcloud", "compute", "accelerator-types", "list", f"--project={link.project}"]
        + [f"--filter=zone:{in_zone}", "--format=json"]
    )
    if offered is None:  # a dry run asks nothing
        return
    names = sorted({str(item.get("name")) for item in offered if isinstance(item, dict)})
    if cluster.gpu_type not in names:
        raise ClientError(
            f"the zone {in_zone} does not offer {cluster.gpu_type} GPUs",
            hint=("It offers: " + ", ".join(names) + "." if names else "It offers no GPUs.")
            + " Choose another gpu_type, or another zone (the spec's location).",
        )


def confirm(question: str, yes: bool, ask: Callable[[str], str] = input) -> None:
    """Go on when ``yes``, or when the user says so at a terminal; otherwise a ClientError (nothing was done)."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise ClientError(f"{question} Not confirmed: there is no terminal to ask", hint="Give --yes to confirm.")
    try:
        answer = ask(f"{question} [y/N] ")
    except EOFError:
        answer = ""
    if answer.strip().lower() not in ("y", "yes"):
        raise ClientError("cancelled: nothing was created")


def create(
    project: Any,
    cluster: Any,
    *,
    yes: bool = False,
    dry_run: bool = False,
    owner: str | None = None,
    echo: Callable[[str], None] = print,
    ask: Callable[[str], str] = input,
) -> ClusterRecord | None:
    """Create ``cluster`` in the linked project, after showing its cost (and asking, unless ``yes``); record it.
    ``owner``: the experiment it is made for, which deletes it when it ends. Returns None in a dry run, which a
    project not linked yet may make too (with placeholders where the link's values go)."""
    link = Link.for_dry_run(project.settings, echo) if dry_run else Link.of(project.settings)
    cloud = Cloud(link, dry_run=dry_run, echo=echo)
    if not dry_run:
        Cloud.require(*GKE_TOOLS)  # the auth plugin too: without it kubectl fails once the cluster bills
        if project.store.cluster(cluster.name) is not None:
            raise ClientError(
                f"cluster '{cluster.name}' exists already in this project",
                hint=f"See it with 'tfcli cluster list', or delete it with 'tfcli cluster delete -c {cluster.name}'.",
            )
    check_gpus(cluster, link, cloud)
    estimate = cost(cluster, link)
    echo(f"GKE cluster '{cluster.name}' in {zone(cluster, link)} (project {link.project}):")
    echo(estimate.table())
    if not dry_run:
        confirm(f"Create it, at about ${estimate.per_hour:.2f} an hour until it is deleted?", yes, ask)
    commands = create_commands(cluster, link)
    in_zone = zone(cluster, link)
    runtime: dict[str, Any] = {
        "project": link.project,
        "zone": in_zone,
        "context": context(link, cluster.name, in_zone),
        "owner": owner,
        "per_hour": round(float(estimate.per_hour), 4),
    }
    record = None
    if not dry_run:  # recorded before it is asked for: the cloud may make it though the call fails or is cut
        record = project.store.add_cluster(cluster.name, cluster.spec(), "creating", runtime)
    try:
        _create_cluster(project, cluster, commands[0], _where(cluster, link), cloud, record)
        for command in commands[1:]:
            cloud.run(command)
        _prepare(project, link, str(runtime["context"]), cloud)
    except NotCreated:  # nothing was made: gcloud's error as it is, no cluster to delete
        raise
    except ClientError as error:
        if record is not None:
            project.store.update_cluster(cluster.name, status="incomplete")
        raise ClientError(
            f"cluster '{cluster.name}' was created but not set up: {error.message}",
            hint=f"It costs money while it exists: delete it with 'tfcli cluster delete -c {cluster.name}', or "
            "fix the cause and create it again after deleting it.",
        ) from None
    except BaseException:  # Ctrl-C, a timeout: what the cloud made goes with 'cluster delete' (a 404 forgets it)
        if record is not None:
            project.store.update_cluster(cluster.name, status="incomplete")
        raise
    if dry_run:
        return None
    project.store.update_cluster(cluster.name, status="running")
    return project.store.cluster(cluster.name)


def _create_cluster(
    project: Any, cluster: Any, command: list[str], where: list[str], cloud: Cloud, record: Any
) -> None:
    """``gcloud container clusters create``. When it fails, the cloud is asked whether a cluster was made all the
    same (gcloud exits non-zero after the cluster exists when its setup fails, a node stockout say): then it stays
    recorded, and the failure is raised as a set-up one; else the record goes, and the failure is gcloud's, as
    NotCreated."""
    try:
        cloud.run(command)
    except ClientError as error:
        if record is None:
            raise
        taken = "code=409" in error.message
        made = None if taken else _described(cluster, where, cloud)
        if made is None:  # nothing of ours there (409: a cluster of that name is someone else's)
            project.store.remove_cluster(cluster.name)
            raise NotCreated(
                f"cluster '{cluster.name}' was not created: {error.message}",
                hint=f"A cluster named '{cluster.name}' exists already in the project and zone, not one of this "
                "tfcli project's: choose another name."
                if taken
                else None,
            ) from None
        raise ClientError(f"gcloud left it in state {made}: {error.message}") from None


def _described(cluster: Any, where: list[str], cloud: Cloud) -> str | None:
    """The status of the cluster in the project and zone ``where`` names, or None when the cloud has none (404)."""
    describe = ["gcloud", "container", "clusters", "describe", cluster.name, *where, "--format=json"]
    result = cloud.run(describe, check=False)
    if result.code != 0:
        if "code=404" in result.stderr:
            return None
        raise cloud.failure(describe, result)
    found = result.json()
    return str(found.get("status", "unknown")) if isinstance(found, dict) else "unknown"


def _prepare(project: Any, link: Link, kube_context: str, cloud: Cloud) -> None:
    """What every workload on the cluster needs: the Kubernetes service account tied to the linked Google service
    account (Workload Identity), and the Secret with this user's checkpoint-signing key."""
    from torchforce.client.checkpoints import Checkpoints

    folder = project.root / ".tfcli" / "gke"
    file = folder / f"{kube_context}-serviceaccount.yaml"
    if not cloud.dry_run:
        folder.mkdir(parents=True, exist_ok=True)
        file.write_text(manifests.dump(manifests.service_account(link.service_account, project.name)))
    cloud.run(kubectl_call(kube_context, "apply", "-f", str(file)))
    member = f"serviceAccount:{link.project}.svc.id.goog[{manifests.NAMESPACE}/{manifests.SERVICE_ACCOUNT}]"
    cloud.run(
        ["gcloud", "iam", "service-accounts", "add-iam-policy-binding", link.service_account]
        + [f"--project={link.project}", "--role=roles/iam.workloadIdentityUser", f"--member={member}", "--format=json"]
    )
    key = Checkpoints(folder).signing_key() if not cloud.dry_run else Checkpoints.default_key_file()
    if key is None:
        raise ClientError(
            f"no usable checkpoint-signing key at {Checkpoints.default_key_file()}",
            hint="It must be a file readable by you alone; remove it to have a new one made.",
        )
    cloud.run(
        kubectl_call(
            kube_context, "create", "secret", "generic", manifests.KEY_SECRET, f"--from-file=checkpoint.key={key}"
        )
    )


def find(project: Any, name: str) -> ClusterRecord:
    """The project's GKE cluster ``name`` (a ClientError, with a did-you-mean, if there is none)."""
    from torchforce.client import ray_cluster

    record = ray_cluster.find(project, name)
    if record.spec.get("type") != "gke":
        raise ClientError(f"cluster '{name}' is a {record.spec.get('type', 'ray')} cluster, not a GKE one")
    return record


def delete(
    project: Any,
    record: ClusterRecord,
    *,
    force: bool = False,
    dry_run: bool = False,
    echo: Callable[[str], None] = print,
) -> list[str]:
    """Delete the cluster in the cloud and forget it; returns the experiments that were running there (refused
    while there are some, unless ``force``: they are marked failed; their results stay in the bucket)."""
    from torchforce.client.cluster import Cluster, forget, running_on

    link = Link.of(project.settings)
    running = running_on(project, record.name, force=force)
    if project.store.cluster(record.name) is None:  # made for a run that running_on saw end: it went with that end
        return running
    cloud = Cloud(link, dry_run=dry_run, echo=echo)
    spec = {key: value for key, value in record.spec.items() if key != "type"}
    command = delete_command(Cluster(**spec), link, record.runtime)
    result = cloud.run(command, check=False)
    if result.code != 0 and "code=404" not in result.stderr:  # only the API's word that it is gone forgets it
        raise cloud.failure(command, result)
    if dry_run:
        return running
    forget(project, record.name, running)
    return running


def live(project: Any, dry_run: bool = False, echo: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """The linked project's GKE clusters as gcloud reports them now, with nodes, GPUs, hourly cost and the
    experiments running on each (from this project's records, each checked against its workload: ``runs_on``)."""
    from torchforce.client.cluster import runs_on

    link = Link.of(project.settings)
    cloud = Cloud(link, dry_run=dry_run, echo=echo)
    found = cloud.json(["gcloud", "container", "clusters", "list", f"--project={link.project}", "--format=json"])
    rows = []
    for item in found or []:
        if not isinstance(item, dict):
            continue
        name = str(item.get("name"))
        record = project.store.cluster(name)
        pools = [pool for pool in item.get("nodePools") or [] if isinstance(pool, dict)]
        gpus = 0
        machines = []
        for pool in pools:
            config = pool.get("config") or {}
            machines.append(str(config.get("machineType")))
            count = int(pool.get("initialNodeCount") or 0)
            for accelerator in config.get("accelerators") or []:
                gpus += count * int(accelerator.get("acceleratorCount") or 0)
        rows.append(
            {
                "name": name,
                "type": "gke",
                "zone": item.get("zone") or item.get("location"),
                "status": item.get("status"),
                "nodes": item.get("currentNodeCount"),
                "machines": ", ".join(dict.fromkeys(machines)),
                "gpus": gpus,
                "per_hour": (record.runtime.get("per_hour") if record else None) or _list_cost(pools),
                "known": record is not None,
                "owner": record.runtime.get("owner") if record else None,
                "experiments": runs_on(project, name),
            }
        )
    return rows


def _list_cost(pools: list[dict[str, Any]]) -> float | None:
    """The hourly cost of node pools as gcloud lists them (clusters this project did not create)."""
    from torchforce.client.prices import estimate, load_prices

    total = float(load_prices().management_fee)  # once per cluster
    for pool in pools:
        config = pool.get("config") or {}
        accelerators = config.get("accelerators") or [{}]
        gpu_type = accelerators[0].get("acceleratorType")
        count = int(pool.get("initialNodeCount") or 0)
        one = estimate(
            str(config.get("machineType")),
            count,
            gpu_type=gpu_type if gpu_type == "nvidia-tesla-t4" else None,
            gpus_per_node=int(accelerators[0].get("acceleratorCount") or 0) if gpu_type == "nvidia-tesla-t4" else 0,
            gpu_nodes=count if gpu_type == "nvidia-tesla-t4" else 0,
            spot=bool(config.get("spot")),
            management_fee=False,
        )
        if one.unknown:
            return None
        total += float(one.per_hour)
    return total


def ssh_parallel(project: Any, name: str, items: list[str | tuple[str, str]], *, silent: bool = True) -> list[Any]:
    """Run each item on every node of cluster ``name`` at once: a command (``gcloud compute ssh NODE
    --command=...``) or a (from, to) pair (``gcloud compute scp FROM NODE:TO``). Returns the results in order."""
    link = Link.of(project.settings)
    record = find(project, name)
    cloud = Cloud(link, echo=(lambda text: None) if silent else print)
    nodes = cloud.json(kubectl_call(str(record.runtime["context"]), "get", "nodes", "-o", "json"))
    names = [str(item["metadata"]["name"]) for item in (nodes or {}).get("items", [])]
    where = [f"--project={link.project}", f"--zone={record.runtime['zone']}"]
    calls: list[tuple[str, list[str]]] = []
    for item in items:
        for node in names:
            if isinstance(item, str):
                calls.append((node, ["gcloud", "compute", "ssh", node, *where, f"--command={item}", "--quiet"]))
            else:
                source, target = item
                local = str(Path(source).resolve())  # absolute: never read as a flag or as HOST:PATH
                calls.append((node, ["gcloud", "compute", "scp", local, f"{node}:{target}", *where, "--quiet"]))
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(calls)))) as pool:
        results = list(pool.map(lambda call: cloud.run(call[1], check=False), calls))
    failed = [(node, result) for (node, _), result in zip(calls, results, strict=True) if result.code != 0]
    if not silent:
        for (node, _), result in zip(calls, results, strict=True):
            print(f"{node}: {result.stdout.strip()}")
    if failed:
        node, result = failed[0]
        said = result.stderr.strip().splitlines()[-1:] or [f"exit code {result.code}"]
        raise ClientError(f"{len(failed)} of {len(calls)} calls failed; on {node}: {said[0]}")
    return results


def owned_by(project: Any, experiment: str) -> ClusterRecord | None:
    """The cluster ``experiment`` created for itself, if any (deleted when the experiment ends)."""
    for record in project.store.clusters():
        if record.spec.get("type") == "gke" and record.runtime.get("owner") == experiment:
            return record
    return None


MEMORY_PER_CPU = {"standard": 3.75, "highmem": 6.5, "highcpu": 0.9}  # GiB per vCPU of N1 machines
MEMORY_PER_CPU_NEWER = {"standard": 4.0, "highmem": 8.0, "highcpu": 1.0}  # E2, N2, C3, G2
ACCELERATOR_MACHINES = {"a2-highgpu": (12, 85.0), "a3-highgpu": (26, 234.0)}  # per GPU: vCPUs, GiB
FUSE_SIDECAR = (0.25, 0.25)  # CPUs, GiB: the Cloud Storage FUSE container GKE adds to each pod


def machine_shape(machine_type: str) -> tuple[float, float] | None:
    """vCPUs and GiB of memory of a machine type (None for one this table does not know)."""
    parts = machine_type.split("-")
    if parts[0] == "custom" and len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
        return float(parts[1]), int(parts[2]) / 1024
    if len(parts) != 3:
        return None
    family, kind, size = parts
    if family + "-" + kind in ACCELERATOR_MACHINES and size.endswith("g") and size[:-1].isdigit():
        cpus, memory = ACCELERATOR_MACHINES[family + "-" + kind]
        return float(cpus * int(size[:-1])), memory * int(size[:-1])
    if not size.isdigit():
        return None
    table = MEMORY_PER_CPU if family == "n1" else MEMORY_PER_CPU_NEWER if family in ("e2", "n2", "c3", "g2") else None
    if table is None or kind not in table:
        return None
    return float(size), table[kind] * int(size)


def allocatable(machine_type: str) -> tuple[float, float] | None:
    """About what a GKE node of ``machine_type`` leaves for pods: its CPUs and memory less what GKE reserves for
    the kubelet and the system (a slice of each core and of each GiB band) and the eviction threshold."""
    shape = machine_shape(machine_type)
    if shape is None:
        return None
    cpus, memory = shape
    cpu_reserved = 0.06 * min(cpus, 1) + 0.01 * min(max(cpus - 1, 0), 1) + 0.005 * min(max(cpus - 2, 0), 2)
    cpu_reserved += 0.0025 * max(cpus - 4, 0)
    bands = ((4, 0.25), (4, 0.20), (8, 0.10), (112, 0.06), (float("inf"), 0.02))
    left, memory_reserved = memory, 0.0
    for size, share in bands:
        memory_reserved += share * min(left, size)
        left = max(left - size, 0)
    return cpus - cpu_reserved, memory - memory_reserved - 0.1


def quantity(value: Any) -> float:
    """A Kubernetes quantity as a number: CPUs (``"500m"`` = 0.5) or GiB (``"4Gi"``, ``"512Mi"``)."""
    text = str(value)
    for suffix, scale in (("m", 0.001), ("Gi", 1.0), ("Mi", 1 / 1024), ("Ki", 1 / 1024**2)):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * scale
    return float(text)


def check_fits(manifest: dict[str, Any], record: ClusterRecord) -> None:
    """Refuse a RayJob with a pod that no node of the cluster can hold (it would wait forever, unscheduled)."""
    spec = record.spec
    gpus = bool(spec.get("gpus_per_node"))
    cluster_spec = manifest["spec"]["rayClusterSpec"]
    groups = [cluster_spec["headGroupSpec"], *cluster_spec.get("workerGroupSpecs", [])]
    for group in groups:
        pod = group["template"]["spec"]
        on_gpus = "nodeSelector" in pod
        if gpus and on_gpus:
            from torchforce.client.cluster import Cluster

            machine = _pool_machine(Cluster(**{key: value for key, value in spec.items() if key != "type"}))
        else:
            machine = SYSTEM_MACHINE if gpus else str(spec.get("machine_type"))
        room = allocatable(machine)
        if room is None:
            continue
        requests = pod["containers"][0]["resources"]["requests"]
        cpu = quantity(requests.get("cpu", 0)) + FUSE_SIDECAR[0]
        memory = quantity(requests.get("memory", 0)) + FUSE_SIDECAR[1]
        if cpu > room[0] or memory > room[1]:
            raise ClientError(
                f"a pod of this run needs {cpu:g} CPUs and {memory:g} GiB (with GKE's storage sidecar), but a "
                f"{machine} node of the cluster '{record.name}' has about {room[0]:.2f} CPUs and {room[1]:.1f} GiB "
                "for pods: it would never be scheduled",
                hint="Run it on a cluster with a larger machine type (for example -m e2-standard-4 or "
                "n1-standard-4), or with fewer workers (--num-workers) in the multi-threaded run mode, or fewer "
                "torch threads (--torch-threads).",
            )
