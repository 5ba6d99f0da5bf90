"""Bad input on the GKE path gets one clear message, exit code 2, and changes nothing: no gcloud, an unlinked
project, names Kubernetes refuses, unknown or unoffered GPUs, a cluster that does not exist, a failing gcloud. And
``--dry-run`` prints the calls and changes nothing, anywhere."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.client.conftest import tfcli
from tests.client.gke_common import CLUSTER, PROJECT, ZONE, cluster_create_call, key_file
from torchforce.client import Project, gke
from torchforce.client.cluster import Cluster
from torchforce.client.errors import ClientError, ClientWarning


def state_of(project: Project) -> str:
    """A digest of everything the project keeps: settings, database rows, files."""
    digest = hashlib.sha256()
    digest.update((project.root / ".tfcli" / "project.json").read_bytes())
    digest.update(repr([(r.name, r.status, r.spec) for r in project.store.clusters()]).encode())
    digest.update(repr([(r.name, r.status, r.job) for r in project.store.experiments()]).encode())
    for path in sorted((project.root / "experiments").rglob("*")):
        digest.update(str(path).encode())
    return digest.hexdigest()


def refused(result, *phrases: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    for phrase in phrases:
        assert phrase in result.stderr, result.stderr


def test_no_gcloud_on_path(project, tmp_path, monkeypatch):
    key = key_file(tmp_path)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    before = state_of(project)
    result = tfcli(project.root, "gcloud", "link", "-r", PROJECT, "--key-file", str(key))
    refused(result, "'gcloud' is not installed (not found on PATH)", "Install the Google Cloud CLI")
    assert state_of(project) == before


def test_an_unlinked_project_says_how_to_link(project, cloud):
    before = state_of(project)
    for command in (["cluster", "create", "-n", "c1", "--yes"], ["gcloud", "show"], ["image", "build"]):
        result = tfcli(project.root, *command)
        refused(result, "this project is not linked to a Google Cloud project", "tfcli gcloud link -r")
    assert state_of(project) == before and cloud.calls() == []


def test_a_dry_run_of_an_unlinked_project_shows_the_cost_and_the_calls_with_placeholders(project, cloud):
    """The README says '--dry-run shows the cost and every gcloud and kubectl call': it said 'not linked' instead,
    before a user could see what a cluster would cost. Placeholders stand for the link's values, said as such."""
    before = state_of(project)
    result = tfcli(project.root, "cluster", "create", "-n", "c1", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "not linked to a Google Cloud project yet: the project 'your-project-id'" in result.stdout
    assert "$/h" in result.stdout and "Total" in result.stdout
    assert "would run: gcloud container clusters create c1 --project=your-project-id" in result.stdout
    assert result.stdout.rstrip().endswith("Dry run: nothing was changed.")
    assert state_of(project) == before and cloud.calls() == []
    refused(tfcli(project.root, "cluster", "create", "-n", "c1", "--yes"), "this project is not linked")
    built = tfcli(project.root, "image", "build", "--dry-run")  # its help's example, before linking too
    assert built.returncode == 0, built.stderr
    assert "would run: gcloud builds submit" in built.stdout and "--project=your-project-id" in built.stdout
    assert state_of(project) == before and cloud.calls() == []


def test_a_dry_run_refuses_an_own_cluster_whose_nodes_cannot_hold_the_runs_pods(project, cloud):
    """'start --dry-run' showed the creation of the spec's own cluster and "then the run would start on it" where the
    start itself refuses it (its n1-standard-1 nodes cannot hold a pod of the run): it refuses the same way."""
    made = tfcli(project.root, "experiment", "new", "-n", "gk", "-f", "cartpole_ppo", "--cluster", "small_cluster")
    assert made.returncode == 0, made.stderr
    before = state_of(project)
    result = tfcli(project.root, "experiment", "start", "-e", "gk", "--dry-run")
    refused(result, "a n1-standard-1 node of the cluster 'small-cluster'", "it would never be scheduled")
    assert "would run" not in result.stdout and state_of(project) == before and cloud.calls() == []


def test_a_gpu_type_without_gpus_is_refused_not_dropped(project, cloud):
    """'--gpu-type nvidia-l4' alone planned a cluster without GPUs and said nothing."""
    before = state_of(project)
    result = tfcli(project.root, "cluster", "create", "-n", "g4", "--gpu-type", "nvidia-l4", "--dry-run")
    refused(result, "--gpu-type nvidia-l4 without GPUs: the cluster would have none", "Give --gpus N too")
    assert result.stdout == "" and state_of(project) == before and cloud.calls() == []


def test_a_key_that_is_no_service_account_key(project, cloud, tmp_path):
    bad = tmp_path / "key.json"
    bad.write_text(json.dumps({"type": "authorized_user", "refresh_token": "tok-123"}))
    before = state_of(project)
    result = tfcli(project.root, "gcloud", "link", "-r", PROJECT, "--key-file", str(bad))
    refused(result, "gcloud.key_file", "not a service account key")
    assert "tok-123" not in result.stderr and state_of(project) == before and cloud.calls() == []
    other = key_file(tmp_path)
    result = tfcli(
        project.root,
        "gcloud",
        "link",
        "-r",
        PROJECT,
        "--key-file",
        str(other),
        "--service-account",
        "x@y.iam.gserviceaccount.com",
    )
    refused(result, "belongs to another service account")
    result = tfcli(project.root, "gcloud", "link", "-r", "Bad_Project", "--key-file", str(other))
    refused(result, "gcloud.project", '"Bad_Project"')
    assert state_of(project) == before and cloud.calls() == []


def test_names_kubernetes_refuses(linked, cloud):
    before = state_of(linked)
    result = tfcli(linked.root, "cluster", "create", "-n", "Bad.Name", "--yes")
    refused(result, "cluster.name")
    long_name = "a" * 40  # a valid experiment name, one too long for a RayJob
    assert (
        tfcli(linked.root, "experiment", "new", "-n", long_name, "-A", "ppo_cartpole", "-E", "cartpole").returncode == 0
    )
    assert (
        tfcli(linked.root, "cluster", "create", "-n", CLUSTER, "-m", "n1-standard-4", "-s", "1", "--yes").returncode
        == 0
    )
    calls = len(cloud.calls())
    before = state_of(linked)
    result = tfcli(linked.root, "experiment", "start", "-e", long_name, "-c", CLUSTER)
    refused(result, "experiment.name")
    assert state_of(linked) == before and cloud.calls()[calls:] == []


def test_gpus_unknown_or_not_in_the_zone(linked, cloud):
    before = state_of(linked)
    result = tfcli(
        linked.root, "cluster", "create", "-n", "g1", "--gpus", "1", "--gpu-type", "nvidia-tesla-v99", "--yes"
    )
    refused(result, "cluster.gpu_type", "nvidia-tesla-v99")
    assert cloud.calls()[1:] == [] or all(call[:3] != ["gcloud", "container", "clusters"] for call in cloud.calls())
    result = tfcli(
        linked.root, "cluster", "create", "-n", "g1", "--gpus", "1", "--gpu-type", "nvidia-tesla-k80", "--yes"
    )
    refused(result, "retired")
    result = tfcli(
        linked.root,
        "cluster",
        "create",
        "-n",
        "g1",
        "--zone",
        "europe-west1-b",
        "--gpus",
        "1",
        "--gpu-type",
        "nvidia-l4",
        "--yes",
    )
    refused(result, "the zone europe-west1-b does not offer nvidia-l4 GPUs", "It offers: nvidia-tesla-t4")
    assert not any(call[:4] == ["gcloud", "container", "clusters", "create"] for call in cloud.calls())
    assert state_of(linked) == before


def test_a_cluster_that_does_not_exist(linked, cloud):
    before = state_of(linked)
    refused(tfcli(linked.root, "cluster", "delete", "-c", "nope"), "no cluster named 'nope'")
    assert tfcli(linked.root, "experiment", "new", "-n", "e1", "-A", "ppo_cartpole", "-E", "cartpole").returncode == 0
    before = state_of(linked)
    refused(tfcli(linked.root, "experiment", "start", "-e", "e1", "-c", "nope"), "no cluster named 'nope'")
    assert state_of(linked) == before


@pytest.mark.parametrize(
    "said",
    [
        "code=403, message=Required 'container.clusters.create' permission",
        'code=403, message=Insufficient regional quota to satisfy request: resource "CPUS": request requires '
        "'12.0' and is short '4.0'",
        "code=400, message=Invalid machine type n1-standard-3 in zone us-central1-a",
    ],
)
def test_a_create_that_gcloud_refuses_shows_its_error_and_records_nothing(linked, cloud, said):
    # nothing was made: gcloud's error, with no word of a cluster "created but not set up" to delete
    cloud.fail(["gcloud", "container", "clusters", "create"], f"ERROR: (gcloud.container.clusters.create) {said}")
    before = state_of(linked)
    result = tfcli(linked.root, "cluster", "create", "-n", CLUSTER, "--yes")
    refused(result, f"cluster '{CLUSTER}' was not created: 'gcloud container clusters create ...' failed", said)
    assert "created but not set up" not in result.stderr and "cluster delete" not in result.stderr
    assert state_of(linked) == before and linked.store.clusters() == []


def test_a_create_whose_name_is_taken_leaves_the_other_cluster_alone(linked, cloud):
    # a cluster of that name exists in the project and zone, made outside this tfcli project: 409
    made = cluster_create_call(CLUSTER, ZONE, "e2-standard-4", 1, 100)
    assert subprocess.run(made, capture_output=True).returncode == 0
    result = tfcli(linked.root, "cluster", "create", "-n", CLUSTER, "--yes")
    refused(result, f"cluster '{CLUSTER}' was not created", "code=409", "exists already", "choose another name")
    assert "created but not set up" not in result.stderr and "cluster delete" not in result.stderr
    assert linked.store.clusters() == [] and len(cloud.state()["clusters"]) == 1


def test_a_setup_step_failing_after_the_cluster_exists_keeps_it_known_to_delete(linked, cloud):
    cloud.fail(
        ["gcloud", "container", "clusters", "get-credentials"],
        "ERROR: (gcloud.container.clusters.get-credentials) boom",
    )
    result = tfcli(linked.root, "cluster", "create", "-n", CLUSTER, "--yes")
    refused(result, f"cluster '{CLUSTER}' was created but not set up", f"tfcli cluster delete -c {CLUSTER}")
    assert linked.store.cluster(CLUSTER).status == "incomplete"
    assert tfcli(linked.root, "cluster", "delete", "-c", CLUSTER).returncode == 0
    assert linked.store.clusters() == [] and cloud.state().get("clusters", {}) in ({}, [])


def test_creating_asks_first_and_a_no_creates_nothing(linked, cloud, monkeypatch):
    monkeypatch.chdir(linked.root)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    spec = Cluster(name=CLUSTER, machine_type="n1-standard-4", num_nodes=1)
    questions = []
    with pytest.raises(ClientError, match="cancelled: nothing was created"):
        gke.create(linked, spec, ask=lambda question: questions.append(question) or "n", echo=lambda text: None)
    assert "an hour until it is deleted?" in questions[0] and linked.store.clusters() == []
    assert not any(call[:4] == ["gcloud", "container", "clusters", "create"] for call in cloud.calls())
    result = tfcli(linked.root, "cluster", "create", "-n", CLUSTER)  # no terminal, no --yes
    refused(result, "Not confirmed", "--yes")
    assert linked.store.clusters() == []


def test_dry_runs_print_the_calls_and_change_nothing(linked, cloud, tmp_path):
    calls = len(cloud.calls())
    before = state_of(linked)
    for command in (
        ["cluster", "create", "-n", CLUSTER, "--gpus", "1", "--gpu-type", "nvidia-l4", "--dry-run"],
        ["image", "build", "--source", str(Path(__file__).resolve().parents[2]), "--dry-run"],
        ["gcloud", "link", "-r", PROJECT, "--key-file", str(key_file(tmp_path)), "--dry-run"],
    ):
        result = tfcli(linked.root, *command)
        assert result.returncode == 0, result.stderr
        assert "would run: gcloud" in result.stdout and "Dry run: nothing was changed." in result.stdout
    assert cloud.calls()[calls:] == [] and state_of(linked) == before
    created = tfcli(linked.root, "cluster", "create", "-n", CLUSTER, "-s", "1", "--yes")
    assert created.returncode == 0, created.stderr
    calls, before = len(cloud.calls()), state_of(linked)
    deleted = tfcli(linked.root, "cluster", "delete", "-c", CLUSTER, "--dry-run")
    assert deleted.returncode == 0 and f"would run: gcloud container clusters delete {CLUSTER}" in deleted.stdout
    assert cloud.calls()[calls:] == [] and state_of(linked) == before


def test_cluster_list_shows_the_rest_when_gcloud_cannot_list(linked, cloud):
    cloud.fail(["gcloud", "container", "clusters", "list"], "ERROR: (gcloud.container.clusters.list) network is down")
    listed = tfcli(linked.root, "cluster", "list")
    assert listed.returncode == 0, listed.stderr
    assert "GKE clusters could not be listed" in listed.stdout and "network is down" in listed.stdout
    assert "Spec file" in listed.stdout  # the specs are still listed


def test_deleting_asks_where_the_cluster_was_made_and_forgets_it_only_when_the_cloud_says_it_is_gone(linked, cloud):
    created = tfcli(linked.root, "cluster", "create", "-n", CLUSTER, "-s", "1", "--yes")
    assert created.returncode == 0, created.stderr
    record = linked.store.cluster(CLUSTER)
    # a failure that names something else "not found" (gcloud's auth, a zone): the cluster may bill on, so it stays
    cloud.fail(["gcloud", "container", "clusters", "delete"], "ERROR: (gcloud.auth) credential not found", times=1)
    refused(tfcli(linked.root, "cluster", "delete", "-c", CLUSTER), "credential not found")
    assert linked.store.cluster(CLUSTER) is not None
    # the project linked to another zone since: the delete goes where the cluster was made
    linked.store.update_cluster(CLUSTER, runtime={**record.runtime, "zone": "us-east1-b"})
    calls = len(cloud.calls())
    tfcli(linked.root, "cluster", "delete", "-c", CLUSTER)
    deletes = [call for call in cloud.calls()[calls:] if call[:4] == ["gcloud", "container", "clusters", "delete"]]
    assert deletes == [
        ["gcloud", "container", "clusters", "delete", CLUSTER, f"--project={PROJECT}", "--zone=us-east1-b", "--quiet"]
    ]


def test_an_experiments_own_cluster_stays_while_others_run_on_it(linked, cloud):
    # ending "keeper" would delete the cluster made for it, and fail "guest", started there with -c, with it
    from torchforce.client.backends.gke import GkeBackend

    created = tfcli(linked.root, "cluster", "create", "-n", CLUSTER, "-s", "1", "--yes")
    assert created.returncode == 0, created.stderr
    store = linked.store
    store.update_cluster(CLUSTER, runtime={**store.cluster(CLUSTER).runtime, "owner": "keeper"})
    for name in ("keeper", "guest"):
        store.add_experiment(name, backend="gke", cluster=CLUSTER)
    # "guest" is starting there (its RayJob not yet made): a row that says running and was not written just now,
    # with nothing on the cluster, would be judged ended by the look that counts the cluster's runs
    assert store.update_experiment("guest", status="running", started_at=time.time())
    backend = GkeBackend(linked, CLUSTER)
    with pytest.warns(ClientWarning, match=f"the cluster '{CLUSTER}' made for experiment 'keeper' is kept: guest"):
        backend.release(None, linked.root / "experiments" / "keeper")
    assert store.cluster(CLUSTER) is not None and store.experiment("guest").status == "running"
    assert store.update_experiment("guest", status="stopped")
    backend.release(None, linked.root / "experiments" / "keeper")  # none left on it: it goes
    assert store.cluster(CLUSTER) is None


def test_an_experiments_own_cluster_goes_when_the_run_moves_off_it_or_the_experiment_is_deleted(linked, cloud):
    """Its end on the cluster deletes it; so do a start elsewhere (here, this machine) and the experiment's delete
    (after a cleanup at its end that failed), where it billed on, owned by a run that no longer used it."""
    from tests.client.gke_common import PPO

    store = linked.store
    for name in ("mover", "gone"):
        created = tfcli(linked.root, "cluster", "create", "-n", f"own-{name}", "-s", "1", "--yes")
        assert created.returncode == 0, created.stderr
        store.update_cluster(f"own-{name}", runtime={**store.cluster(f"own-{name}").runtime, "owner": name})
        made = tfcli(linked.root, "experiment", "new", "-n", name, *PPO, "-t", "200")
        assert made.returncode == 0, made.stderr
        assert store.update_experiment(name, status="stopped", backend="gke", cluster=f"own-{name}")
    started = tfcli(linked.root, "experiment", "start", "-e", "mover", "--fresh", "-c", "local")
    assert started.returncode == 0, started.stderr
    assert store.cluster("own-mover") is None and store.cluster("own-gone") is not None
    deleted = tfcli(linked.root, "experiment", "delete", "-e", "gone")
    assert deleted.returncode == 0, deleted.stderr
    assert store.cluster("own-gone") is None
    deletes = [call[4] for call in cloud.calls() if call[:4] == ["gcloud", "container", "clusters", "delete"]]
    assert deletes == ["own-mover", "own-gone"]


def test_a_create_that_fails_after_the_cloud_made_the_cluster_keeps_it_known_to_delete(linked, cloud):
    # gcloud exits non-zero though the cluster exists (its set-up timed out, a node stockout): it bills, so it stays
    made = cluster_create_call(CLUSTER, ZONE, "e2-standard-4", 1, 100)
    assert subprocess.run(made, capture_output=True).returncode == 0  # the cloud's side of the failed call
    cloud.fail(
        ["gcloud", "container", "clusters", "create"],
        "ERROR: (gcloud.container.clusters.create) Operation finished with error: Timed out waiting for cluster "
        "initialization",
    )
    result = tfcli(linked.root, "cluster", "create", "-n", CLUSTER, "--yes")
    refused(result, f"cluster '{CLUSTER}' was created but not set up: gcloud left it in state", "Timed out")
    assert linked.store.cluster(CLUSTER).status == "incomplete"
    assert tfcli(linked.root, "cluster", "delete", "-c", CLUSTER).returncode == 0
    assert linked.store.clusters() == [] and not cloud.state().get("clusters")


def test_a_bucket_read_that_fails_is_an_error_and_only_gclouds_not_found_is_not_there(linked, cloud):
    from torchforce.client.gcloud import Cloud, Link
    from torchforce.client.gcs import GcsStorage

    bucket = f"gs://{PROJECT}-tfcli"
    storage = GcsStorage(f"{bucket}/{linked.name}/exp/results", Cloud(Link.of(linked.settings)))
    storage.write_text("progress.json", '{"state": "finished"}')
    assert storage.read_text("progress.json") == '{"state": "finished"}' and storage.exists("progress.json")
    assert storage.read_text("checkpoints/latest.json") is None and not storage.exists("checkpoints/latest.json")
    elsewhere = GcsStorage("gs://no-such-bucket-tfcli/p/exp/results", storage.cloud)  # a bucket that is gone
    assert elsewhere.read_text("progress.json") is None and not elsewhere.exists("")
    for verb, said in (
        ("cat", "HTTPError 503: We encountered an internal error. Please try again."),
        ("ls", "HTTPError 403: tfcli@my-rl-project.iam.gserviceaccount.com does not have storage.objects.list access"),
        ("cat", "There was a problem refreshing your current auth tokens: Connection reset by peer"),
    ):
        cloud.fail(["gcloud", "storage", verb], f"ERROR: (gcloud.storage.{verb}) {said}", times=1)
        with pytest.raises(ClientError, match=re.escape(said)):
            if verb == "cat":
                storage.read_text("progress.json")
            else:
                storage.exists("checkpoints/latest.json")


def test_a_missing_auth_plugin_is_found_before_anything_is_created(linked, cloud, tmp_path, monkeypatch):
    # kubectl runs gke-gcloud-auth-plugin for a GKE context's credentials: without it, the cluster and its GPU pool
    # would be made and billed, and the first kubectl call would fail
    tools = tmp_path / "no-plugin"
    tools.mkdir()
    for tool in ("gcloud", "kubectl"):
        (tools / tool).symlink_to(cloud.bin_dir / tool)
    created = tfcli(linked.root, "cluster", "create", "-n", "running", "-s", "1", "--yes")
    assert created.returncode == 0, created.stderr
    new = tfcli(linked.root, "experiment", "new", "-n", "exp", "-A", "ppo_cartpole", "-E", "cartpole")
    assert new.returncode == 0, new.stderr
    monkeypatch.setenv("PATH", str(tools))
    calls = len(cloud.calls())
    before = state_of(linked)
    hint = "gcloud components install gke-gcloud-auth-plugin"
    for command in (
        ["cluster", "create", "-n", CLUSTER, "--yes"],
        ["experiment", "start", "-e", "exp", "-c", "running"],
        ["gcloud", "link", "-r", PROJECT, "--key-file", str(key_file(tmp_path)), "--zone", ZONE],
    ):
        result = tfcli(linked.root, *command)
        refused(result, "'gke-gcloud-auth-plugin' is not installed (not found on PATH)", hint)
    assert cloud.calls()[calls:] == [] and state_of(linked) == before


def test_a_monitor_is_refused_on_gke_before_anything_is_made(linked, cloud):
    """On GKE the results folder is the bucket mounted in the pods: a monitor there rewrote the bucket's object at
    every episode's end (Cloud Storage takes about one write of an object a second), from every pod."""
    created = tfcli(linked.root, "cluster", "create", "-n", CLUSTER, "-s", "1", "--yes")
    assert created.returncode == 0, created.stderr
    made = tfcli(linked.root, "experiment", "new", "-n", "e1", "-A", "ppo_cartpole", "-E", "cartpole")
    assert made.returncode == 0, made.stderr
    spec_file = linked.root / "experiments" / "e1" / "experiment.json"
    spec = json.loads(spec_file.read_text())
    spec_file.write_text(json.dumps({**spec, "environment": {**spec["environment"], "monitor": "games"}}))
    before, calls = state_of(linked), len(cloud.calls())
    refused(
        tfcli(linked.root, "experiment", "start", "-e", "e1", "-c", CLUSTER),
        "experiment.environment.monitor: a monitor cannot record on GKE",
        "Leave it out: the run's results/episodes.jsonl has every episode",
    )
    assert state_of(linked) == before and cloud.calls()[calls:] == []


def test_a_start_that_loses_the_race_to_make_the_shared_cluster_leaves_the_winner_s_run_alone(linked, cloud):
    """Two runs whose spec names one GKE cluster, started at once, both see no cluster and create it: the loser's
    create fails ("exists already"), and it took the winner's cluster for its own and deleted it (force) as its
    start failed, marking the winner's run failed."""
    from tests.client.gke_common import PPO
    from torchforce.client import Experiment

    (linked.root / "configs" / "clusters" / "shared.json").write_text(
        json.dumps({"name": "shared", "num_nodes": 1, "machine_type": "e2-standard-4"})
    )
    for name in ("g-s0", "g-s1"):
        made = tfcli(linked.root, "experiment", "new", "-n", name, *PPO, "-t", "200", "--cluster", "shared")
        assert made.returncode == 0, made.stderr
    loser = Experiment.load(linked, "g-s1")
    real_create = gke.create

    def winner_first(project, spec, **options):  # the other start's create lands between the check and this one
        real_create(project, spec, yes=True, owner="g-s0")
        return real_create(project, spec, **options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gke, "create", winner_first)
        with pytest.raises(ClientError, match="cluster 'shared' exists already"):
            loser.start(yes=True)
    record = linked.store.cluster("shared")
    assert record is not None and record.runtime.get("owner") == "g-s0"
    assert not [call for call in cloud.calls() if call[:4] == ["gcloud", "container", "clusters", "delete"]]


def test_a_rayjob_name_from_a_changed_record_never_reaches_kubectl(linked, cloud):
    """gke/rayjob.json (and the store's job column) name the run's RayJob, and kubectl took whatever they said:
    '--all' there made a resume's status look and cleanup 'kubectl get rayjob --all' and 'kubectl delete rayjob
    --all --ignore-not-found', which deletes every RayJob in the namespace."""
    from torchforce.client.backends.gke import GkeBackend

    created = tfcli(linked.root, "cluster", "create", "-n", CLUSTER, "-s", "1", "--yes")
    assert created.returncode == 0, created.stderr
    folder = linked.root / "experiments" / "planted"
    (folder / "gke").mkdir(parents=True)
    (folder / "gke" / "rayjob.json").write_text(json.dumps({"name": "--all", "cluster": CLUSTER}))
    backend = GkeBackend(linked, CLUSTER)
    calls = len(cloud.calls())
    assert backend.previous_job(folder) is None  # not a name tfcli gives: no earlier RayJob of this run
    with pytest.raises(ClientError, match="'--all' is not the name of a RayJob that tfcli started"):
        backend.kubectl("delete", "rayjob", "--all", "--ignore-not-found")
    assert backend.status("--all") == "unknown" and backend.alive("--all")  # judged neither gone nor ended
    backend.retire("--all", folder)
    backend.release("--all", folder, keep_own_cluster=True)
    assert cloud.calls()[calls:] == []
    # names of the right form, but not this run's (another's RayJob, another experiment's): no call either
    for other in ("prod-trainer", "default", "tf-other-0a1b", "tf-planted-xyz1"):
        (folder / "gke" / "rayjob.json").write_text(json.dumps({"name": other, "cluster": CLUSTER}))
        assert backend.previous_job(folder) is None
        backend.retire(other, folder)
        backend.release(other, folder, keep_own_cluster=True)
    assert cloud.calls()[calls:] == []
    (folder / "gke" / "rayjob.json").write_text(json.dumps({"name": "tf-planted-0a1b", "cluster": CLUSTER}))
    assert backend.previous_job(folder) == "tf-planted-0a1b"
