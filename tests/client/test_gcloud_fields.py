"""Cluster fields that reach gcloud: checked against strict patterns, passed as ``--flag=value`` (a value can never
become a flag of its own), and printed with ``shlex.join``."""

from __future__ import annotations

import shlex

import pytest

from tests.client.conftest import tfcli
from torchforce.client.cluster import Cluster
from torchforce.spec import SpecError


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
    assert cluster.create_command() == [
        "gcloud",
        "container",
        "clusters",
        "create",
        "big",
        "--machine-type=n1-standard-4",
        "--disk-size=50",
        "--num-nodes=4",
        "--zone=europe-west1-d",
        "--accelerator=type=nvidia-l4,count=2",
    ]
    assert cluster.delete_command()[-1] == "--zone=europe-west1-d"
    assert Cluster(name="c", cpus_per_node=4, memory_per_node=16).create_command()[5] == "--machine-type=custom-4-16384"


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


def test_the_dry_run_prints_a_shell_quoted_command(project):
    result = tfcli(project.root, "cluster", "create", "-f", "single_node_gpu_cluster", "--dry-run")
    assert result.returncode == 0, result.stderr
    line = result.stdout.strip()
    assert shlex.split(line) == Cluster(file="single_node_gpu_cluster").create_command()
    assert line == shlex.join(shlex.split(line))
