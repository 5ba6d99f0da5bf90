"""The GKE backend end to end against the fake cloud (``tests/fakecloud``): fake ``gcloud`` and ``kubectl`` first on
PATH, which record every argument list, keep the cloud's state in a file, and run each RayJob's entry point for real
(the bucket is a folder, as the FUSE driver makes it in the pods).

The journey: link -> cluster create (cost shown, confirmed) -> list -> experiments in each run mode -> logs -> pause
(suspend) -> resume (unsuspend) -> download -> stop -> cluster delete. The recorded calls must be exactly the
expected argument lists, every manifest must pass the schemas, and the key's content must appear nowhere.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from tests.client.conftest import tfcli, wait_for
from tests.client.gke_common import (
    BUCKET,
    CLUSTER,
    CONTEXT,
    EMAIL,
    KEY_ID,
    PPO,
    PRIVATE_KEY,
    PROJECT,
    ZONE,
    assert_own_config,
    cluster_create_call,
    key_file,
    kubectl,
    setup_calls,
)
from tests.client.test_gke_manifests import KUBERNETES, as_pod, crd_errors, templates
from tests.fakecloud import FakeCloud
from tests.fakecloud.common import USER_ACCOUNT, USER_PROJECT
from torchforce import __version__
from torchforce.client import Experiment, Project
from torchforce.client.checkpoints import Checkpoints

pytestmark = pytest.mark.slow


def calls_since(cloud: FakeCloud, count: int) -> list[list[str]]:
    return cloud.calls()[count:]


def test_linking_activates_the_key_makes_the_bucket_and_records_the_link_privately(project, cloud, tmp_path):
    key = key_file(tmp_path)
    done = tfcli(project.root, "gcloud", "link", "-r", PROJECT, "--key-file", str(key), "--zone", ZONE)
    assert done.returncode == 0, done.stderr
    assert cloud.calls() == [
        ["gcloud", "auth", "activate-service-account", EMAIL, f"--key-file={key}", f"--project={PROJECT}"],
        ["gcloud", "storage", "buckets", "describe", BUCKET, f"--project={PROJECT}", "--format=json"],
        ["gcloud", "storage", "buckets", "create", BUCKET, f"--project={PROJECT}", "--location=us-central1"]
        + ["--uniform-bucket-level-access"],
    ]
    settings_file = project.root / ".tfcli" / "project.json"
    assert stat.S_IMODE(settings_file.stat().st_mode) == 0o600
    link = json.loads(settings_file.read_text())["gcloud"]
    assert (link["project"], link["zone"], link["service_account"], link["key_file"], link["bucket"]) == (
        PROJECT,
        ZONE,
        EMAIL,
        str(key),
        BUCKET,
    )
    shown = tfcli(project.root, "gcloud", "show")
    assert shown.returncode == 0 and EMAIL in shown.stdout and PRIVATE_KEY[:40] not in shown.stdout
    again = tfcli(project.root, "gcloud", "link", "-r", PROJECT, "--key-file", str(key), "--zone", ZONE)
    assert again.returncode == 0
    assert cloud.calls()[-1][:4] == ["gcloud", "storage", "buckets", "describe"]  # the bucket is there now


def test_init_links_in_one_step_and_dry_run_changes_nothing(tmp_path, cloud, monkeypatch):
    key = key_file(tmp_path)
    root = tmp_path / "fresh"
    root.mkdir()
    dry = tfcli(root, "init", "-r", PROJECT, "--key-file", str(key), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert cloud.calls() == [] and not (root / ".tfcli").exists()
    assert f"would run: gcloud auth activate-service-account {EMAIL} --key-file={key}" in dry.stdout
    done = tfcli(root, "init", "-r", PROJECT, "--key-file", str(key))
    assert done.returncode == 0, done.stderr
    assert "Linked to the Google Cloud project 'my-rl-project'" in done.stdout
    assert Project(root).settings["gcloud"]["service_account"] == EMAIL


def expected_create_calls(key_path: Path, root: Path) -> list[list[str]]:
    return [cluster_create_call(CLUSTER, ZONE, "n1-standard-4", 2, 50), *setup_calls(CLUSTER, ZONE, root, key_path)]


def create_cluster(project: Project) -> None:
    done = tfcli(
        project.root, "cluster", "create", "-n", CLUSTER, "-m", "n1-standard-4", "-s", "2", "--disk-size", "50", "--yes"
    )
    assert done.returncode == 0, done.stderr
    assert "n1-standard-4" in done.stdout and "$" in done.stdout and "not a quote" in done.stdout


def run_folder(cloud: FakeCloud, project: Project, name: str) -> Path:
    return cloud.bucket_dir(f"{PROJECT}-tfcli") / project.name / name


def test_the_whole_journey(linked, cloud, tmp_path):
    project = linked
    root = project.root
    signing_key = Checkpoints.default_key_file()
    built = tfcli(root, "image", "build")
    assert built.returncode == 0, built.stderr
    image = f"us-central1-docker.pkg.dev/{PROJECT}/tfcli/torchforce:{__version__}"
    assert cloud.calls()[-3:] == [
        ["gcloud", "artifacts", "repositories", "describe", "tfcli", "--location=us-central1", f"--project={PROJECT}"]
        + ["--format=json"],
        ["gcloud", "artifacts", "repositories", "create", "tfcli", "--repository-format=docker"]
        + ["--location=us-central1", f"--project={PROJECT}"],
        [
            "gcloud",
            "builds",
            "submit",
            str(Path(__file__).resolve().parents[2]),
            f"--tag={image}",
            f"--project={PROJECT}",
        ],
    ]
    before = len(cloud.calls())
    # cluster create: the cost first, then the calls, in order
    create_cluster(project)
    assert calls_since(cloud, before) == expected_create_calls(signing_key, root)
    assert project.store.cluster(CLUSTER).status == "running"
    listed = tfcli(root, "cluster", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)["gke"]
    assert (row["name"], row["status"], row["nodes"], row["known"]) == (CLUSTER, "RUNNING", 2, True)
    assert row["per_hour"] > 0
    # single: start, logs, pause (suspend), resume (unsuspend), download, stop
    assert tfcli(root, "experiment", "new", "-n", "single_run", *PPO, "-t", "400000").returncode == 0
    before = len(cloud.calls())
    started = tfcli(root, "experiment", "start", "-e", "single_run", "-c", CLUSTER)
    assert started.returncode == 0, started.stderr
    start_calls = calls_since(cloud, before)
    experiment = Experiment.load(project, "single_run")
    record = experiment.record()
    job = record.job
    assert (record.backend, record.cluster, record.status) == ("gke", CLUSTER, "running")
    assert job.startswith("tf-single-run-") and f"RayJob {job} on '{CLUSTER}'" in started.stdout
    folder = f"{BUCKET}/{project.name}/single_run"
    manifest_file = root / "experiments" / "single_run" / "gke" / f"{job}.yaml"
    assert start_calls == [
        ["gcloud", "storage", "rm", "--recursive", f"{folder}/results"],
        [
            "gcloud",
            "storage",
            "cp",
            str(root / "experiments" / "single_run" / "experiment.json"),
            f"{folder}/experiment.json",
        ],
        ["gcloud", "storage", "rm", f"{folder}/results/control.json"],
        kubectl(CONTEXT, "apply", "-f", str(manifest_file)),
        kubectl(CONTEXT, "get", "rayjob", job, "-o", "json"),
    ]
    manifest = yaml.safe_load(manifest_file.read_text())
    assert manifest["kind"] == "RayJob" and manifest["spec"]["suspend"] is False
    wait_for(lambda: experiment.progress().get("timesteps", 0) >= 1500, 120, 0.5, "the run to make progress")
    logs = tfcli(root, "experiment", "logs", "-e", "single_run")
    assert logs.returncode == 0 and "running single_run" in logs.stdout
    paused = tfcli(root, "experiment", "pause", "-e", "single_run", timeout=180)
    assert paused.returncode == 0, paused.stderr
    assert experiment.record().status == "paused"
    assert kubectl(CONTEXT, "patch", "rayjob", job, "--type=merge", '-p={"spec":{"suspend":true}}') in cloud.calls()
    at_pause = experiment.checkpoint_timesteps()
    assert at_pause > 0
    before = len(cloud.calls())
    resumed = tfcli(root, "experiment", "start", "-e", "single_run", "--resume", "-t", "500000")  # a new budget too
    assert resumed.returncode == 0, resumed.stderr
    assert experiment.record().job == job  # the same RayJob, unsuspended, on the spec of the new budget
    spec_file = root / "experiments" / "single_run" / "experiment.json"
    calls = calls_since(cloud, before)
    upload = ["gcloud", "storage", "cp", str(spec_file), f"{folder}/experiment.json"]
    assert calls[calls.index(upload) :][:3] == [
        upload,
        ["gcloud", "storage", "rm", f"{folder}/results/control.json"],
        kubectl(CONTEXT, "patch", "rayjob", job, "--type=merge", '-p={"spec":{"suspend":false}}'),
    ]
    assert json.loads((run_folder(cloud, project, "single_run") / "experiment.json").read_text())[
        "total_timesteps"
    ] == (500000)
    wait_for(lambda: experiment.progress().get("timesteps", 0) > at_pause + 500, 120, 0.5, "the resumed run to go on")
    log = (run_folder(cloud, project, "single_run") / "results" / "worker.log").read_text()
    assert "resumed from checkpoint" in log
    downloaded = tfcli(root, "experiment", "download", "-e", "single_run")
    assert downloaded.returncode == 0, downloaded.stderr
    assert (root / "experiments" / "single_run" / "results" / "episodes.jsonl").is_file()
    stopped = tfcli(root, "experiment", "stop", "-e", "single_run", timeout=180)
    assert stopped.returncode == 0, stopped.stderr
    assert experiment.record().status == "stopped"
    assert kubectl(CONTEXT, "delete", "rayjob", job, "--ignore-not-found") in cloud.calls()
    results = root / "experiments" / "single_run" / "results"
    assert json.loads((results / "checkpoints" / "latest.json").read_text())["timesteps"] > at_pause
    assert not (results / "control.json").exists()
    # multi-threaded and distributed: their manifests, and each runs to its end
    spread = ["--num-workers", "2", "--num-parameter-servers", "1", "-t", "600"]
    threads = ["--num-workers", "2", "-N", "1", "-t", "600"]  # a thread steps one environment: PPO's -N 2 goes
    for name, flags in (("threads", threads), ("spread", spread)):
        mode = "multi-threaded" if name == "threads" else "distributed"
        created = tfcli(root, "experiment", "new", "-n", name, *PPO, "--run-mode", mode, *flags)
        assert created.returncode == 0, created.stderr
        assert tfcli(root, "experiment", "start", "-e", name, "-c", CLUSTER).returncode == 0
        run = Experiment.load(project, name)
        manifest = yaml.safe_load((root / "experiments" / name / "gke" / f"{run.record().job}.yaml").read_text())
        groups = manifest["spec"]["rayClusterSpec"].get("workerGroupSpecs", [])
        if mode == "distributed":
            assert {group["groupName"]: group["replicas"] for group in groups} == {"workers": 2, "parameter-servers": 1}
        else:
            head = manifest["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
            assert groups == [] and head["resources"]["requests"]["cpu"] in ("2", 2)
        assert (
            wait_for(lambda run=run: run.record().status != "running" and run.record(), 240, 1.0).status == "finished"
        )
        assert kubectl(CONTEXT, "delete", "rayjob", run.record().job, "--ignore-not-found") in cloud.calls()
    # cluster delete
    before = len(cloud.calls())
    deleted = tfcli(root, "cluster", "delete", "-c", CLUSTER)
    assert deleted.returncode == 0, deleted.stderr
    assert calls_since(cloud, before) == [
        ["gcloud", "container", "clusters", "delete", CLUSTER, f"--project={PROJECT}", f"--zone={ZONE}", "--quiet"]
    ]
    assert project.store.cluster(CLUSTER) is None
    # every manifest the client wrote passes the schemas (KubeRay's CRD, Kubernetes' own kinds)
    written = sorted(root.glob("experiments/*/gke/*.yaml")) + sorted(root.glob(".tfcli/gke/*.yaml"))
    assert len(written) == 4
    for file in written:
        for document in yaml.safe_load_all(file.read_text()):
            if document["kind"] == "RayJob":
                assert crd_errors(document) == [], file
                for template in templates(document).values():
                    kubernetes_validate.validate(as_pod(template), KUBERNETES, strict=True)
            else:
                kubernetes_validate.validate(document, KUBERNETES, strict=True)
    # every call ran in tfcli's own gcloud configuration, as the service account; the user's is as it was
    assert_own_config(cloud.call_records())
    assert cloud.gcloud_config(cloud.user_config) == {
        "account": USER_ACCOUNT,
        "project": USER_PROJECT,
        "credentials": [USER_ACCOUNT],
    }
    # the key's content is nowhere: not in an argument, not in a file the client (or the runs) wrote
    secrets = [PRIVATE_KEY.splitlines()[1], KEY_ID]
    for call in cloud.calls():
        assert not any(secret in argument for argument in call for secret in secrets)
    for folder in (root, cloud.bucket_dir(f"{PROJECT}-tfcli")):
        for path in folder.rglob("*"):
            if path.is_file():
                content = path.read_bytes()
                assert not any(secret.encode() in content for secret in secrets), path
