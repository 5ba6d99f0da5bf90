"""Generated and mutated cluster specs (GKE, Ray, local): building one from a spec gives a cluster or a SpecError,
nothing else; and whatever a GKE cluster accepts can never put a flag of its own into its gcloud command line.

A few examples by default, for CI; ``TORCHFORCE_FUZZ=N`` runs N per test, drawn at random."""

from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchforce.client import gke
from torchforce.client.cluster import LEGACY_GPU_TYPES, cluster_from_spec
from torchforce.client.gcloud import Link
from torchforce.configs import folder
from torchforce.spec import SpecError

FUZZ = int(os.environ.get("TORCHFORCE_FUZZ", "0") or 0)
SETTINGS = settings(
    max_examples=FUZZ or 60, derandomize=not FUZZ, database=None, deadline=None, suppress_health_check=list(HealthCheck)
)
LINK = Link("my-project", "us-central1-a", "sa@my-project.iam.gserviceaccount.com", "/k.json", "gs://b-x", "i/t:1")
FLAGS = ("--quiet", "--spot", "--enable-autoscaling")
SHIPPED = [json.loads(path.read_text()) for path in sorted(folder("clusters").glob("*.json"))]
KEYS = [
    "type",
    "name",
    "description",
    "address",
    "nodes",
    "cpus",
    "gpus",
    "storage",
    "python",
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
    "file",
    "unknown",
]
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.text(max_size=40),
    st.sampled_from(
        [
            "local",
            "ray",
            "gke",
            "-q",
            "--project=x",
            "127.0.0.1:8265",
            "file:///tmp/x",
            "gs://b/p",
            "n1-standard-1",
            "europe-west1-d",
            "nvidia-l4",
            "a" * 300,
            "x; rm -rf /",
            "ray_local",
        ]
    ),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)


def build(values: dict) -> None:
    try:
        cluster = cluster_from_spec(values)
    except SpecError:
        return
    spec = cluster.spec()
    assert isinstance(spec, dict) and spec["type"] == cluster.type
    if cluster.type == "gke":
        try:
            commands = [*gke.create_commands(cluster, LINK), cluster.delete_command(LINK)]
        except SpecError:  # only a retired GPU type is refused this late (creating it says so first)
            assert cluster.gpu_type in LEGACY_GPU_TYPES
            return
        for command in commands:
            for argument in command[5:]:
                assert argument.startswith("--") and "=" in argument or argument in FLAGS, argument


@SETTINGS
@given(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=8))
def test_a_generated_cluster_spec_builds_or_is_a_spec_error(values):
    build(values)


@SETTINGS
@given(st.sampled_from(SHIPPED), st.sampled_from(KEYS), VALUES)
def test_a_shipped_cluster_spec_with_one_field_changed_builds_or_is_a_spec_error(spec, key, value):
    build({**spec, key: value})
