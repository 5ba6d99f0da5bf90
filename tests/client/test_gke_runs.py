"""GKE runs beyond the journey, against the fake cloud: a lost pod resumes from the checkpoint (backoffLimit), the
experiment's own cluster is created on start and deleted when it ends, a run whose pods fit no node is refused,
``start --dry-run`` shows the calls and the RayJob, ``logs --follow`` streams, a RayJob that KubeRay refuses
ends the experiment as failed with KubeRay's reason, ``start --fresh`` of a paused run deletes its suspended RayJob
first, a run moved to another GKE cluster resumes from its results in the bucket, and a run keeps its bucket when
the project is linked to another."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys

import pytest
import yaml

from tests.client.conftest import tfcli, wait_for
from tests.client.gke_common import CLUSTER, CONTEXT, PPO, PROJECT, ZONE, assert_own_config, kubectl
from tests.fakecloud import FakeCloud
from torchforce import __version__
from torchforce.client import Experiment, Project

pytestmark = pytest.mark.slow
IMAGE = f"us-central1-docker.pkg.dev/{PROJECT}/tfcli/torchforce:{__version__}"


@pytest.fixture
def ready(linked: Project, cloud: FakeCloud) -> Project:
    """A linked project with the workers' image built and a 2-node n1-standard-4 cluster."""
    cloud.add_image(IMAGE)
    created = tfcli(linked.root, "cluster", "create", "-n", CLUSTER, "-m", "n1-standard-4", "-s", "2", "--yes")
    assert created.returncode == 0, created.stderr
    return linked


def new(project: Project, name: str, *flags: str) -> Experiment:
    created = tfcli(project.root, "experiment", "new", "-n", name, *PPO, *flags)
    assert created.returncode == 0, created.stderr
    return Experiment.load(project, name)


def on_own_cluster(linked: Project, cloud, name: str, *flags: str) -> Experiment:
    """The experiment ``name`` (PPO on CartPole, ``flags``) started on its own cluster 'mine', made for it."""
    cloud.add_image(IMAGE)
    spec = linked.root / "configs" / "clusters" / "mine.json"
    spec.write_text(json.dumps({"name": "mine", "num_nodes": 1, "machine_type": "e2-standard-4"}))
    experiment = new(linked, name, *flags, "--cluster", "mine")
    started = tfcli(linked.root, "experiment", "start", "-e", name, "--yes")
    assert started.returncode == 0, started.stderr
    return experiment


def test_a_lost_pod_is_run_again_and_resumes_from_the_checkpoint(ready, cloud):
    experiment = new(ready, "lossy", "-t", "6000")
    started = tfcli(ready.root, "experiment", "start", "-e", "lossy", "-c", CLUSTER, "--max-restarts", "1")
    assert started.returncode == 0, started.stderr
    job = experiment.record().job
    manifest = yaml.safe_load((ready.root / "experiments" / "lossy" / "gke" / f"{job}.yaml").read_text())
    assert manifest["spec"]["backoffLimit"] == 1
    wait_for(lambda: experiment.checkpoint_timesteps() > 0, 120, 0.5, "a checkpoint")
    at_loss = experiment.checkpoint_timesteps()
    os.kill(experiment.progress()["pid"], signal.SIGKILL)  # the pod is lost with its worker
    record = wait_for(lambda: (r := experiment.record()).status != "running" and r, 240, 1.0, "the run to end")
    assert record.status == "finished", record.message
    assert cloud.state()  # the fake kept its books
    log = experiment.logs() + (experiment.storage().read_text("worker.log") or "")
    assert f"resuming from the checkpoint at timestep {at_loss}" in log or "resumed from checkpoint" in log
    assert experiment.progress()["timesteps"] >= 6000


def test_the_experiments_own_cluster_is_created_on_start_and_deleted_when_it_ends(linked, cloud):
    cloud.add_image(IMAGE)
    spec = linked.root / "configs" / "clusters" / "own.json"
    spec.write_text(json.dumps({"name": "own-cluster", "num_nodes": 1, "machine_type": "e2-standard-4"}))
    experiment = new(linked, "owner", "-t", "300", "--cluster", "own")
    refused = tfcli(linked.root, "experiment", "start", "-e", "owner")  # no terminal to confirm at
    assert refused.returncode == 2 and "Not confirmed" in refused.stderr and "--yes" in refused.stderr
    assert linked.store.clusters() == [] and experiment.record().status == "new"
    started = tfcli(linked.root, "experiment", "start", "-e", "owner", "--yes")
    assert started.returncode == 0, started.stderr
    assert "runs on its own GKE cluster 'own-cluster', created now and deleted when it ends" in started.stdout
    assert "e2-standard-4" in started.stdout and "$" in started.stdout
    record = linked.store.cluster("own-cluster")
    assert record.runtime["owner"] == "owner" and experiment.record().cluster == "own-cluster"
    done = wait_for(lambda: (r := experiment.record()).status != "running" and r, 240, 1.0, "the run to end")
    assert done.status == "finished", done.message
    assert linked.store.cluster("own-cluster") is None
    deletes = [call for call in cloud.calls() if call[:4] == ["gcloud", "container", "clusters", "delete"]]
    assert deletes == [
        ["gcloud", "container", "clusters", "delete", "own-cluster", f"--project={PROJECT}", "--zone=us-central1-a"]
        + ["--quiet"]
    ]


def test_a_run_whose_pods_fit_no_node_is_refused(linked, cloud):
    cloud.add_image(IMAGE)
    created = tfcli(linked.root, "cluster", "create", "-n", "tiny", "-m", "n1-standard-1", "-s", "1", "--yes")
    assert created.returncode == 0, created.stderr
    experiment = new(linked, "big", "--run-mode", "multi-threaded", "--num-workers", "2", "-N", "1", "-t", "300")
    calls = len(cloud.calls())
    result = tfcli(linked.root, "experiment", "start", "-e", "big", "-c", "tiny")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "a pod of this run needs 2.25 CPUs and 4.25 GiB" in result.stderr and "n1-standard-1 node" in result.stderr
    assert experiment.record().status == "new"
    assert not any(
        call[:2] == ["kubectl", "--context=gke_my-rl-project_us-central1-a_tiny"] for call in cloud.calls()[calls:]
    )


def test_start_dry_run_shows_the_calls_and_the_rayjob_and_changes_nothing(ready, cloud):
    experiment = new(ready, "preview", "-t", "300")
    calls = len(cloud.calls())
    shown = tfcli(ready.root, "experiment", "start", "-e", "preview", "-c", CLUSTER, "--dry-run")
    assert shown.returncode == 0, shown.stderr
    assert cloud.calls()[calls:] == []
    assert experiment.record().status == "new" and not (ready.root / "experiments" / "preview" / "gke").exists()
    assert (
        f"would run: kubectl --context={CONTEXT} --namespace=default apply -f {ready.root}/experiments/preview/gke/"
        "tf-preview-" in shown.stdout
    )
    assert "kind: RayJob" in shown.stdout and "Dry run: nothing was changed." in shown.stdout
    assert "would run: gcloud storage cp" in shown.stdout


def test_logs_follow_streams_the_rayjob_log_until_it_ends(ready, cloud):
    experiment = new(ready, "chatty", "-t", "1500")
    assert tfcli(ready.root, "experiment", "start", "-e", "chatty", "-c", CLUSTER).returncode == 0
    followed = tfcli(ready.root, "experiment", "logs", "-e", "chatty", "--follow", timeout=240)
    assert followed.returncode == 0, followed.stderr
    assert "experiment chatty finished" in followed.stdout
    job = experiment.record().job
    follow = kubectl(CONTEXT, "logs", f"job/{job}", "--follow")
    assert_own_config([record for record in cloud.call_records() if record["argv"] == follow])  # as every call


def test_a_rayjob_kuberay_refuses_fails_the_experiment_with_its_reason(ready, cloud):
    experiment = new(ready, "refused", "-t", "300000")
    started = tfcli(ready.root, "experiment", "start", "-e", "refused", "-c", CLUSTER)
    assert started.returncode == 0, started.stderr
    # the same RayJob changed behind tfcli's back into one KubeRay's validation refuses (suspend needs
    # shutdownAfterJobFinishes), as an edit with kubectl would
    (file,) = (ready.root / "experiments" / "refused" / "gke").glob("*.yaml")
    document = yaml.safe_load(file.read_text())
    document["spec"].update(shutdownAfterJobFinishes=False, suspend=True)
    edited = file.with_name("edited.yaml")
    edited.write_text(yaml.safe_dump(document))
    subprocess.run(["kubectl", f"--context={CONTEXT}", "apply", "-f", str(edited)], check=True, capture_output=True)
    record = wait_for(lambda: (r := experiment.record()).status != "running" and r, 60, 0.5, "the refusal")
    assert record.status == "failed" and "ended ValidationFailed" in record.message


def test_an_own_cluster_too_small_for_the_run_is_never_created(linked, cloud):
    cloud.add_image(IMAGE)
    spec = linked.root / "configs" / "clusters" / "small.json"
    spec.write_text(json.dumps({"name": "small-one", "num_nodes": 3, "machine_type": "n1-standard-1"}))
    experiment = new(linked, "squeezed", "-t", "300", "--cluster", "small")
    result = tfcli(linked.root, "experiment", "start", "-e", "squeezed", "--yes")
    assert result.returncode == 2 and "it would never be scheduled" in result.stderr
    assert not any(call[:4] == ["gcloud", "container", "clusters", "create"] for call in cloud.calls())
    assert linked.store.clusters() == [] and experiment.record().status == "new"
    # a larger machine, but a run of 8 torch threads asks its pod for 8 CPUs: more than an e2-standard-4 node has
    spec.write_text(json.dumps({"name": "small-one", "num_nodes": 3, "machine_type": "e2-standard-4"}))
    threaded = new(linked, "threaded", "-t", "300", "--cluster", "small", "--torch-threads", "8")
    result = tfcli(linked.root, "experiment", "start", "-e", "threaded", "--yes")
    assert result.returncode == 2 and "a pod of this run needs 8.25 CPUs" in result.stderr, result.stderr
    assert "fewer torch threads (--torch-threads)" in result.stderr
    assert not any(call[:4] == ["gcloud", "container", "clusters", "create"] for call in cloud.calls())
    assert linked.store.clusters() == [] and threaded.record().status == "new"


def test_stopping_a_run_on_its_own_cluster_downloads_its_results_and_deletes_the_cluster(linked, cloud):
    experiment = on_own_cluster(linked, cloud, "keeper", "-t", "400000")
    wait_for(lambda: experiment.progress().get("timesteps", 0) >= 1000, 120, 0.5, "progress")
    stopped = tfcli(linked.root, "experiment", "stop", "-e", "keeper", timeout=180)
    assert stopped.returncode == 0, stopped.stderr
    assert experiment.record().status == "stopped" and linked.store.cluster("mine") is None
    results = linked.root / "experiments" / "keeper" / "results"
    assert json.loads((results / "checkpoints" / "latest.json").read_text())["timesteps"] >= 1000
    assert (results / "episodes.jsonl").stat().st_size > 0
    again = tfcli(linked.root, "experiment", "download", "-e", "keeper")  # the bucket outlives the cluster
    assert again.returncode == 0, again.stderr


def test_a_resume_after_its_own_cluster_was_released_creates_it_again_and_resumes_from_the_bucket(
    linked, cloud, tmp_path
):
    """The stop of a run on its own cluster deletes the cluster; 'start --resume' without -c then failed with
    "no cluster named ..." (exit 2). It creates the cluster again as the first start did (the same call, in the
    zone it was made in though the link has moved to another since) and resumes there from the bucket."""
    experiment = on_own_cluster(linked, cloud, "keeper", "-t", "400000")
    (first,) = [call for call in cloud.calls() if call[:4] == ["gcloud", "container", "clusters", "create"]]
    assert f"--zone={ZONE}" in first
    wait_for(lambda: experiment.progress().get("timesteps", 0) >= 1000, 120, 0.5, "progress")
    stopped = tfcli(linked.root, "experiment", "stop", "-e", "keeper", "--no-download", timeout=180)
    assert stopped.returncode == 0, stopped.stderr
    assert experiment.record().status == "stopped" and linked.store.cluster("mine") is None
    at_stop = experiment.checkpoint_timesteps()
    key = str(tmp_path / "tfcli-key.json")
    relinked = tfcli(linked.root, "gcloud", "link", "-r", PROJECT, "--key-file", key, "--zone", "us-east1-b")
    assert relinked.returncode == 0, relinked.stderr
    cloud.add_image(IMAGE.replace("us-central1", "us-east1"))  # the link's image is in its region's registry

    calls = len(cloud.calls())
    shown = tfcli(linked.root, "experiment", "start", "-e", "keeper", "--resume", "--dry-run")
    assert shown.returncode == 0, shown.stderr
    assert f"would run: {shlex.join(first)}" in shown.stdout
    assert (
        "then the run would resume on it, as 'tfcli experiment start -e keeper -c mine --resume' does" in shown.stdout
    )
    assert all(call[:3] == ["gcloud", "storage", "cat"] for call in cloud.calls()[calls:])  # reads, nothing made
    assert linked.store.cluster("mine") is None
    calls = len(cloud.calls())
    resumed = tfcli(linked.root, "experiment", "start", "-e", "keeper", "--resume", "--yes")
    assert resumed.returncode == 0, resumed.stderr
    assert (
        "resumes on its own GKE cluster 'mine', which was deleted when its run ended: created again" in resumed.stdout
    )
    since = cloud.calls()[calls:]
    assert [call for call in since if call[:4] == ["gcloud", "container", "clusters", "create"]] == [first]
    record = linked.store.cluster("mine")
    assert (record.runtime["owner"], record.runtime["zone"]) == ("keeper", ZONE)
    job = experiment.record().job
    manifest = linked.root / "experiments" / "keeper" / "gke" / f"{job}.yaml"
    assert kubectl(CONTEXT.replace(CLUSTER, "mine"), "apply", "-f", str(manifest)) in since
    assert "--resume-if-any" in yaml.safe_load(manifest.read_text())["spec"]["entrypoint"]
    results = f"gs://{PROJECT}-tfcli/{linked.name}/keeper/results"
    assert ["gcloud", "storage", "rm", "--recursive", results] not in since  # the results stay: it goes on

    def resumed_log() -> str | None:
        log = experiment.logs()
        return log if "resuming from the checkpoint at" in log else None

    assert f"resuming from the checkpoint at timestep {at_stop}\n" in wait_for(resumed_log, 120, 0.5, "the resume")
    assert (experiment.record().status, experiment.record().cluster) == ("running", "mine")


def ended_unseen(experiment: Experiment) -> bool:
    """Whether the run's RayJob has finished, asked of kubectl itself (the fake operator moves as kubectl touches
    the job), not through tfcli, which would see it end and clean up after it."""
    job = experiment.project.store.experiment(experiment.name).job
    call = kubectl(CONTEXT.replace(CLUSTER, "mine"), "get", "rayjob", job, "-o", "json")
    shown = subprocess.run(call, capture_output=True, text=True)
    return shown.returncode == 0 and json.loads(shown.stdout)["status"].get("jobStatus") == "SUCCEEDED"


def test_a_resume_right_after_the_run_ended_keeps_its_own_cluster_for_it(linked, cloud):
    """A run on its own cluster that ended while no command looked: 'start --resume' first saw it end, deleted the
    cluster (minutes), then made it again for the resume (minutes more). The resume keeps it and runs there."""
    experiment = on_own_cluster(linked, cloud, "quick", "-t", "300")
    wait_for(lambda: ended_unseen(experiment), 120, 0.5, "the run's end")  # no tfcli command looks meanwhile
    calls = len(cloud.calls())
    resumed = tfcli(linked.root, "experiment", "start", "-e", "quick", "--resume", "-t", "600", "--yes")
    assert resumed.returncode == 0, resumed.stderr
    since = cloud.calls()[calls:]
    assert [call[3] for call in since if call[:3] == ["gcloud", "container", "clusters"]] == []  # neither made nor gone
    assert (experiment.record().status, experiment.record().cluster) == ("running", "mine")
    assert linked.store.cluster("mine").runtime["owner"] == "quick"
    wait_for(lambda: experiment.record().status != "running", 120, 0.5, "the resumed run's end")
    assert experiment.record().status == "finished" and experiment.progress()["timesteps"] >= 600
    assert linked.store.cluster("mine") is None  # its end releases it, as before


def test_a_refused_resume_right_after_the_run_ended_still_releases_its_own_cluster(linked, cloud):
    experiment = on_own_cluster(linked, cloud, "quick", "-t", "300")
    wait_for(lambda: ended_unseen(experiment), 120, 0.5, "the run's end")
    refused = tfcli(linked.root, "experiment", "start", "-e", "quick", "--resume")  # finished: nothing to resume
    assert refused.returncode == 2 and "has finished; there is nothing to resume" in refused.stderr
    assert linked.store.cluster("mine") is None  # the run ended, and no start took its cluster


def test_a_cluster_whose_run_ended_unseen_is_deleted_without_force_and_the_run_stays_finished(linked, cloud):
    """'cluster delete' reads the run's status from its RayJob and results first, as 'experiment list' does: a run
    that has finished does not hold the cluster, and is not marked failed with it."""
    experiment = on_own_cluster(linked, cloud, "quick", "-t", "300")
    wait_for(lambda: ended_unseen(experiment), 120, 0.5, "the run's end")
    assert linked.store.experiment("quick").status == "running"  # nothing has looked since
    calls = len(cloud.calls())
    deleted = tfcli(linked.root, "cluster", "delete", "-c", "mine")
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.strip() == "Deleted the GKE cluster 'mine'" and linked.store.cluster("mine") is None
    since = cloud.calls()[calls:]
    assert [call[3] for call in since if call[:3] == ["gcloud", "container", "clusters"]] == ["delete"]  # once
    record = linked.store.experiment("quick")
    assert (record.status, record.message) == ("finished", None) and experiment.progress()["timesteps"] >= 300


def test_deleting_a_paused_run_removes_its_suspended_rayjob(ready, cloud):
    experiment = new(ready, "shelved", "-t", "400000")
    assert tfcli(ready.root, "experiment", "start", "-e", "shelved", "-c", CLUSTER).returncode == 0
    job = experiment.record().job
    wait_for(lambda: experiment.progress().get("timesteps", 0) >= 500, 120, 0.5, "progress")
    assert tfcli(ready.root, "experiment", "pause", "-e", "shelved", timeout=180).returncode == 0
    assert experiment.record().status == "paused"
    deleted = tfcli(ready.root, "experiment", "delete", "-e", "shelved")
    assert deleted.returncode == 0, deleted.stderr
    assert kubectl(CONTEXT, "delete", "rayjob", job, "--ignore-not-found") in cloud.calls()
    gone = subprocess.run(["kubectl", f"--context={CONTEXT}", "get", "rayjob", job, "-o", "json"], capture_output=True)
    assert gone.returncode == 1 and b"NotFound" in gone.stderr


def rayjobs(context: str) -> list[str]:
    """The names of the RayJobs on the cluster of ``context``, as kubectl lists them."""
    listed = subprocess.run(["kubectl", f"--context={context}", "get", "rayjob", "-o", "json"], capture_output=True)
    assert listed.returncode == 0, listed.stderr
    return [item["metadata"]["name"] for item in json.loads(listed.stdout)["items"]]


def pause(project: Project, experiment: Experiment, at_least: int) -> int:
    """Pause the running ``experiment`` once it has made ``at_least`` timesteps; the checkpoint's timesteps."""
    wait_for(lambda: experiment.progress().get("timesteps", 0) >= at_least, 120, 0.5, "progress")
    paused = tfcli(project.root, "experiment", "pause", "-e", experiment.name, timeout=180)
    assert paused.returncode == 0, paused.stderr
    assert experiment.record().status == "paused" and experiment.checkpoint_timesteps() > 0
    return experiment.checkpoint_timesteps()


def test_a_paused_run_started_afresh_leaves_no_suspended_rayjob_behind(ready, cloud):
    experiment = new(ready, "redo", "-t", "400000")
    assert tfcli(ready.root, "experiment", "start", "-e", "redo", "-c", CLUSTER).returncode == 0
    old = experiment.record().job
    pause(ready, experiment, 500)
    assert rayjobs(CONTEXT) == [old]  # suspended: no pods, still listed
    calls = len(cloud.calls())
    started = tfcli(ready.root, "experiment", "start", "-e", "redo", "-c", CLUSTER, "--fresh")
    assert started.returncode == 0, started.stderr
    job = experiment.record().job
    since = cloud.calls()[calls:]
    delete = kubectl(CONTEXT, "delete", "rayjob", old, "--ignore-not-found")
    manifest = ready.root / "experiments" / "redo" / "gke" / f"{job}.yaml"
    discard = ["gcloud", "storage", "rm", "--recursive", f"gs://{PROJECT}-tfcli/{ready.name}/redo/results"]
    assert job != old and rayjobs(CONTEXT) == [job]  # the new run's RayJob is the only one left
    assert delete in since, since
    assert since.index(delete) < since.index(discard) < since.index(kubectl(CONTEXT, "apply", "-f", str(manifest)))
    assert json.loads((ready.root / "experiments" / "redo" / "gke" / "rayjob.json").read_text())["name"] == job
    # paused again, and the API server does not answer the delete: the start is refused before it discards or
    # makes anything, and the experiment still names its RayJob, so that a later start, stop or delete removes it
    at_pause = pause(ready, experiment, 300)
    delete = kubectl(CONTEXT, "delete", "rayjob", job, "--ignore-not-found")
    cloud.fail(delete, "Unable to connect to the server: dial tcp 10.0.0.2:443: i/o timeout", times=1)
    calls = len(cloud.calls())
    refused = tfcli(ready.root, "experiment", "start", "-e", "redo", "-c", CLUSTER, "--fresh")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    said = f"the RayJob {job} of experiment 'redo' on the GKE cluster '{CLUSTER}' could not be deleted"
    assert said in refused.stderr and "i/o timeout" in refused.stderr and "nothing was changed" in refused.stderr
    since = cloud.calls()[calls:]
    assert delete in since and not any(call[:3] == ["gcloud", "storage", "rm"] or "apply" in call for call in since)
    record = experiment.record()
    assert (record.status, record.job) == ("paused", job) and experiment.checkpoint_timesteps() == at_pause
    assert rayjobs(CONTEXT) == [job]
    stopped = tfcli(ready.root, "experiment", "stop", "-e", "redo", "--no-download")  # and it goes with the stop
    assert stopped.returncode == 0, stopped.stderr
    assert rayjobs(CONTEXT) == []
    # a run that ended had its RayJob deleted as it ended: a cluster that does not answer now only warns, and the
    # new run starts (moving a failed run off a broken cluster must not be refused for a RayJob that went)
    assert experiment.record().job == job
    cloud.fail(delete, "Unable to connect to the server: dial tcp 10.0.0.2:443: i/o timeout", times=1)
    calls = len(cloud.calls())
    again = tfcli(ready.root, "experiment", "start", "-e", "redo", "-c", CLUSTER, "--fresh")
    assert again.returncode == 0, again.stderr
    assert f"warning: the RayJob {job} of experiment 'redo', which ended, could not be deleted" in again.stderr
    assert "i/o timeout" in again.stderr and "Traceback" not in again.stderr
    assert delete in cloud.calls()[calls:]
    record = experiment.record()
    assert record.status == "running" and record.job not in (None, job) and rayjobs(CONTEXT) == [record.job]


def test_a_run_moved_to_another_gke_cluster_resumes_from_its_results_in_the_bucket(ready, cloud):
    other, other_context = "gke-other", CONTEXT.replace(CLUSTER, "gke-other")
    made = tfcli(ready.root, "cluster", "create", "-n", other, "-m", "n1-standard-4", "-s", "2", "--yes")
    assert made.returncode == 0, made.stderr
    experiment = new(ready, "mover", "-t", "400000")
    assert tfcli(ready.root, "experiment", "start", "-e", "mover", "-c", CLUSTER).returncode == 0
    first = pause(ready, experiment, 500)
    assert tfcli(ready.root, "experiment", "download", "-e", "mover").returncode == 0  # a look at it, here
    assert tfcli(ready.root, "experiment", "start", "-e", "mover", "--resume").returncode == 0
    latest = pause(ready, experiment, first + 500)
    old = experiment.record().job
    results = f"gs://{PROJECT}-tfcli/{ready.name}/mover/results"
    bucket = cloud.bucket_dir(f"{PROJECT}-tfcli") / ready.name / "mover" / "results"
    episodes = (bucket / "episodes.jsonl").read_text()
    here = json.loads((ready.root / "experiments" / "mover" / "results" / "checkpoints" / "latest.json").read_text())
    assert here["timesteps"] == first < latest  # the copy here is older than the bucket's results
    # the bucket cannot be read from here just now (a network blip): what is in it must not be replaced by the
    # older copy here
    cloud.fail(["gcloud", "storage", "rsync", results], "ERROR: (gcloud.storage.rsync) HTTPError 503: unavailable")
    # to this machine, the results must come home first: refused, nothing changed
    calls = len(cloud.calls())
    refused = tfcli(ready.root, "experiment", "start", "-e", "mover", "--resume", "-c", "local")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert f"experiment 'mover' ran on the GKE cluster '{CLUSTER}'" in refused.stderr, refused.stderr
    assert "HTTPError 503" in refused.stderr and "nothing was changed" in refused.stderr
    record = experiment.record()
    assert (record.status, record.backend, record.cluster, record.job) == ("paused", "gke", CLUSTER, old)
    assert rayjobs(CONTEXT) == [old] and experiment.checkpoint_timesteps() == latest
    assert not any(call[:3] == ["gcloud", "storage", "rm"] for call in cloud.calls()[calls:])
    # to another GKE cluster, the results stay where they are: its pods mount the same folder of the bucket
    calls = len(cloud.calls())
    moved = tfcli(ready.root, "experiment", "start", "-e", "mover", "--resume", "-c", other)
    assert moved.returncode == 0, moved.stderr
    job = experiment.record().job

    def resumed() -> str | None:  # the log of the new RayJob's driver (the bucket's worker.log has every run's)
        log = experiment.logs()
        return log if "resuming from the checkpoint at" in log else None

    assert f"resuming from the checkpoint at timestep {latest}\n" in wait_for(resumed, 120, 0.5, "the resume")
    assert (bucket / "episodes.jsonl").read_text().startswith(episodes)
    assert (experiment.record().cluster, rayjobs(CONTEXT), rayjobs(other_context)) == (other, [], [job])
    since = cloud.calls()[calls:]
    assert kubectl(CONTEXT, "delete", "rayjob", old, "--ignore-not-found") in since
    assert not any(call[:3] == ["gcloud", "storage", "rsync"] for call in since), since
    assert ["gcloud", "storage", "rm", "--recursive", results] not in since


def test_a_run_keeps_its_bucket_when_the_project_is_linked_to_another(ready, cloud, tmp_path):
    # the link moves to another bucket while a run is paused: its checkpoint and results stay in the bucket it began
    # in, where its download, its resume (on its cluster: the RayJob unsuspended; on another: a new RayJob), its
    # pause and its logs go on finding them
    other, old, elsewhere = "gke-other", f"{PROJECT}-tfcli", "my-rl-project-elsewhere"
    made = tfcli(ready.root, "cluster", "create", "-n", other, "-m", "n1-standard-4", "-s", "2", "--yes")
    assert made.returncode == 0, made.stderr
    experiment = new(ready, "keeper", "-t", "400000")
    assert tfcli(ready.root, "experiment", "start", "-e", "keeper", "-c", CLUSTER).returncode == 0
    first = pause(ready, experiment, 300)
    key = str(tmp_path / "tfcli-key.json")
    relinked = tfcli(
        ready.root, "gcloud", "link", "-r", PROJECT, "--key-file", key, "--zone", ZONE, "--bucket", f"gs://{elsewhere}"
    )
    assert relinked.returncode == 0, relinked.stderr
    assert (
        f"1 experiment that ran on GKE (keeper) keeps its results and checkpoints in gs://{old}, where tfcli reads "
        f"and resumes it; a --fresh start moves it to gs://{elsewhere}" in relinked.stdout
    )
    assert cloud.bucket_dir(elsewhere).is_dir()
    assert experiment.checkpoint_timesteps() == first and experiment.progress()["timesteps"] >= first
    assert tfcli(ready.root, "experiment", "download", "-e", "keeper").returncode == 0
    here = ready.root / "experiments" / "keeper" / "results" / "checkpoints" / "latest.json"
    assert json.loads(here.read_text())["timesteps"] == first
    resumed = tfcli(ready.root, "experiment", "start", "-e", "keeper", "--resume")  # its suspended RayJob, on again
    assert resumed.returncode == 0, resumed.stderr
    second = pause(ready, experiment, first + 300)
    assert second > first
    moved = tfcli(ready.root, "experiment", "start", "-e", "keeper", "--resume", "-c", other)
    assert moved.returncode == 0, moved.stderr
    job = experiment.record().job
    manifest = yaml.safe_load((ready.root / "experiments" / "keeper" / "gke" / f"{job}.yaml").read_text())
    head = manifest["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    assert [volume["csi"]["volumeAttributes"]["bucketName"] for volume in head["volumes"] if "csi" in volume] == [old]

    def log_of_the_resume() -> str | None:
        log = experiment.logs()
        return log if "resuming from the checkpoint at" in log else None

    assert f"resuming from the checkpoint at timestep {second}\n" in wait_for(log_of_the_resume, 120, 0.5, "it")
    assert not (cloud.bucket_dir(elsewhere) / ready.name).exists()
    stopped = tfcli(ready.root, "experiment", "stop", "-e", "keeper", "--no-download", timeout=180)
    assert stopped.returncode == 0, stopped.stderr
    assert experiment.record().status == "stopped"
    # a new run begins in the bucket of the link, once the old run's results are gone from the bucket they are in
    fresh = tfcli(ready.root, "experiment", "start", "-e", "keeper", "--fresh", "-c", other, "--dry-run")
    assert fresh.returncode == 0, fresh.stderr
    old_results, new_results = (f"gs://{bucket}/{ready.name}/keeper/results" for bucket in (old, elsewhere))
    assert f"would run: gcloud storage rm --recursive {old_results}" in fresh.stdout
    assert f"would run: gcloud storage rm --recursive {new_results}" in fresh.stdout
    assert f"bucketName: {elsewhere}" in fresh.stdout and f"bucketName: {old}" not in fresh.stdout
    # the file that says where the run's results are, damaged: an error that names it, no guess at a bucket
    (ready.root / "experiments" / "keeper" / "gke" / "bucket.json").write_text('{"bucket": "old one"}')
    calls = len(cloud.calls())
    refused = tfcli(ready.root, "experiment", "download", "-e", "keeper")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert (
        "keeper/gke/bucket.json is damaged: expected" in refused.stderr
        and '\'{"bucket": "old one"}\'' in refused.stderr
    )
    assert cloud.calls()[calls:] == []


@pytest.mark.parametrize("request_", ["stop", "pause"])
def test_a_run_whose_pods_never_start_stops_or_pauses_at_once(linked, cloud, request_):
    # no image of the workers: the RayJob's pods never pull it, and its worker never writes a word
    created = tfcli(linked.root, "cluster", "create", "-n", CLUSTER, "-m", "n1-standard-4", "-s", "2", "--yes")
    assert created.returncode == 0, created.stderr
    experiment = new(linked, "stuck", "-t", "400000")
    assert tfcli(linked.root, "experiment", "start", "-e", "stuck", "-c", CLUSTER).returncode == 0
    job = experiment.record().job
    shown = subprocess.run(["kubectl", f"--context={CONTEXT}", "get", "rayjob", job, "-o", "json"], capture_output=True)
    assert json.loads(shown.stdout)["status"]["jobDeploymentStatus"] == "Initializing", shown.stdout[-500:]
    wanted = {"stop": "stopped", "pause": "paused"}[request_]
    ended = tfcli(linked.root, "experiment", request_, "-e", "stuck", timeout=60)
    assert ended.returncode == 0, ended.stderr
    assert experiment.record().status == wanted
    if request_ == "stop":
        assert kubectl(CONTEXT, "delete", "rayjob", job, "--ignore-not-found") in cloud.calls()


def test_an_own_cluster_left_half_made_by_a_failed_start_is_deleted_again(linked, cloud):
    # its GPU pool refused (a quota, a stockout): the start fails, and the cluster made for it would bill on
    cloud.add_image(IMAGE)
    spec = linked.root / "configs" / "clusters" / "gpus.json"
    spec.write_text(json.dumps({"name": "gpus", "num_nodes": 1, "gpus_per_node": 1, "gpu_type": "nvidia-l4"}))
    new(linked, "unlucky", "-t", "400000", "--cluster", "gpus")
    cloud.fail(["gcloud", "container", "node-pools", "create"], "ERROR: (gcloud.container.node-pools.create) quota")
    started = tfcli(linked.root, "experiment", "start", "-e", "unlucky", "--yes")
    assert started.returncode == 2 and "was created but not set up" in started.stderr, started.stderr
    assert linked.store.cluster("gpus") is None and not cloud.state().get("clusters")
    deletes = [call for call in cloud.calls() if call[:4] == ["gcloud", "container", "clusters", "delete"]]
    assert [call[4] for call in deletes] == ["gpus"]


def test_a_namespace_the_user_set_on_the_context_does_not_hide_a_live_run(ready, cloud):
    # the user points their own kubectl at another namespace of the cluster (kubens team-a, or kubectl config
    # set-context --current --namespace=team-a): a call that names no namespace looks there, finds no RayJob, and
    # a run judged gone would be failed, its RayJob and the cluster made for it deleted under the live job
    experiment = new(ready, "hidden", "-t", "400000")
    assert tfcli(ready.root, "experiment", "start", "-e", "hidden", "-c", CLUSTER).returncode == 0
    job = experiment.record().job
    wait_for(lambda: experiment.progress().get("timesteps", 0) >= 300, 120, 0.5, "progress")
    cloud.set_namespace(CONTEXT, "team-a")
    unnamed = subprocess.run(
        ["kubectl", f"--context={CONTEXT}", "get", "rayjob", job, "-o", "json"], capture_output=True
    )
    assert unnamed.returncode == 1 and f'rayjobs.ray.io "{job}" not found'.encode() in unnamed.stderr
    record = experiment.record()
    assert (record.status, record.job) == ("running", job), record.message
    stopped = tfcli(ready.root, "experiment", "stop", "-e", "hidden", "--no-download", timeout=180)
    assert stopped.returncode == 0, stopped.stderr
    assert experiment.record().status == "stopped" and experiment.progress()["state"] == "stopped"
    named = subprocess.run(kubectl(CONTEXT, "get", "rayjob", "-o", "json"), capture_output=True)
    assert named.returncode == 0 and json.loads(named.stdout)["items"] == []  # deleted where it ran
    ours = [record["argv"] for record in cloud.call_records() if record["argv"][0] == "kubectl" and record["config"]]
    assert ours and all(argv[1:3] == [f"--context={CONTEXT}", "--namespace=default"] for argv in ours), ours


def test_a_run_is_alive_while_kuberay_has_not_yet_acted_on_its_resume_or_its_pause(ready, cloud):
    # KubeRay acts on a suspend patch when its controller next reconciles the RayJob: until then the status is the
    # old one (Suspended after a resume, Running after a pause), which must not be read as the run's state
    from torchforce.client.backends.gke import GkeBackend

    experiment = new(ready, "lagging", "-t", "400000")
    assert tfcli(ready.root, "experiment", "start", "-e", "lagging", "-c", CLUSTER).returncode == 0
    job = experiment.record().job
    first = pause(ready, experiment, 300)
    cloud.set_delays(reconcile=6.0)
    resumed = tfcli(ready.root, "experiment", "start", "-e", "lagging", "--resume")
    assert resumed.returncode == 0 and f"Resumed 'lagging' (RayJob {job}" in resumed.stdout, resumed.stderr
    shown = json.loads(subprocess.run(kubectl(CONTEXT, "get", "rayjob", job, "-o", "json"), capture_output=True).stdout)
    assert (shown["spec"]["suspend"], shown["status"]["jobDeploymentStatus"]) == (False, "Suspended")  # not yet
    assert ready.store.experiment("lagging").status == "running"  # as the start's own look at it left the row
    backend = GkeBackend(ready, CLUSTER)
    assert backend.status(job) == "Resuming" and backend.alive(job)
    assert experiment.record().status == "running"
    wait_for(lambda: experiment.record() and experiment.progress().get("timesteps", 0) > first + 300, 120, 0.5, "it")
    # a pause: the worker checkpoints and holds, the RayJob is suspended, and KubeRay has not acted on it yet
    pausing = subprocess.Popen(
        [sys.executable, "-m", "torchforce", "experiment", "pause", "-e", "lagging"],
        cwd=ready.root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = wait_for(lambda: backend.status(job) == "Suspending" and experiment.record(), 120, 0.2, "Suspending")
    assert seen.status == "running" and backend.alive(job)
    out, err = pausing.communicate(timeout=180)
    assert pausing.returncode == 0, err
    assert experiment.record().status == "paused" and backend.status(job) == "Suspended"


def test_a_bucket_that_cannot_be_read_for_a_moment_judges_nothing(ready, cloud):
    # gcloud storage fails for a moment (a token refresh, the network): a run whose RayJob completed is not judged
    # failed for want of its progress file (and its RayJob kept), a paused run is not told to start afresh for want
    # of its checkpoint (which would discard it), and a stop says that its download failed
    folder = f"gs://{PROJECT}-tfcli/{ready.name}"
    unavailable = "ERROR: (gcloud.storage.{}) HTTPError 503: We encountered an internal error. Please try again."
    long, short = new(ready, "long", "-t", "400000"), new(ready, "short", "-t", "300")
    assert tfcli(ready.root, "experiment", "start", "-e", "long", "-c", CLUSTER).returncode == 0
    assert tfcli(ready.root, "experiment", "start", "-e", "short", "-c", CLUSTER).returncode == 0
    job = short.record().job

    def deployment() -> str:
        shown = subprocess.run(kubectl(CONTEXT, "get", "rayjob", job, "-o", "json"), capture_output=True)
        return str(json.loads(shown.stdout).get("status", {}).get("jobDeploymentStatus"))

    wait_for(lambda: deployment() == "Complete", 120, 0.5, "the short run's RayJob to complete")
    cloud.fail(["gcloud", "storage", "cat", f"{folder}/short/results/progress.json"], unavailable.format("cat"))
    assert short.record().status == "running"  # nothing judged
    assert job in rayjobs(CONTEXT)  # nor released
    cloud.clear_failures()
    assert short.record().status == "finished" and job not in rayjobs(CONTEXT)
    # the paused run's checkpoint cannot be looked for: the resume is refused with gcloud's error, nothing changed
    at_pause = pause(ready, long, 300)
    paused_job = long.record().job
    cloud.fail(["gcloud", "storage", "ls"], unavailable.format("ls"))
    refused = tfcli(ready.root, "experiment", "start", "-e", "long", "--resume")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert "HTTPError 503" in refused.stderr and "no checkpoint" not in refused.stderr
    assert "--fresh" not in refused.stderr
    assert (long.record().status, long.record().job, long.checkpoint_timesteps()) == ("paused", paused_job, at_pause)
    # nor can the results be listed for the stop's download: it is stopped, and says the download failed
    stopped = tfcli(ready.root, "experiment", "stop", "-e", "long", timeout=180)
    assert stopped.returncode == 2 and "Traceback" not in stopped.stderr, stopped.stderr
    assert "experiment 'long' is stopped, but its results could not be downloaded" in stopped.stderr
    assert "HTTPError 503" in stopped.stderr and "tfcli experiment download -e long" in stopped.stderr
    assert long.record().status == "stopped"
    cloud.clear_failures()
    downloaded = tfcli(ready.root, "experiment", "download", "-e", "long")
    assert downloaded.returncode == 0, downloaded.stderr
