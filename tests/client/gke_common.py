"""What the GKE tests share: the fake Google Cloud project's names, and a service account key with a (fake) private
key whose content must never appear anywhere tfcli writes or passes on."""

from __future__ import annotations

import json
import os
from pathlib import Path

PROJECT = "my-rl-project"
EMAIL = f"tfcli@{PROJECT}.iam.gserviceaccount.com"
PRIVATE_KEY = (
    "-----BEGIN PRIVATE KEY-----\n"
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7xq3secret\n"
    "-----END PRIVATE KEY-----\n"
)
KEY_ID = "0123456789abcdef0123456789abcdef01234567"
BUCKET = f"gs://{PROJECT}-tfcli"
ZONE = "us-central1-a"
CLUSTER = "gke-small"
CONTEXT = f"gke_{PROJECT}_{ZONE}_{CLUSTER}"
PPO = ["-A", "ppo_cartpole", "-E", "cartpole", "-N", "2", "--seed", "3"]


def key_file(folder: Path) -> Path:
    path = folder / "tfcli-key.json"
    data = {
        "type": "service_account",
        "project_id": PROJECT,
        "private_key_id": KEY_ID,
        "private_key": PRIVATE_KEY,
        "client_email": EMAIL,
        "client_id": "104",
        "token_uri": "https://oauth2.googleapis.com/token",
    }
    path.write_text(json.dumps(data))
    path.chmod(0o600)
    return path


def cluster_create_call(name: str, zone: str, machine: str, nodes: int, disk: int) -> list[str]:
    """The ``gcloud container clusters create`` call of a cluster without GPUs, Spot or autoscaling."""
    return (
        ["gcloud", "container", "clusters", "create", name, f"--project={PROJECT}", f"--zone={zone}"]
        + [f"--machine-type={machine}", f"--num-nodes={nodes}", f"--disk-size={disk}"]
        + [
            "--addons=RayOperator,GcsFuseCsiDriver,HttpLoadBalancing,HorizontalPodAutoscaling",
            f"--workload-pool={PROJECT}.svc.id.goog",
        ]
        + [f"--service-account={EMAIL}", "--release-channel=regular", "--format=json"]
    )


def kubectl(context: str, *arguments: str) -> list[str]:
    """A ``kubectl`` call of tfcli's on the cluster of ``context``: the context and the namespace of its objects
    named on every call."""
    return ["kubectl", f"--context={context}", "--namespace=default", *arguments]


def setup_calls(name: str, zone: str, root: Path, signing_key: Path) -> list[list[str]]:
    """The calls of ``cluster create`` after the cluster's own: credentials, the service account, its Workload
    Identity binding, the checkpoint-key Secret."""
    where = [f"--project={PROJECT}", f"--zone={zone}"]
    context = f"gke_{PROJECT}_{zone}_{name}"
    member = f"serviceAccount:{PROJECT}.svc.id.goog[default/tfcli-worker]"
    return [
        ["gcloud", "container", "clusters", "get-credentials", name, *where],
        kubectl(context, "apply", "-f", str(root / ".tfcli" / "gke" / f"{context}-serviceaccount.yaml")),
        ["gcloud", "iam", "service-accounts", "add-iam-policy-binding", EMAIL, f"--project={PROJECT}"]
        + ["--role=roles/iam.workloadIdentityUser", f"--member={member}", "--format=json"],
        kubectl(context, "create", "secret", "generic", "tfcli-checkpoint-key")
        + [f"--from-file=checkpoint.key={signing_key}"],
    ]


def own_config() -> Path:
    """tfcli's own gcloud configuration for the linked service account, where every call of tfcli runs
    (``CLOUDSDK_CONFIG``): ``$XDG_CONFIG_HOME/tfcli/gcloud/EMAIL``, which the ``cloud`` fixture puts in the test's
    folder."""
    return Path(os.environ["XDG_CONFIG_HOME"]) / "tfcli" / "gcloud" / EMAIL


def files_of(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` and its content: a gcloud configuration, to see that nothing changed it."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def assert_own_config(records: list[dict]) -> None:
    """Every call ran with tfcli's own configuration, as the linked service account (a ``kubectl``: the account its
    auth plugin takes the token of; an activation is recorded before it makes the account active)."""
    assert records

    def right(record: dict) -> bool:
        activation = record["argv"][1:3] == ["auth", "activate-service-account"]
        return record["config"] == str(own_config()) and (activation or record["account"] == EMAIL)

    wrong = [[*record["argv"][:4], record["config"], record["account"]] for record in records if not right(record)]
    assert wrong == [], f"calls that ran elsewhere than in {own_config()} as {EMAIL}: {wrong}"
