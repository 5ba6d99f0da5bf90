"""Cluster fields that reach gcloud: checked against strict patterns, passed as ``--flag=value`` (a value can never
become a flag of its own), and printed with ``shlex.join``."""

from __future__ import annotations

import pytest

from torchforce.client import gke
from torchforce.client.cluster import Cluster
from torchforce.client.gcloud import Link
from torchforce.spec import SpecError

LINK = Link(
    "my-rl-project", "us-central1-a", "tfcli@my-rl-project.iam.gserviceaccount.com", "/k.json", "gs://b-tfcli", "i/t:1"
)


def test_the_command_line_passes_every_value_as_flag_equals_value():
    cluster = Cluster(
        name="big",
        num_nodes=4,
        machine_type="n1-standard-4",
        location="europe-west1-d",
        gpus_per_node=2,
        gpu_type="nvidia-l4",
        disk_size=50,
    )
    assert cluster.create_command(LINK) == [
        "gcloud",
        "container",
        "clusters",
        "create",
        "big",
        "--project=my-rl-project",
        "--zone=europe-west1-d",
        "--machine-type=e2-standard-4",  # the Ray heads and system pods; the GPUs get a pool of their own
        "--num-nodes=1",
        "--disk-size=50",
        "--addons=RayOperator,GcsFuseCsiDriver,HttpLoadBalancing,HorizontalPodAutoscaling",
        "--workload-pool=my-rl-project.svc.id.goog",
        "--service-account=tfcli@my-rl-project.iam.gserviceaccount.com",
        "--release-channel=regular",
        "--format=json",
    ]
    assert gke.create_commands(cluster, LINK)[1] == [
        "gcloud",
        "container",
        "node-pools",
        "create",
        "gpu-pool",
        "--cluster=big",
        "--project=my-rl-project",
        "--zone=europe-west1-d",
        "--machine-type=g2-standard-24",
        "--num-nodes=4",
        "--disk-size=50",
        "--accelerator=type=nvidia-l4,count=2,gpu-driver-version=default",
        "--service-account=tfcli@my-rl-project.iam.gserviceaccount.com",
        "--format=json",
    ]
    assert cluster.delete_command(LINK)[-2:] == ["--zone=europe-west1-d", "--quiet"]
    custom = Cluster(name="c", cpus_per_node=4, memory_per_node=16, spot=True, min_nodes=1, max_nodes=5)
    assert custom.create_command(LINK)[7:9] == ["--machine-type=custom-4-16384", "--num-nodes=3"]
    assert custom.create_command(LINK)[-5:] == [
        "--spot",
        "--enable-autoscaling",
        "--min-nodes=1",
        "--max-nodes=5",
        "--format=json",
    ]
    assert custom.create_command(LINK)[6] == "--zone=us-central1-a"  # no location: the link's zone


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("machine_type", "--project=someone-else"),
        ("machine_type", "n1-standard-1 --async"),
        ("machine_type", "n1-standard-1;touch x"),
        ("location", "-q"),
        ("location", "europe-west1-d --project=x"),
        ("location", "EUROPE"),
        ("gpu_type", "--quiet"),
        ("name", "-rf"),
    ],
)
def test_a_value_that_is_not_what_gcloud_takes_is_a_spec_error(field, value):
    values = {"name": "c", "gpus_per_node": 1 if field == "gpu_type" else 0, field: value}
    with pytest.raises(SpecError, match=f"cluster.{field}"):
        Cluster(**values)


def test_a_region_as_the_location_is_refused_for_the_nodes_and_cost_it_would_triple():
    with pytest.raises(SpecError, match=r"cluster.location: a zone, not a region: .* like 'europe-west1-b'"):
        Cluster(name="c", location="europe-west1")
    assert Cluster(name="c", location="europe-west1-b").create_command(LINK)[6] == "--zone=europe-west1-b"


def test_an_h100_shape_offered_only_as_spot_is_refused_on_demand_before_anything_is_made():
    with pytest.raises(SpecError, match=r"cluster.spot: a3-highgpu-2g nodes \(2 x nvidia-h100-80gb\) are offered only"):
        Cluster(name="c", gpu_type="nvidia-h100-80gb", gpus_per_node=2)
    assert Cluster(name="c", gpu_type="nvidia-h100-80gb", gpus_per_node=2, spot=True).spot
    assert not Cluster(name="c", gpu_type="nvidia-h100-80gb", gpus_per_node=8).spot  # a3-highgpu-8g: on demand


def test_a_gpu_count_the_machines_do_not_come_with_is_a_spec_error():
    with pytest.raises(SpecError, match="cluster.gpus_per_node"):
        Cluster(name="c", gpus_per_node=3, gpu_type="nvidia-l4")
