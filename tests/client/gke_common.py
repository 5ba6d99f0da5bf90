"""What the GKE tests share: the fake Google Cloud project's names, and a service account key with a (fake) private
key whose content must never appear anywhere tfcli writes or passes on."""

from __future__ import annotations

import json
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
