"""The 2018 client's ``Cluster`` API, called from Python against the fake cloud (``tests/fakecloud``): with a project
linked to a Google Cloud project and made the current folder (as in a user's script; conftest.py's ``project``,
``cloud`` and ``linked``), ``Cluster(file=..., machine_type=...)`` gives its spec (``get_spec``), ``create`` makes it
with exactly the contract's calls, ``get_cluster_from_string`` finds it, ``ssh_parallel`` runs a ``gcloud compute
ssh``/``scp`` per node and item, and ``delete`` removes it from the cloud and from the project. The cost estimate of
a GPU spec is checked against the shipped price table, summed here on its own.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

import torchforce.client
from tests.client.gke_common import (
    EMAIL,
    PROJECT,
    ZONE,
    assert_own_config,
    cluster_create_call,
    key_file,
    kubectl,
    setup_calls,
)
from tests.fakecloud import FakeCloud, common
from tests.fakecloud.fake_kubectl import cluster_nodes
from torchforce.client import Cluster, get_cluster_from_string, gke
from torchforce.client.errors import ClientError
from torchforce.client.gcloud import Link

SPEC_FILE = "single_node_cluster"  # torchforce/configs/clusters/, copied into every new project's configs/clusters/
NAME = "single-node-cluster"  # its name, '_' made '-'
SPEC_ZONE = "europe-west1-d"  # its location
CONTEXT = f"gke_{PROJECT}_{SPEC_ZONE}_{NAME}"
KEY = f"{PROJECT}/{SPEC_ZONE}/{NAME}"  # the fake's key of the cluster
PRICES = json.loads((Path(torchforce.client.__file__).parent / "gke_prices.json").read_text())


@pytest.fixture(autouse=True)
def _own_signing_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checkpoint-signing key ``create`` hands to the cluster (as a Secret) is made under the test's folder."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))


def spec(**values) -> dict:
    """A GKE spec as ``get_spec`` gives it: single_node_cluster.json's values, then ``values`` over them."""
    base = {
        "type": "gke",
        "name": NAME,
        "num_nodes": 1,
        "machine_type": "custom-4-16384",  # the file's cpus_per_node 4 and memory_per_node 16 (GB)
        "gpus_per_node": 0,
        "gpu_type": None,
        "disk_size": 200,
        "location": SPEC_ZONE,
        "spot": False,
        "min_nodes": None,
        "max_nodes": None,
    }
    return base | values


def create_calls(name: str, zone: str, root: Path, first: list[list[str]]) -> list[list[str]]:
    """The calls of ``create``: the cluster's own (``first``), then its setup."""
    signing_key = Path(os.environ["XDG_DATA_HOME"]) / "torchforce" / "checkpoint.key"
    return first + setup_calls(name, zone, root, signing_key)


def node_names(cloud: FakeCloud, key: str) -> list[str]:
    """The cluster's nodes as the fake has them (read from its state: no call is recorded)."""
    return [node["metadata"]["name"] for node in cluster_nodes(PROJECT, cloud.state()["clusters"][key])]


def create_single_node(cloud: FakeCloud) -> Cluster:
    cluster = Cluster(file=SPEC_FILE, machine_type="n1-standard-4")
    cluster.create(yes=True)
    assert KEY in cloud.state()["clusters"]
    return cluster


def test_get_spec_is_the_file_with_the_arguments_over_it(linked, cloud):
    assert Path.cwd() == linked.root  # the project is found from the current folder
    before = len(cloud.calls())
    assert Cluster(file=SPEC_FILE, machine_type="n1-standard-4").get_spec() == spec(machine_type="n1-standard-4")
    assert Cluster(file=SPEC_FILE).get_spec() == spec()
    assert Cluster(file=SPEC_FILE, num_nodes=3, name="other_name").get_spec() == spec(num_nodes=3, name="other-name")
    assert len(cloud.calls()) == before  # a spec asks the cloud nothing


def test_create_find_ssh_parallel_and_delete(linked, cloud, capsys):
    root = linked.root
    cluster = Cluster(file=SPEC_FILE, machine_type="n1-standard-4")
    capsys.readouterr()
    before = len(cloud.calls())
    record = cluster.create(yes=True)
    # exactly the contract's calls, in order (no accelerator check: no GPUs)
    first = [cluster_create_call(NAME, SPEC_ZONE, "n1-standard-4", 1, 200)]
    assert cloud.calls()[before:] == create_calls(NAME, SPEC_ZONE, root, first)
    per_hour = PRICES["machines"]["n1-standard-4"]["on_demand"] + PRICES["management_fee"]["per_hour"]
    shown = capsys.readouterr().out
    assert f"GKE cluster '{NAME}' in {SPEC_ZONE} (project {PROJECT}):" in shown
    assert f"${per_hour:.4f}" in shown and "n1-standard-4" in shown
    assert (record.name, record.status, record.spec) == (NAME, "running", spec(machine_type="n1-standard-4"))
    assert record.runtime == {
        "project": PROJECT,
        "zone": SPEC_ZONE,
        "context": CONTEXT,
        "owner": None,
        "per_hour": round(per_hour, 4),
    }
    assert linked.store.cluster(NAME) == record
    made = cloud.state()["clusters"][KEY]
    [pool] = made["nodePools"]
    assert (pool["config"]["machineType"], pool["initialNodeCount"], pool["config"]["diskSizeGb"]) == (
        "n1-standard-4",
        1,
        200,
    )
    assert (
        made["addonsConfig"]["rayOperatorConfig"] == made["addonsConfig"]["gcsFuseCsiDriverConfig"] == {"enabled": True}
    )
    assert sorted(cloud.state()["objects"][CONTEXT]) == [
        "Secret/default/tfcli-checkpoint-key",
        "ServiceAccount/default/tfcli-worker",
    ]

    # found again from a spec file name (the file's values: it names no created cluster)
    before = len(cloud.calls())
    for reference in (SPEC_FILE, f"configs/clusters/{SPEC_FILE}.json"):
        found = get_cluster_from_string(reference)
        assert (type(found), found.get_spec()) == (Cluster, spec())
    other = root / "elsewhere.json"
    other.write_text(json.dumps({"name": "x1", "machine_type": "e2-standard-8"}))
    assert get_cluster_from_string(str(other)).get_spec() == spec(
        name="x1", machine_type="e2-standard-8", num_nodes=3, disk_size=100, location=None
    )
    running = {NAME: record.spec}
    assert get_cluster_from_string(NAME, running).get_spec() == record.spec
    assert len(cloud.calls()) == before  # finding asks the cloud nothing

    # ssh_parallel: one call per node per item, all nodes
    (root / "local.txt").write_text("some settings\n")
    [node] = node_names(cloud, KEY)
    assert re.fullmatch(rf"gke-{NAME}-default-pool-[0-9a-f]{{8}}-[a-z0-9]{{4}}", node)
    before = len(cloud.calls())
    results = cluster.ssh_parallel("nproc", ("local.txt", "/tmp/remote.txt"))
    where = [f"--project={PROJECT}", f"--zone={SPEC_ZONE}"]
    calls = cloud.calls()[before:]
    assert calls[0] == kubectl(CONTEXT, "get", "nodes", "-o", "json")
    assert sorted(calls[1:]) == sorted(
        [
            ["gcloud", "compute", "ssh", node, *where, "--command=nproc", "--quiet"],
            ["gcloud", "compute", "scp", str(root / "local.txt"), f"{node}:/tmp/remote.txt", *where, "--quiet"],
        ]
    )
    assert [(r.code, r.stdout) for r in results] == [(0, f"fake cloud: ran on {node} in {SPEC_ZONE}: nproc\n"), (0, "")]
    assert cloud.state()["ssh"] == [
        {"project": PROJECT, "zone": SPEC_ZONE, "node": node, "user": "", "command": "nproc"}
    ]
    assert cloud.state()["scp"] == [
        {
            "project": PROJECT,
            "zone": SPEC_ZONE,
            "node": node,
            "user": "",
            "source": str(root / "local.txt"),
            "target": "/tmp/remote.txt",
            "files": {"local.txt": common.sha256_of(root / "local.txt")},
        }
    ]

    # delete: gone from the cloud and from the project
    before = len(cloud.calls())
    assert cluster.delete() == []
    assert cloud.calls()[before:] == [
        ["gcloud", "container", "clusters", "delete", NAME, f"--project={PROJECT}", f"--zone={SPEC_ZONE}", "--quiet"]
    ]
    state = cloud.state()
    assert KEY not in state["clusters"] and CONTEXT not in state["contexts"] and CONTEXT not in state["objects"]
    assert linked.store.cluster(NAME) is None and linked.store.clusters() == []
    with pytest.raises(ClientError, match=f"no cluster named '{NAME}' in this project"):
        cluster.ssh_parallel("nproc")
    with pytest.raises(ClientError, match=f"no cluster named '{NAME}' in this project"):
        cluster.delete()
    assert len(cloud.calls()) == before + 1  # neither called the cloud


def test_get_cluster_from_string_finds_a_created_cluster_by_its_name(linked, cloud):
    create_single_node(cloud)
    found = get_cluster_from_string(NAME)
    assert (type(found), found.get_spec()) == (Cluster, linked.store.cluster(NAME).spec)
    assert found.get_spec()["machine_type"] == "n1-standard-4"  # what was created, not the file's custom machine


def test_ssh_parallel_runs_each_item_on_every_node_of_every_pool(linked, cloud):
    root = linked.root
    cluster = Cluster(name="gpu_l4", gpu_type="nvidia-l4", gpus_per_node=1, num_nodes=2, disk_size=50)
    before = len(cloud.calls())
    cluster.create(yes=True)
    where = [f"--project={PROJECT}", f"--zone={ZONE}"]
    first = [
        ["gcloud", "compute", "accelerator-types", "list", f"--project={PROJECT}", f"--filter=zone:{ZONE}"]
        + ["--format=json"],
        cluster_create_call("gpu-l4", ZONE, "e2-standard-4", 1, 50),
        ["gcloud", "container", "node-pools", "create", "gpu-pool", "--cluster=gpu-l4", *where]
        + ["--machine-type=g2-standard-4", "--num-nodes=2", "--disk-size=50"]
        + ["--accelerator=type=nvidia-l4,count=1,gpu-driver-version=default", f"--service-account={EMAIL}"]
        + ["--format=json"],
    ]
    assert cloud.calls()[before:] == create_calls("gpu-l4", ZONE, root, first)
    # the GPU nodes run as the cluster's account (GKE's default for a pool: the project's Compute Engine account)
    pools = cloud.state()["clusters"][f"{PROJECT}/{ZONE}/gpu-l4"]["nodePools"]
    assert [pool["config"]["serviceAccount"] for pool in pools] == [EMAIL, EMAIL]
    nodes = node_names(cloud, f"{PROJECT}/{ZONE}/gpu-l4")
    assert len(nodes) == 3 and nodes == sorted(nodes)
    assert re.fullmatch(r"gke-gpu-l4-default-pool-[0-9a-f]{8}-[a-z0-9]{4}", nodes[0])
    assert all(re.fullmatch(r"gke-gpu-l4-gpu-pool-[0-9a-f]{8}-[a-z0-9]{4}", node) for node in nodes[1:])
    (root / "setup.sh").write_text("echo ready\n")
    before = len(cloud.calls())
    results = cluster.ssh_parallel("nproc", ("setup.sh", "/tmp/setup.sh"), "nvidia-smi -L")
    expected = (
        [["gcloud", "compute", "ssh", node, *where, "--command=nproc", "--quiet"] for node in nodes]
        + [
            ["gcloud", "compute", "scp", str(root / "setup.sh"), f"{node}:/tmp/setup.sh", *where, "--quiet"]
            for node in nodes
        ]
        + [["gcloud", "compute", "ssh", node, *where, "--command=nvidia-smi -L", "--quiet"] for node in nodes]
    )
    calls = cloud.calls()[before:]
    assert calls[0] == kubectl("gke_my-rl-project_us-central1-a_gpu-l4", "get", "nodes", "-o", "json")
    assert sorted(calls[1:]) == sorted(expected) and len(calls) == 10  # run at once: in any order
    assert_own_config(cloud.call_records()[before:])  # ssh and scp too, from threads of this process
    said = [f"fake cloud: ran on {node} in {ZONE}: {command}\n" for command in ("nproc",) for node in nodes]
    said += [""] * 3 + [f"fake cloud: ran on {node} in {ZONE}: nvidia-smi -L\n" for node in nodes]
    assert [(r.code, r.stdout) for r in results] == [(0, line) for line in said]  # results in the items' order
    assert sorted((e["node"], e["command"]) for e in cloud.state()["ssh"]) == sorted(
        [(node, "nproc") for node in nodes] + [(node, "nvidia-smi -L") for node in nodes]
    )
    assert sorted(e["node"] for e in cloud.state()["scp"]) == nodes


def test_ssh_parallel_not_silent_prints_each_node_s_output(linked, cloud, capsys):
    cluster = create_single_node(cloud)
    [node] = node_names(cloud, KEY)
    (linked.root / "local.txt").write_text("x")
    capsys.readouterr()
    cluster.ssh_parallel("nproc", ("local.txt", "/tmp/remote.txt"), silent=False)
    assert capsys.readouterr().out.splitlines() == [
        f"{node}: fake cloud: ran on {node} in {SPEC_ZONE}: nproc",
        f"{node}: ",
    ]


@pytest.mark.parametrize(("gpus_per_node", "spot"), [(1, False), (2, False), (2, True)])
def test_the_cost_of_a_gpu_spec_is_the_sum_of_the_price_table(tmp_path, gpus_per_node, spot):
    cluster = Cluster(name="gpu-l4", gpu_type="nvidia-l4", gpus_per_node=gpus_per_node, num_nodes=2, spot=spot)
    link = Link.make(PROJECT, key_file(tmp_path), zone=ZONE)
    kind = "spot" if spot else "on_demand"
    gpu_machine = PRICES["gpus"]["nvidia-l4"]["machine_types"][str(gpus_per_node)]
    system = PRICES["machines"]["e2-standard-4"][kind]  # the default pool: one node for the Ray heads
    gpu_nodes = PRICES["machines"][gpu_machine][kind] * 2
    fee = PRICES["management_fee"]["per_hour"]
    estimate = gke.cost(cluster, link)
    assert estimate.per_hour == pytest.approx(system + gpu_nodes + fee, abs=1e-9)
    assert estimate.per_hour == pytest.approx(
        {(1, False): 1.6476, (2, False): 4.2356, (2, True): 1.7408}[gpus_per_node, spot]
    )
    suffix = " (spot)" if spot else ""
    assert [line[:2] for line in estimate.lines] == [
        (f"e2-standard-4{suffix}", 1),
        (f"{gpu_machine}{suffix}", 2),
        ("GKE cluster management fee", 1),
    ]
    assert (estimate.region, estimate.spot, estimate.unknown) == ("us-central1", spot, False)
