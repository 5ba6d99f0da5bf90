"""The fake cloud itself, driven as the client drives it: the ``gcloud`` and ``kubectl`` executables, as
subprocesses, with the fake first on PATH."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from . import common
from . import fake_cloud as fake_cloud_fixture  # noqa: F401  (registers the fixture "fake_cloud")

PROJECT, ZONE, REGION = "proj-1", "us-central1-a", "us-central1"
ACCOUNT = f"tfcli@{PROJECT}.iam.gserviceaccount.com"
BUCKET = f"{PROJECT}-tfcli"
CONTEXT = f"gke_{PROJECT}_{ZONE}_c1"
WORKLOAD_MEMBER = f"serviceAccount:{PROJECT}.svc.id.goog[default/tfcli-worker]"
KEY_CONTENT = "-----BEGIN PRIVATE KEY-----\\nnot-a-real-key-7f3a\\n-----END PRIVATE KEY-----\\n"


def run(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, input=stdin, timeout=60)


def ok(*argv: str) -> subprocess.CompletedProcess:
    result = run(*argv)
    assert result.returncode == 0, (argv, result.stdout, result.stderr)
    return result


def key_file(folder: Path, email: str = ACCOUNT, kind: str = "service_account") -> Path:
    path = folder / "key.json"
    path.write_text(json.dumps({"type": kind, "client_email": email, "private_key": KEY_CONTENT}))
    return path


def create_cluster(name: str = "c1", *extra: str) -> subprocess.CompletedProcess:
    return run(
        "gcloud",
        "container",
        "clusters",
        "create",
        name,
        f"--project={PROJECT}",
        f"--zone={ZONE}",
        "--machine-type=e2-standard-4",
        "--num-nodes=1",
        "--disk-size=50",
        "--addons=RayOperator,GcsFuseCsiDriver,HttpLoadBalancing,HorizontalPodAutoscaling",
        f"--workload-pool={PROJECT}.svc.id.goog",
        f"--service-account={ACCOUNT}",
        "--release-channel=regular",
        *extra,
        "--format=json",
    )


def kubectl(*argv: str) -> subprocess.CompletedProcess:
    return run("kubectl", f"--context={CONTEXT}", *argv)


def apply(folder: Path, *manifests: dict, name: str = "manifest.yaml") -> subprocess.CompletedProcess:
    path = folder / name
    path.write_text(yaml.safe_dump_all(manifests, sort_keys=False))
    return kubectl("apply", "-f", str(path))


def service_account() -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": "tfcli-worker",
            "namespace": "default",
            "labels": {"app.kubernetes.io/managed-by": "tfcli"},
            "annotations": {"iam.gke.io/gcp-service-account": ACCOUNT},
        },
    }


def ray_job(name: str, entrypoint: str, suspend: bool = False, backoff_limit: int = 0) -> dict:
    container = {
        "name": "ray-head",
        "image": "rayproject/ray:2.9.0",
        "env": [{"name": "XDG_DATA_HOME", "value": "/var/run/tfcli"}, {"name": "TFCLI_FAKE_TEST", "value": "yes"}],
        "volumeMounts": [
            {"name": "bucket", "mountPath": "/mnt/tfcli"},
            {"name": "key", "mountPath": "/var/run/tfcli/torchforce/checkpoint.key", "subPath": "checkpoint.key"},
        ],
    }
    pod = {
        "serviceAccountName": "tfcli-worker",
        "containers": [container],
        "volumes": [
            {
                "name": "bucket",
                "csi": {
                    "driver": "gcsfuse.csi.storage.gke.io",
                    "volumeAttributes": {"bucketName": BUCKET, "mountOptions": "implicit-dirs"},
                },
            },
            {"name": "key", "secret": {"secretName": "tfcli-checkpoint-key", "defaultMode": 0o400}},
        ],
    }
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": "default", "labels": {"app.kubernetes.io/managed-by": "tfcli"}},
        "spec": {
            "entrypoint": entrypoint,
            "runtimeEnvYAML": "env_vars:\n  PYTHONUNBUFFERED: '1'\n",
            "shutdownAfterJobFinishes": True,
            "backoffLimit": backoff_limit,
            "suspend": suspend,
            "rayClusterSpec": {
                "headGroupSpec": {
                    "rayStartParams": {"num-cpus": "1"},
                    "template": {"metadata": {"annotations": {"gke-gcsfuse/volumes": "true"}}, "spec": pod},
                }
            },
        },
    }


def python(script: str) -> str:
    """An entrypoint that runs ``script`` (as the client's entry points do: ``python ...``)."""
    return f"python -c {shlex.quote(script)}"


def linked(folder: Path) -> None:
    """Everything the client sets up before a run: credentials, bucket, cluster, kube context, service account and
    its Workload Identity binding, checkpoint-key secret."""
    ok("gcloud", "auth", "activate-service-account", ACCOUNT, f"--key-file={key_file(folder)}", f"--project={PROJECT}")
    ok(
        "gcloud",
        "storage",
        "buckets",
        "create",
        f"gs://{BUCKET}",
        f"--project={PROJECT}",
        f"--location={REGION}",
        "--uniform-bucket-level-access",
    )
    assert create_cluster().returncode == 0
    ok("gcloud", "container", "clusters", "get-credentials", "c1", f"--project={PROJECT}", f"--zone={ZONE}")
    assert apply(folder, service_account(), name="sa.yaml").stdout == "serviceaccount/tfcli-worker created\n"
    ok(
        "gcloud",
        "iam",
        "service-accounts",
        "add-iam-policy-binding",
        ACCOUNT,
        f"--project={PROJECT}",
        "--role=roles/iam.workloadIdentityUser",
        f"--member={WORKLOAD_MEMBER}",
        "--format=json",
    )
    (folder / "checkpoint.key").write_text("signing key 42")
    ok(
        "kubectl",
        f"--context={CONTEXT}",
        "create",
        "secret",
        "generic",
        "tfcli-checkpoint-key",
        f"--from-file=checkpoint.key={folder / 'checkpoint.key'}",
    )


def status(name: str) -> dict:
    result = kubectl("get", "rayjob", name, "-o", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout).get("status", {})


def wait_status(name: str, *wanted: str, timeout: float = 15.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        current = status(name)
        if current.get("jobDeploymentStatus") in wanted:
            return current
        assert time.monotonic() < deadline, f"{name} still {current} (waiting for {wanted})"
        time.sleep(0.05)


def wait_file(path: Path, lines: int = 1, timeout: float = 10.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while not path.exists() or len(path.read_text().splitlines()) < lines:
        assert time.monotonic() < deadline, f"{path} has not {lines} lines"
        time.sleep(0.02)
    return path.read_text().splitlines()


def process_alive(pid: int) -> bool:
    return common.proc_starttime(pid) is not None


# ---- the record, failure injection, the contract's edges ------------------------------------------------------


def test_every_call_is_recorded_in_order_with_how_stdin_came(fake_cloud):
    run("gcloud", "container", "clusters", "list", f"--project={PROJECT}", "--format=json")
    subprocess.run(["kubectl", "--context=nowhere", "get", "rayjob", "x", "-o", "json"], input="", capture_output=True)
    assert fake_cloud.calls() == [
        ["gcloud", "container", "clusters", "list", f"--project={PROJECT}", "--format=json"],
        ["kubectl", "--context=nowhere", "get", "rayjob", "x", "-o", "json"],
    ]
    assert fake_cloud.call_records()[1]["stdin_piped"] is True


def test_an_injected_failure_answers_the_matching_calls_the_given_times(fake_cloud):
    message = "ERROR: (gcloud.container.clusters.create) ResponseError: code=403, message=Permission denied."
    fake_cloud.fail(["gcloud", "container", "clusters", "create"], message, code=1, times=1)
    fake_cloud.fail(["kubectl", f"--context={CONTEXT}", "get"], "Unable to connect to the server", code=1)
    first = create_cluster()
    assert (first.returncode, first.stdout, first.stderr) == (1, "", message + "\n")
    assert "c1" not in json.dumps(fake_cloud.state()["clusters"])  # it did not act
    assert create_cluster().returncode == 0  # used up
    for _ in range(2):  # times=None: every time
        assert kubectl("get", "rayjob", "x", "-o", "json").stderr == "Unable to connect to the server\n"
    assert len(fake_cloud.calls()) == 4


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["gcloud", "compute", "instances", "list"], "ERROR: (gcloud.compute) Invalid choice: 'instances'."),
        (["gcloud", "config", "set", "project", "p"], "ERROR: (gcloud) Invalid choice: 'config'."),
        (
            ["gcloud", "container", "clusters", "list", f"--project={PROJECT}", "--bogus"],
            "ERROR: (gcloud.container.clusters.list) unrecognized arguments: --bogus",
        ),
        (
            ["gcloud", "container", "clusters", "list", f"--project={PROJECT}", "--format=yaml"],
            "ERROR: (gcloud.container.clusters.list) fake cloud: only --format=json",
        ),
    ],
)
def test_a_call_outside_the_contract_exits_2(fake_cloud, argv, message):
    result = run(*argv)
    assert result.returncode == 2 and result.stderr.startswith(message), result.stderr


def test_required_flags_are_checked(fake_cloud):
    no_project = run("gcloud", "container", "clusters", "list", "--format=json")
    assert no_project.returncode == 1
    assert "The required property [project] is not currently set." in no_project.stderr
    no_zone = run("gcloud", "container", "clusters", "delete", "c1", f"--project={PROJECT}", "--quiet")
    assert no_zone.returncode == 1 and "One of [--zone, --region] must be supplied" in no_zone.stderr
    no_context = run("kubectl", f"--context={CONTEXT}", "get", "rayjob", "x", "-o", "json")
    assert no_context.returncode == 1 and no_context.stderr == f'error: context "{CONTEXT}" does not exist\n'
    assert run("kubectl", "exec", "pod").stderr.startswith('error: unknown command "exec" for "kubectl"')


# ---- link: credentials and bucket -----------------------------------------------------------------------------


def test_activate_service_account_checks_the_key_and_never_repeats_it(fake_cloud, tmp_path):
    key = key_file(tmp_path)
    wrong = run(
        "gcloud",
        "auth",
        "activate-service-account",
        "other@x.iam.gserviceaccount.com",
        f"--key-file={key}",
        f"--project={PROJECT}",
    )
    assert wrong.returncode == 1 and "does not match the account name in the key file" in wrong.stderr
    user_key = key_file(tmp_path, kind="authorized_user")
    assert "not in a valid format" in run("gcloud", "auth", "activate-service-account", f"--key-file={user_key}").stderr
    missing = run("gcloud", "auth", "activate-service-account", ACCOUNT, f"--key-file={tmp_path / 'none.json'}")
    assert missing.returncode == 1 and "Unable to read file" in missing.stderr
    (tmp_path / "broken.json").write_text("{" + KEY_CONTENT)
    broken = run("gcloud", "auth", "activate-service-account", f"--key-file={tmp_path / 'broken.json'}")
    assert broken.returncode == 1 and "Could not read json file" in broken.stderr
    key = key_file(tmp_path)
    good = run("gcloud", "auth", "activate-service-account", ACCOUNT, f"--key-file={key}", f"--project={PROJECT}")
    assert (good.returncode, good.stderr) == (0, f"Activated service account credentials for: [{ACCOUNT}]\n")
    account = fake_cloud.state()["auth"]["accounts"][ACCOUNT]
    assert account["key_file"] == str(key.resolve()) and len(account["key_sha256"]) == 64
    stored = "".join(p.read_text() for p in fake_cloud.root.glob("*.json*"))
    assert "not-a-real-key" not in stored + wrong.stderr + broken.stderr + missing.stderr


def test_activation_lands_in_the_configuration_of_the_call_and_other_calls_need_its_account(
    fake_cloud, tmp_path, monkeypatch
):
    user = fake_cloud.user_config  # the user's own login, where a call without CLOUDSDK_CONFIG runs
    theirs = {"account": common.USER_ACCOUNT, "project": common.USER_PROJECT, "credentials": [common.USER_ACCOUNT]}
    assert fake_cloud.gcloud_config(user) == theirs
    own = tmp_path / "own"
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(own))
    listing = ["gcloud", "container", "clusters", "list", f"--project={PROJECT}", "--format=json"]
    nobody = run(*listing)
    assert nobody.returncode == 1 and nobody.stderr.startswith(
        "ERROR: (gcloud.container.clusters.list) You do not currently have an active account selected.\n"
    )
    key = key_file(tmp_path)
    ok("gcloud", "auth", "activate-service-account", ACCOUNT, f"--key-file={key}", f"--project={PROJECT}")
    assert fake_cloud.gcloud_config(own) == {"account": ACCOUNT, "project": PROJECT, "credentials": [ACCOUNT]}
    assert (own / "active_config").read_text() == "default" and (own / "configurations" / "config_default").is_file()
    assert fake_cloud.gcloud_config(user) == theirs  # not where the activation ran
    assert ok(*listing).stdout == "[]\n"
    monkeypatch.setenv("CLOUDSDK_CORE_ACCOUNT", common.USER_ACCOUNT)  # over the configuration's account
    stranger = run(*listing)
    assert stranger.returncode == 1 and stranger.stderr.startswith(
        f"ERROR: (gcloud.container.clusters.list) Your current active account [{common.USER_ACCOUNT}] does not "
        "have any valid credentials\n"
    )
    monkeypatch.delenv("CLOUDSDK_CORE_ACCOUNT")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "empty"))
    unchecked = run("kubectl", f"--context={CONTEXT}", "get", "rayjob", "x", "-o", "json")  # no credentials check
    assert unchecked.stderr == f'error: context "{CONTEXT}" does not exist\n'
    monkeypatch.delenv("CLOUDSDK_CONFIG")
    ok(*listing)  # the user's own, as them
    assert [(record["config"], record["account"]) for record in fake_cloud.call_records()] == [
        (str(own), None),
        (str(own), None),  # recorded before it acts
        (str(own), ACCOUNT),
        (str(own), None),
        (str(tmp_path / "empty"), None),
        (None, common.USER_ACCOUNT),
    ]


def test_bucket_describe_fails_until_it_is_created(fake_cloud):
    describe = ["gcloud", "storage", "buckets", "describe", f"gs://{BUCKET}", f"--project={PROJECT}", "--format=json"]
    missing = run(*describe)
    assert (missing.returncode, missing.stderr) == (
        1,
        f"ERROR: (gcloud.storage.buckets.describe) gs://{BUCKET} not found: 404.\n",
    )
    create = [
        "gcloud",
        "storage",
        "buckets",
        "create",
        f"gs://{BUCKET}",
        f"--project={PROJECT}",
        f"--location={REGION}",
        "--uniform-bucket-level-access",
    ]
    ok(*create)
    assert run(*create).returncode == 1  # 409
    found = json.loads(ok(*describe).stdout)
    assert found["name"] == BUCKET and found["location"] == "US-CENTRAL1" and found["uniform_bucket_level_access"]
    assert fake_cloud.bucket_dir(BUCKET).is_dir()


# ---- storage ------------------------------------------------------------------------------------------------


def test_storage_objects_map_to_the_bucket_folder(fake_cloud, tmp_path):
    root = fake_cloud.create_bucket(BUCKET)
    (tmp_path / "experiment.json").write_text('{"a": 1}')
    modules = tmp_path / "modules"
    (modules / "pkg").mkdir(parents=True)
    (modules / "pkg" / "m.py").write_text("X = 1\n")
    ok("gcloud", "storage", "cp", str(tmp_path / "experiment.json"), f"gs://{BUCKET}/p/e/experiment.json")
    ok("gcloud", "storage", "cp", "--recursive", str(modules), f"gs://{BUCKET}/p/e/")
    assert (root / "p/e/experiment.json").read_text() == '{"a": 1}'
    assert (root / "p/e/modules/pkg/m.py").read_text() == "X = 1\n"
    assert ok("gcloud", "storage", "cat", f"gs://{BUCKET}/p/e/experiment.json").stdout == '{"a": 1}'
    missing = run("gcloud", "storage", "cat", f"gs://{BUCKET}/p/e/results/progress.json")
    assert missing.returncode == 1
    assert "matched no objects or files:\ngs://" in missing.stderr
    assert ok("gcloud", "storage", "ls", f"gs://{BUCKET}/p/e/experiment.json").stdout.strip() == (
        f"gs://{BUCKET}/p/e/experiment.json"
    )
    assert run("gcloud", "storage", "ls", f"gs://{BUCKET}/p/e/results/checkpoints/latest.json").returncode == 1
    nothing = run("gcloud", "storage", "rm", "--recursive", f"gs://{BUCKET}/p/e/results")
    assert nothing.returncode == 1
    assert (
        f"ERROR: (gcloud.storage.rm) The following URLs matched no objects or files:\ngs://{BUCKET}/p/e/results\n"
        in (nothing.stderr)
    )
    (root / "p/e/results/checkpoints").mkdir(parents=True)
    (root / "p/e/results/progress.json").write_text("{}")
    (root / "p/e/results/checkpoints/latest.json").write_text("[]")
    local = tmp_path / "download"
    local.mkdir()
    (local / "extra.txt").write_text("kept")
    ok("gcloud", "storage", "rsync", f"gs://{BUCKET}/p/e/results", str(local), "--recursive")
    assert sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file()) == [
        "checkpoints/latest.json",
        "extra.txt",
        "progress.json",
    ]
    ok("gcloud", "storage", "rm", f"gs://{BUCKET}/p/e/results/progress.json")
    ok("gcloud", "storage", "rm", "--recursive", f"gs://{BUCKET}/p/e/results")
    assert not (root / "p/e/results").exists() and (root / "p/e/experiment.json").exists()
    assert run("gcloud", "storage", "cp", str(tmp_path / "experiment.json"), "gs://no-such-bucket/x").returncode == 1


# ---- image --------------------------------------------------------------------------------------------------


def test_builds_need_a_dockerfile_and_an_existing_repository(fake_cloud, tmp_path):
    image = f"{REGION}-docker.pkg.dev/{PROJECT}/tfcli/torchforce:1.0"
    where = [f"--location={REGION}", f"--project={PROJECT}"]
    describe = run("gcloud", "artifacts", "repositories", "describe", "tfcli", *where, "--format=json")
    assert describe.returncode == 1 and "NOT_FOUND" in describe.stderr
    assert run("gcloud", "builds", "submit", str(tmp_path), f"--tag={image}", f"--project={PROJECT}").returncode == 1
    (tmp_path / "Dockerfile").write_text("FROM python:3.11\n")
    no_repo = run("gcloud", "builds", "submit", str(tmp_path), f"--tag={image}", f"--project={PROJECT}")
    assert no_repo.returncode == 1 and 'completed with status "FAILURE"' in no_repo.stderr
    ok("gcloud", "artifacts", "repositories", "create", "tfcli", "--repository-format=docker", *where)
    repo = json.loads(ok("gcloud", "artifacts", "repositories", "describe", "tfcli", *where, "--format=json").stdout)
    assert repo["name"] == f"projects/{PROJECT}/locations/{REGION}/repositories/tfcli" and repo["format"] == "DOCKER"
    ok("gcloud", "builds", "submit", str(tmp_path), f"--tag={image}", f"--project={PROJECT}")
    assert fake_cloud.state()["images"][image]["source"] == str(tmp_path.resolve())


# ---- clusters -----------------------------------------------------------------------------------------------


def test_accelerator_types_per_zone(fake_cloud):
    def types(zone: str) -> list[str]:
        listed = ok(
            "gcloud",
            "compute",
            "accelerator-types",
            "list",
            f"--project={PROJECT}",
            f"--filter=zone:{zone}",
            "--format=json",
        )
        items = json.loads(listed.stdout)
        assert all(i["zone"] == f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{zone}" for i in items)
        return sorted(i["name"] for i in items)

    assert types("us-central1-a") == ["nvidia-h100-80gb", "nvidia-l4", "nvidia-tesla-a100", "nvidia-tesla-t4"]
    assert types("europe-west1-b") == ["nvidia-tesla-t4"]
    assert types("asia-east1-a") == []
    fake_cloud.set_accelerators("asia-east1-a", ["nvidia-l4"])
    assert types("asia-east1-a") == ["nvidia-l4"]


def test_cluster_create_list_node_pool_and_delete(fake_cloud):
    created = create_cluster("c1", "--enable-autoscaling", "--min-nodes=0", "--max-nodes=3", "--spot")
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)[0]["name"] == "c1"
    assert create_cluster().returncode == 1  # 409
    pool = [
        "gcloud",
        "container",
        "node-pools",
        "create",
        "gpu-pool",
        f"--project={PROJECT}",
        "--num-nodes=1",
        "--format=json",
    ]
    nowhere = run(
        *pool,
        "--cluster=c9",
        f"--zone={ZONE}",
        "--machine-type=n1-standard-4",
        "--accelerator=type=nvidia-tesla-t4,count=1,gpu-driver-version=default",
    )
    assert nowhere.returncode == 1 and "code=404" in nowhere.stderr
    fake_cloud.set_accelerators(ZONE, ["nvidia-l4"])
    absent = run(
        *pool,
        "--cluster=c1",
        f"--zone={ZONE}",
        "--machine-type=n1-standard-4",
        "--accelerator=type=nvidia-tesla-t4,count=1,gpu-driver-version=default",
    )
    assert absent.returncode == 1 and "nvidia-tesla-t4" in absent.stderr
    ok(
        *pool,
        "--cluster=c1",
        f"--zone={ZONE}",
        "--machine-type=g2-standard-8",
        "--spot",
        "--accelerator=type=nvidia-l4,count=1,gpu-driver-version=default",
    )
    [cluster] = json.loads(
        ok("gcloud", "container", "clusters", "list", f"--project={PROJECT}", "--format=json").stdout
    )
    assert (cluster["name"], cluster["location"], cluster["zone"], cluster["status"]) == ("c1", ZONE, ZONE, "RUNNING")
    assert cluster["currentNodeCount"] == 2 and cluster["addonsConfig"]["rayOperatorConfig"] == {"enabled": True}
    default, gpu = cluster["nodePools"]
    assert default["config"]["machineType"] == "e2-standard-4" and default["config"]["diskSizeGb"] == 50
    assert default["autoscaling"] == {"enabled": True, "maxNodeCount": 3, "locationPolicy": "BALANCED"}  # 0: left out
    assert default["config"]["spot"] is True and "accelerators" not in default["config"]
    assert gpu["config"]["accelerators"][0] | {"gpuDriverInstallationConfig": None} == {
        "acceleratorCount": "1",
        "acceleratorType": "nvidia-l4",
        "gpuDriverInstallationConfig": None,
    }
    assert "autoscaling" not in gpu  # off: left out, as the API leaves it out
    delete = ["gcloud", "container", "clusters", "delete", "c1", f"--project={PROJECT}", f"--zone={ZONE}", "--quiet"]
    ok(*delete)
    gone = run(*delete)
    assert gone.stderr == (
        f"ERROR: (gcloud.container.clusters.delete) ResponseError: code=404, message=Not found: "
        f"projects/{PROJECT}/zones/{ZONE}/clusters/c1.\n"
    )
    assert ok("gcloud", "container", "clusters", "list", f"--project={PROJECT}", "--format=json").stdout == "[]\n"


def test_the_identity_pool_exists_only_with_a_cluster(fake_cloud):
    binding = [
        "gcloud",
        "iam",
        "service-accounts",
        "add-iam-policy-binding",
        ACCOUNT,
        f"--project={PROJECT}",
        "--role=roles/iam.workloadIdentityUser",
        f"--member={WORKLOAD_MEMBER}",
        "--format=json",
    ]
    assert "Identity Pool does not exist" in run(*binding).stderr
    assert create_cluster().returncode == 0
    policy = json.loads(ok(*binding).stdout)
    assert policy["bindings"] == [{"members": [WORKLOAD_MEMBER], "role": "roles/iam.workloadIdentityUser"}]


# ---- nodes: kubectl get nodes, gcloud compute ssh/scp --------------------------------------------------------


NODE_NAME = r"gke-{cluster}-{pool}-([0-9a-f]{{8}})-[a-z0-9]{{4}}"
WHERE = (f"--project={PROJECT}", f"--zone={ZONE}")


def with_gpu_pool() -> None:
    """Cluster c1 (one e2-standard-4 node) with a Spot pool of two g2-standard-8 nodes (one L4 each), and its
    kube context."""
    assert create_cluster().returncode == 0
    ok(
        "gcloud",
        "container",
        "node-pools",
        "create",
        "gpu-pool",
        "--cluster=c1",
        *WHERE,
        "--machine-type=g2-standard-8",
        "--num-nodes=2",
        "--accelerator=type=nvidia-l4,count=1,gpu-driver-version=default",
        "--spot",
        "--format=json",
    )
    ok("gcloud", "container", "clusters", "get-credentials", "c1", *WHERE)


def node_list(context: str = CONTEXT) -> list[dict]:
    listed = json.loads(ok("kubectl", f"--context={context}", "get", "nodes", "-o", "json").stdout)
    assert (listed["kind"], listed["apiVersion"]) == ("List", "v1")
    return listed["items"]


def test_get_nodes_lists_the_nodes_of_every_pool_as_gke_names_and_labels_them(fake_cloud):
    with_gpu_pool()
    nodes = node_list()
    names = [node["metadata"]["name"] for node in nodes]
    assert names == sorted(names) and len(set(names)) == 3
    system, *gpus = nodes
    assert re.fullmatch(NODE_NAME.format(cluster="c1", pool="default-pool"), names[0])
    groups = {re.fullmatch(NODE_NAME.format(cluster="c1", pool="gpu-pool"), name)[1] for name in names[1:]}
    assert len(groups) == 1  # one instance group per pool
    labels = system["metadata"]["labels"]
    assert (
        labels["cloud.google.com/gke-nodepool"],
        labels["node.kubernetes.io/instance-type"],
        labels["topology.kubernetes.io/zone"],
        labels["topology.kubernetes.io/region"],
        labels["kubernetes.io/hostname"],
    ) == ("default-pool", "e2-standard-4", ZONE, REGION, names[0])
    assert "cloud.google.com/gke-accelerator" not in labels and "cloud.google.com/gke-spot" not in labels
    assert system["status"]["allocatable"]["cpu"] == "3920m"  # 4 vCPUs less GKE's 80m
    assert (
        system["status"]["allocatable"]["memory"] == f"{int(13.4 * 2**20) - 100 * 2**10}Ki"
    )  # 16 GiB less 2.6 GiB, 100 MiB
    assert system["status"]["capacity"]["cpu"] == "4" and "nvidia.com/gpu" not in system["status"]["allocatable"]
    assert system["spec"]["providerID"] == f"gce://{PROJECT}/{ZONE}/{names[0]}" and "taints" not in system["spec"]
    for node in gpus:
        labels = node["metadata"]["labels"]
        assert (
            labels["cloud.google.com/gke-nodepool"],
            labels["node.kubernetes.io/instance-type"],
            labels["cloud.google.com/gke-accelerator"],
            labels["cloud.google.com/gke-spot"],
            labels["topology.kubernetes.io/zone"],
        ) == ("gpu-pool", "g2-standard-8", "nvidia-l4", "true", ZONE)
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "1"
        assert node["spec"]["taints"] == [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}]

    def stable(node: dict) -> tuple:  # all but the heartbeat time
        return node["metadata"], node["spec"], node["status"]["allocatable"], node["status"]["addresses"]

    assert [stable(node) for node in node_list()] == [stable(node) for node in nodes]  # the same nodes every time
    one = json.loads(ok("kubectl", f"--context={CONTEXT}", "get", "node", names[1], "-o", "json").stdout)
    assert (one["kind"], one["metadata"]["name"]) == ("Node", names[1])
    assert ok("kubectl", f"--context={CONTEXT}", "get", "nodes", "-o", "name").stdout == "".join(
        f"node/{name}\n" for name in names
    )
    missing = kubectl("get", "node", "gke-c1-default-pool-00000000-zzzz", "-o", "json")
    assert (missing.returncode, missing.stderr) == (
        1,
        'Error from server (NotFound): nodes "gke-c1-default-pool-00000000-zzzz" not found\n',
    )
    assert create_cluster("c2").returncode == 0  # another cluster's nodes are its own context's
    ok("gcloud", "container", "clusters", "get-credentials", "c2", *WHERE)
    [other] = node_list(f"gke_{PROJECT}_{ZONE}_c2")
    assert re.fullmatch(NODE_NAME.format(cluster="c2", pool="default-pool"), other["metadata"]["name"])
    assert [node["metadata"]["name"] for node in node_list()] == names


def test_compute_ssh_runs_nothing_but_records_and_says_what_ran_where(fake_cloud):
    with_gpu_pool()
    node = node_list()[1]["metadata"]["name"]
    done = ok("gcloud", "compute", "ssh", node, *WHERE, "--command=nvidia-smi -L")
    assert (done.stdout, done.stderr) == (f"fake cloud: ran on {node} in {ZONE}: nvidia-smi -L\n", "")
    ok("gcloud", "compute", "ssh", f"me@{node}", *WHERE, "--command=nproc")
    assert fake_cloud.state()["ssh"] == [
        {"project": PROJECT, "zone": ZONE, "node": node, "user": "", "command": "nvidia-smi -L"},
        {"project": PROJECT, "zone": ZONE, "node": node, "user": "me", "command": "nproc"},
    ]
    for project, zone, name in ((PROJECT, ZONE, "gke-c1-gpu-pool-nope"), (PROJECT, "us-central1-b", node)) + (
        ("other-proj", ZONE, node),
    ):
        unknown = run("gcloud", "compute", "ssh", name, f"--project={project}", f"--zone={zone}", "--command=nproc")
        assert (unknown.returncode, unknown.stdout, unknown.stderr) == (
            1,
            "",
            "ERROR: (gcloud.compute.ssh) Could not fetch resource:\n"
            f" - The resource 'projects/{project}/zones/{zone}/instances/{name}' was not found\n",
        )
    interactive = run("gcloud", "compute", "ssh", node, *WHERE)
    assert interactive.returncode == 2 and "give --command" in interactive.stderr
    no_zone = run("gcloud", "compute", "ssh", node, f"--project={PROJECT}", "--command=nproc")
    assert no_zone.returncode == 1 and "One of [--zone, --region] must be supplied" in no_zone.stderr
    assert len(fake_cloud.state()["ssh"]) == 2
    ok("gcloud", "container", "clusters", "delete", "c1", *WHERE, "--quiet")
    assert run("gcloud", "compute", "ssh", node, *WHERE, "--command=nproc").returncode == 1  # gone with its cluster


def test_compute_scp_needs_the_local_source_and_the_node_and_records_the_copy(fake_cloud, tmp_path):
    with_gpu_pool()
    node = node_list()[0]["metadata"]["name"]
    source = tmp_path / "setup.sh"
    source.write_text("echo hi\n")
    (tmp_path / "folder" / "sub").mkdir(parents=True)
    (tmp_path / "folder" / "sub" / "a.txt").write_text("a")
    done = ok("gcloud", "compute", "scp", str(source), f"{node}:/tmp/setup.sh", *WHERE)
    assert (done.stdout, done.stderr) == ("", f"fake cloud: copied {source} to {node}:/tmp/setup.sh in {ZONE}\n")
    folder = run("gcloud", "compute", "scp", str(tmp_path / "folder"), f"{node}:dest", *WHERE)
    assert (folder.returncode, folder.stderr) == (
        1,
        f"scp: {tmp_path / 'folder'}: not a regular file\n"
        "ERROR: (gcloud.compute.scp) [/usr/bin/scp] exited with return code [1].\n",
    )
    ok("gcloud", "compute", "scp", "--recurse", str(tmp_path / "folder"), f"{node}:dest", *WHERE)
    where = {"project": PROJECT, "zone": ZONE, "node": node, "user": ""}
    assert fake_cloud.state()["scp"] == [
        where | {"source": str(source), "target": "/tmp/setup.sh", "files": {"setup.sh": common.sha256_of(source)}},
        where
        | {
            "source": str(tmp_path / "folder"),
            "target": "dest",
            "files": {"sub/a.txt": common.sha256_of(tmp_path / "folder" / "sub" / "a.txt")},
        },
    ]
    missing = run("gcloud", "compute", "scp", str(tmp_path / "none.txt"), f"{node}:/tmp/x", *WHERE)
    assert (missing.returncode, missing.stderr) == (
        1,
        f"{tmp_path / 'none.txt'}: No such file or directory\n"
        "ERROR: (gcloud.compute.scp) [/usr/bin/scp] exited with return code [1].\n",
    )
    unknown = run("gcloud", "compute", "scp", str(source), "gke-c1-x:/tmp/x", *WHERE)
    assert (unknown.returncode, unknown.stderr) == (
        1,
        "ERROR: (gcloud.compute.scp) Could not fetch resource:\n"
        f" - The resource 'projects/{PROJECT}/zones/{ZONE}/instances/gke-c1-x' was not found\n",
    )
    backwards = run("gcloud", "compute", "scp", f"{node}:/etc/hostname", str(tmp_path), *WHERE)
    assert backwards.returncode == 2 and "only `scp LOCAL... INSTANCE:TARGET`" in backwards.stderr
    assert len(fake_cloud.state()["scp"]) == 2


# ---- kubectl objects ----------------------------------------------------------------------------------------


def test_objects_live_per_context_and_secrets_keep_no_content(fake_cloud, tmp_path):
    linked(tmp_path)
    assert apply(tmp_path, service_account(), name="sa.yaml").stdout == "serviceaccount/tfcli-worker unchanged\n"
    changed = service_account()
    changed["metadata"]["labels"]["torchforce.dev/project"] = "demo"
    assert apply(tmp_path, changed, name="sa.yaml").stdout == "serviceaccount/tfcli-worker configured\n"
    again = kubectl(
        "create",
        "secret",
        "generic",
        "tfcli-checkpoint-key",
        f"--from-file=checkpoint.key={tmp_path / 'checkpoint.key'}",
    )
    assert (again.returncode, again.stderr) == (
        1,
        'error: failed to create secret secrets "tfcli-checkpoint-key" already exists\n',
    )
    secret = json.loads(kubectl("get", "secret", "tfcli-checkpoint-key", "-o", "json").stdout)
    assert list(secret["data"]) == ["checkpoint.key"] and "signing key" not in json.dumps(secret)
    assert "signing key" not in (fake_cloud.root / "state.json").read_text()
    stored = fake_cloud.state()["objects"][CONTEXT]["Secret/default/tfcli-checkpoint-key"]["object"]["data"]
    assert stored["checkpoint.key"]["path"] == str((tmp_path / "checkpoint.key").resolve())
    missing = kubectl("get", "rayjob", "tf-none-0000", "-o", "json")
    assert missing.stderr == 'Error from server (NotFound): rayjobs.ray.io "tf-none-0000" not found\n'
    bad = ray_job("tf-bad-0000", "python -c pass")
    bad["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] = 1
    refused = apply(tmp_path, bad)
    assert refused.returncode == 1 and "rayStartParams.num-cpus in body must be of type string" in refused.stderr


def test_a_namespace_set_on_the_context_is_where_calls_that_name_none_look(fake_cloud, tmp_path):
    linked(tmp_path)
    apply(tmp_path, ray_job("tf-ns-0009", python("import time; time.sleep(60)")))
    fake_cloud.set_namespace(CONTEXT, "team-a")  # the user's kubens team-a
    missing = kubectl("get", "rayjob", "tf-ns-0009", "-o", "json")
    assert missing.stderr == 'Error from server (NotFound): rayjobs.ray.io "tf-ns-0009" not found\n'
    assert kubectl("--namespace=default", "get", "rayjob", "tf-ns-0009", "-o", "json").returncode == 0
    assert apply(tmp_path, service_account(), name="sa.yaml").stdout == "serviceaccount/tfcli-worker unchanged\n"
    elsewhere = run("kubectl", f"--context={CONTEXT}", "--namespace=team-a", "apply", "-f", str(tmp_path / "sa.yaml"))
    assert elsewhere.returncode == 1 and 'the namespace from the provided object "default" does not match' in (
        elsewhere.stderr
    )
    ok("gcloud", "container", "clusters", "get-credentials", "c1", f"--project={PROJECT}", f"--zone={ZONE}")
    assert kubectl("get", "rayjob", "tf-ns-0009", "-o", "json").returncode == 0  # written anew: default again


# ---- the fake KubeRay operator ------------------------------------------------------------------------------


def test_a_rayjob_runs_its_entrypoint_with_the_bucket_mounted(fake_cloud, tmp_path, monkeypatch):
    linked(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    script = (
        "import os, pathlib, sys\n"
        "out = pathlib.Path('/mnt/tfcli/proj/exp/results/out.txt')\n"
        "out.parent.mkdir(parents=True, exist_ok=True)\n"
        "out.write_text(os.environ['XDG_DATA_HOME'] + ' ' + os.environ['TFCLI_FAKE_TEST'] + ' '"
        " + os.environ['PYTHONUNBUFFERED'] + ' ' + sys.argv[1])\n"
        "print('driver says hi')\n"
    )
    job = ray_job("tf-exp-0001", python(script) + " /mnt/tfcli/proj/exp")
    assert apply(tmp_path, job).stdout == "rayjob.ray.io/tf-exp-0001 created\n"
    done = wait_status("tf-exp-0001", "Complete", "Failed")
    assert (done["jobDeploymentStatus"], done["jobStatus"], done["succeeded"], done["failed"]) == (
        "Complete",
        "SUCCEEDED",
        1,
        0,
    )
    bucket = fake_cloud.bucket_dir(BUCKET)
    assert (bucket / "proj/exp/results/out.txt").read_text() == f"{tmp_path / 'data'} yes 1 {bucket}/proj/exp"
    logs = kubectl("logs", "job/tf-exp-0001")
    assert logs.returncode == 0 and "driver says hi\n" in logs.stdout and "succeeded" in logs.stdout
    assert (fake_cloud.job_dir(CONTEXT, "tf-exp-0001") / "exit_code").read_text().strip() == "0"
    assert apply(tmp_path, job).stdout == "rayjob.ray.io/tf-exp-0001 unchanged\n"
    ignored = kubectl("patch", "rayjob", "tf-exp-0001", "--type=merge", '-p={"spec":{"suspend":true}}')
    assert ignored.returncode == 0  # KubeRay takes the patch and ignores it: suspending is for Running/Initializing
    assert status("tf-exp-0001")["jobDeploymentStatus"] == "Complete"


def test_suspend_kills_the_run_resume_runs_it_again_delete_ends_it(fake_cloud, tmp_path):
    linked(tmp_path)
    script = (
        "import os, time\n"
        "open('/mnt/tfcli/runs.txt', 'a').write(f'{os.getpid()}\\n')\n"
        "print('run started', flush=True)\n"
        "time.sleep(60)\n"
    )
    assert apply(tmp_path, ray_job("tf-long-0002", python(script))).returncode == 0
    runs = fake_cloud.bucket_dir(BUCKET) / "runs.txt"
    first = int(wait_file(runs, 1)[0])
    running = wait_status("tf-long-0002", "Running")
    assert running["jobStatus"] == "RUNNING"
    follow = subprocess.Popen(
        ["kubectl", f"--context={CONTEXT}", "logs", "job/tf-long-0002", "--follow"], stdout=subprocess.PIPE, text=True
    )
    while "run started" not in follow.stdout.readline():  # the header lines of `ray job submit` first
        pass
    patch = ["patch", "rayjob", "tf-long-0002", "--type=merge"]
    assert kubectl(*patch, '-p={"spec":{"suspend":true}}').stdout == "rayjob.ray.io/tf-long-0002 patched\n"
    assert not process_alive(first)
    assert follow.wait(timeout=10) == 0  # the stream ends with the pods
    suspended = status("tf-long-0002")
    assert suspended["jobDeploymentStatus"] == "Suspended" and "jobStatus" not in suspended
    assert (
        kubectl("logs", "job/tf-long-0002").stderr
        == 'Error from server (NotFound): jobs.batch "tf-long-0002" not found\n'
    )
    assert kubectl(*patch, '-p={"spec":{"suspend":false}}').returncode == 0
    second = int(wait_file(runs, 2)[1])
    assert second != first and wait_status("tf-long-0002", "Running")["jobStatus"] == "RUNNING"
    assert (
        kubectl("delete", "rayjob", "tf-long-0002", "--ignore-not-found").stdout
        == 'rayjob.ray.io "tf-long-0002" deleted\n'
    )
    assert not process_alive(second)
    assert kubectl("delete", "rayjob", "tf-long-0002", "--ignore-not-found").returncode == 0
    assert kubectl("delete", "rayjob", "tf-long-0002").returncode == 1


def test_a_failing_entrypoint_is_retried_per_backoff_limit(fake_cloud, tmp_path):
    linked(tmp_path)
    script = "import sys; open('/mnt/tfcli/tries.txt', 'a').write('x'); print('boom'); sys.exit(3)"
    apply(tmp_path, ray_job("tf-fail-0003", python(script), backoff_limit=1))
    failed = wait_status("tf-fail-0003", "Failed", "Complete")
    assert (failed["jobStatus"], failed["failed"], failed["reason"]) == ("FAILED", 2, "AppFailed")
    assert "exit code 3" in failed["message"] and "boom" in failed["message"]
    assert (fake_cloud.bucket_dir(BUCKET) / "tries.txt").read_text() == "xx"
    assert (fake_cloud.job_dir(CONTEXT, "tf-fail-0003") / "exit_code").read_text().strip() == "3"


def test_a_rayjob_waits_for_what_its_pods_need(fake_cloud, tmp_path):
    linked(tmp_path)
    kubectl("delete", "serviceaccount", "tfcli-worker")
    apply(tmp_path, ray_job("tf-wait-0004", python("print('ran')")))
    waiting = status("tf-wait-0004")
    assert waiting["jobDeploymentStatus"] == "Initializing"
    assert 'serviceaccount "tfcli-worker" not found' in waiting["rayClusterStatus"]["conditions"][0]["message"]
    assert fake_cloud.events(CONTEXT, "tf-wait-0004")
    apply(tmp_path, service_account(), name="sa.yaml")
    assert wait_status("tf-wait-0004", "Complete")["jobStatus"] == "SUCCEEDED"
    invalid = ray_job("tf-" + "x" * 45, python("pass"))
    apply(tmp_path, invalid)
    assert status(invalid["metadata"]["name"])["jobDeploymentStatus"] == "ValidationFailed"


@pytest.mark.parametrize(
    ("resources", "selector", "reason"),
    [
        ({"cpu": "4", "memory": "4Gi"}, None, "Insufficient cpu"),  # e2-standard-4 leaves 3.92 CPUs to pods
        ({"cpu": "1", "memory": "14Gi"}, None, "Insufficient memory"),
        ({"cpu": "1", "nvidia.com/gpu": "1"}, "nvidia-tesla-t4", "Insufficient nvidia.com/gpu"),
    ],
)
def test_a_pod_that_fits_no_node_stays_pending(fake_cloud, tmp_path, resources, selector, reason):
    linked(tmp_path)
    job = ray_job("tf-big-0007", python("pass"))
    pod = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    pod["containers"][0]["resources"] = {"requests": resources, "limits": resources}
    if selector:
        pod["nodeSelector"] = {"cloud.google.com/gke-accelerator": selector}
    apply(tmp_path, job)
    waiting = status("tf-big-0007")
    assert waiting["jobDeploymentStatus"] == "Initializing"
    assert reason in fake_cloud.events(CONTEXT, "tf-big-0007")[0]


def test_the_operator_can_be_slow_to_see_a_new_rayjob(fake_cloud, tmp_path):
    linked(tmp_path)
    fake_cloud.set_delays(controller=0.5)
    apply(tmp_path, ray_job("tf-slow-0008", python("pass")))
    assert "status" not in json.loads(kubectl("get", "rayjob", "tf-slow-0008", "-o", "json").stdout)
    assert wait_status("tf-slow-0008", "Complete")["jobStatus"] == "SUCCEEDED"


def test_the_operator_can_be_slow_to_act_on_a_suspend_patch(fake_cloud, tmp_path):
    linked(tmp_path)
    apply(tmp_path, ray_job("tf-lag-0010", python("import time; time.sleep(60)")))
    wait_status("tf-lag-0010", "Running")
    fake_cloud.set_delays(reconcile=1.0)
    patch = ["patch", "rayjob", "tf-lag-0010", "--type=merge"]
    assert kubectl(*patch, '-p={"spec":{"suspend":true}}').returncode == 0
    shown = json.loads(kubectl("get", "rayjob", "tf-lag-0010", "-o", "json").stdout)
    assert shown["spec"]["suspend"] is True and shown["status"]["jobDeploymentStatus"] == "Running"
    assert shown["status"]["observedGeneration"] == 1 < shown["metadata"]["generation"] == 2
    assert wait_status("tf-lag-0010", "Suspended")["observedGeneration"] == 2
    assert kubectl(*patch, '-p={"spec":{"suspend":false}}').returncode == 0
    assert status("tf-lag-0010")["jobDeploymentStatus"] == "Suspended"  # not acted on yet
    assert wait_status("tf-lag-0010", "Running")["observedGeneration"] == 3


def test_deleting_the_cluster_ends_its_runs_and_its_context(fake_cloud, tmp_path):
    linked(tmp_path)
    apply(tmp_path, ray_job("tf-long-0005", python("import os, time; print(os.getpid(), flush=True); time.sleep(60)")))
    wait_status("tf-long-0005", "Running")
    log = fake_cloud.job_dir(CONTEXT, "tf-long-0005") / "log"
    pid = int(wait_file(log)[0])
    ok("gcloud", "container", "clusters", "delete", "c1", f"--project={PROJECT}", f"--zone={ZONE}", "--quiet")
    assert not process_alive(pid)
    assert (
        kubectl("get", "rayjob", "tf-long-0005", "-o", "json").stderr == f'error: context "{CONTEXT}" does not exist\n'
    )


def test_stop_all_kills_what_the_fake_started(fake_cloud, tmp_path):
    linked(tmp_path)
    apply(tmp_path, ray_job("tf-long-0006", python("import os, time; print(os.getpid(), flush=True); time.sleep(60)")))
    pid = int(wait_file(fake_cloud.job_dir(CONTEXT, "tf-long-0006") / "log")[0])
    assert process_alive(pid)
    fake_cloud.stop_all()
    assert not process_alive(pid)
