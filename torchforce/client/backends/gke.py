"""The GKE backend: each experiment run is a KubeRay RayJob on one of the project's GKE clusters.

The RayJob's pods run the same worker as every backend, on the image of the project's link, in the experiment's
folder of the project's bucket (``gs://BUCKET/PROJECT/EXPERIMENT/``, mounted at ``/mnt/tfcli`` in every pod by the
Cloud Storage FUSE driver). Its manifest is written to ``experiments/NAME/gke/`` before ``kubectl apply``, so what
runs can be read there; ``gke/rayjob.json`` names the RayJob of the current run (with its cluster and zone), and
``gke/bucket.json`` the bucket its results are in: the link's when the run began, which a resumed run keeps (and
everything that reads the run's results reads), even after ``tfcli gcloud link`` has moved the project to another
bucket.

The run modes map to pods: ``single`` one head pod, ``multi-threaded`` one head pod with ``num_workers`` CPUs,
``distributed`` a head (the driver) plus a worker group of ``num_workers`` pods and one of the parameter servers
(the pods that run the agent with ``torch_threads`` CPUs for each of its threads);
the pod that learns asks for the cluster's GPUs, if it has any.

Pausing writes ``results/control.json``; the worker checkpoints, says ``paused`` and holds (``--hold-after-pause``)
so the RayJob is still running when it is suspended (``suspend: true``: KubeRay deletes its pods). Resuming on the
same cluster unsuspends it: KubeRay runs the entry point again, which resumes from the checkpoint
(``--resume-if-any``); the same happens when KubeRay re-runs a job whose pod was lost (``backoffLimit`` from
``--max-restarts``). Stopping asks the worker to checkpoint and end, then deletes the RayJob.
"""

from __future__ import annotations

import json
import shlex
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

from torchforce.client import gke, manifests
from torchforce.client.backends.base import Backend, Handle, Launch, check_gpus, upload_spec
from torchforce.client.cluster import runs_on
from torchforce.client.errors import ClientError, ClientWarning
from torchforce.client.experiment_build import torch_threads_of
from torchforce.client.gcloud import BUCKET, GKE_TOOLS, TIMEOUT_SECONDS, Cloud, Link, Result
from torchforce.client.gcs import GcsStorage
from torchforce.client.modules import modules_folder
from torchforce.client.monitor import refuse_monitors
from torchforce.client.project import write_json_atomically
from torchforce.client.store import ClusterRecord

WORKER_MODULE = "torchforce.client.worker"
CONTROL = "control.json"
JOB_FILE = "rayjob.json"
BUCKET_FILE = "bucket.json"
ENDED = ("Complete", "Failed", "ValidationFailed")
STATUS_SECONDS = 60.0  # a RayJob's status read waits this long at most
# A change of spec.suspend that KubeRay has not acted on yet (see status): the RayJob is on its way, alive.
SUSPENDING = "Suspending"  # KubeRay's word too, while it deletes the pods
RESUMING = "Resuming"  # tfcli's: suspend cleared, the status still Suspended (or Suspending)
STILL_UP = ("New", "Initializing", "Waiting", "Running", "Retrying")  # what a suspension ends
# the RayJob's pods are not up: its worker has written nothing (of this run)
NOT_STARTED = ("New", "Initializing", "Waiting", RESUMING)
GONE = "gone"  # the RayJob does not exist (deleted, or its cluster is gone)
UNKNOWN = "unknown"  # kubectl could not tell (the cluster does not answer)


class GkeBackend(Backend):
    name = "gke"
    supported_run_modes = ("single", "multi-threaded", "distributed")
    shared_storage = True  # every cluster's pods mount the run's bucket: gs://BUCKET/PROJECT/EXPERIMENT/

    def __init__(self, project: Any, cluster: str, *, dry_run: bool = False) -> None:
        """The backend of ``cluster``. One the project has deleted still reads the bucket (results, logs, download):
        the bucket belongs to the project, not to the cluster; its RayJobs are gone with it."""
        self.project, self.cluster = project, cluster
        self.record = project.store.cluster(cluster)
        self.link = Link.of(project.settings)
        self.cloud = Cloud(self.link, dry_run=dry_run)
        self.context = str(self.record.runtime["context"]) if self.record is not None else None

    def kubectl(self, *arguments: str, check: bool = True, timeout: float = TIMEOUT_SECONDS) -> Result:
        """kubectl on the cluster's context; a RayJob it is given by name must be one tfcli names (``job_name``)."""
        named = arguments.index("rayjob") + 1 if "rayjob" in arguments[:2] else len(arguments)
        if named < len(arguments):
            self._check_job(arguments[named])
        if self.context is None:  # the cluster is gone, and every object on it
            result = Result(1, "", f"Error from server (NotFound): the cluster '{self.cluster}' was deleted")
            if check:
                raise self.cloud.failure(["kubectl", *arguments], result)
            return result
        return self.cloud.run(gke.kubectl_call(self.context, *arguments), check=check, timeout=timeout)

    def _check_job(self, name: str) -> None:
        """A ClientError unless tfcli could have named a RayJob ``name``: handles are read from the project's
        store and the experiment's gke/rayjob.json, which may have been changed or come from someone else, and
        kubectl must never take one for an option (``--all``)."""
        if not manifests.is_job_name(name):
            raise ClientError(
                f"'{name}' is not the name of a RayJob that tfcli started (tf-<experiment>-<token>): kubectl is not "
                "run on it",
                hint="The experiment's records were changed by hand or come from elsewhere: check its gke/ folder.",
            )

    @property
    def cluster_record(self) -> ClusterRecord:
        """The cluster's record; a ClientError (with a did-you-mean) when the project no longer has it."""
        return self.record if self.record is not None else gke.find(self.project, str(self.cluster))

    # ------------------------------------------------------------------ places

    def _run_folder(self, folder: Path, bucket: str | None = None) -> GcsStorage:
        return GcsStorage(f"{bucket or self.bucket(folder)}/{self.project.name}/{folder.name}", self.cloud)

    def bucket(self, folder: Path) -> str:
        """The bucket the experiment's run on GKE keeps its results in: the one the link named when the run began
        (``recorded_bucket``), or the link's for an experiment that has not run on GKE (or ran before tfcli wrote
        the file)."""
        return recorded_bucket(folder) or self.link.bucket

    def storage(self, folder: Path) -> GcsStorage:
        return self._run_folder(folder).child("results")

    def check(self, spec: dict[str, Any]) -> None:
        """The tools on PATH, a cluster that is set up, names Kubernetes takes, and pods that fit its nodes."""
        if not self.cloud.dry_run:
            Cloud.require(*GKE_TOOLS)
        manifests.dns_label(self.project.name, "project.name", "a project name on GKE")
        record = self.cluster_record
        if record.status != "running":
            raise ClientError(
                f"the GKE cluster '{self.cluster}' is {record.status}, not ready to run experiments",
                hint=f"Delete it ('tfcli cluster delete -c {self.cluster}') and create it again.",
            )
        gke.check_fits(self.manifest(spec, manifests.job_name(spec["name"], "0000"), ["python"], 0), record)
        check_gpus(spec, f"the GKE cluster '{self.cluster}'", int(record.spec.get("gpus_per_node") or 0), per=" a node")
        refuse_monitors(
            spec,
            "on GKE",
            "its records would go to the Cloud Storage bucket the pods mount, one write of its object at every "
            "episode's end (Cloud Storage takes about one a second), from every pod",
        )

    def manifest(
        self, spec: dict[str, Any], name: str, entrypoint: list[str], max_restarts: int, *, bucket: str | None = None
    ) -> dict[str, Any]:
        """The RayJob of a run of the experiment ``spec`` on this cluster, its pods mounting ``bucket`` (default:
        the link's)."""
        return run_manifest(
            self.project, self.link, self.cluster_record.spec, spec, name, entrypoint, max_restarts, bucket=bucket
        )

    # ------------------------------------------------------------------ a run

    def start(self, folder: Path, project_root: Path, launch: Launch) -> str:
        new_run = not launch.resume or launch.carry  # else it goes on from its results, in the bucket they are in
        bucket = self.link.bucket if new_run else self.bucket(folder)
        results = self._run_folder(folder, bucket).child("results")
        previous = self.previous_job(folder)
        if launch.resume and not launch.carry and previous is not None:
            if self.status(previous) == "Suspended":
                # the spec as it is now (a start may have changed its budget), where the RayJob's pods read it
                self._run_folder(folder, bucket).upload(folder / "experiment.json", "experiment.json")
                results.remove(CONTROL)  # the answered pause must not end the resumed run at once
                self.kubectl("patch", "rayjob", previous, "--type=merge", '-p={"spec":{"suspend":false}}')
                return previous
            self.retire(previous, folder)  # ended (its release failed) or gone: a new RayJob takes its place
        if new_run:
            results.remove("")  # a new run, or one resuming what ran elsewhere: nothing of an older run stays
        if not self.cloud.dry_run:
            write_json_atomically(folder / "gke" / BUCKET_FILE, {"bucket": bucket})
        run = self._run_folder(folder, bucket)
        upload_spec(run, folder)
        results.remove(CONTROL)
        if launch.carry and (folder / "results").is_dir():
            self.cloud.run(["gcloud", "storage", "rsync", str(folder / "results"), results.location, "--recursive"])
        spec = json.loads((folder / "experiment.json").read_text())
        place = f"{manifests.MOUNT}/{self.project.name}/{folder.name}"
        entrypoint = ["python", "-I", "-m", WORKER_MODULE, place, "--log-file", "--resume-if-any"]
        entrypoint.append("--hold-after-pause")
        modules = modules_folder(project_root)
        if modules.is_dir():
            run.upload(modules, "modules")
            entrypoint += ["--modules", f"{place}/modules"]
        entrypoint += ["--trust-pickle"] if launch.trust_pickle else []
        name = manifests.job_name(folder.name, uuid.uuid4().hex[:4])
        text = manifests.dump(self.manifest(spec, name, entrypoint, launch.max_restarts, bucket=bucket))
        file = folder / "gke" / f"{name}.yaml"
        if self.cloud.dry_run:  # the manifest is shown, not written
            self.cloud.echo(f"the RayJob ({file.relative_to(self.project.root)}):\n{text}")
        else:
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(text)
        self.kubectl("apply", "-f", str(file))
        if not self.cloud.dry_run:
            job = {"name": name, "cluster": self.cluster, "zone": self.cluster_record.runtime.get("zone")}
            (folder / "gke" / JOB_FILE).write_text(json.dumps(job) + "\n")
        return name

    def previous_job(self, folder: Path) -> str | None:
        """The RayJob that the experiment in ``folder`` last ran as on this cluster (gke/rayjob.json), if any."""
        try:
            data = json.loads((folder / "gke" / JOB_FILE).read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("cluster") != self.cluster:
            return None
        name = data.get("name")
        return name if manifests.is_job_name(name, folder.name) else None  # not one of this run's: ignored

    def retire(self, handle: Handle | None, folder: Path, *, required: bool = True) -> None:
        """Delete the RayJob of an earlier run that a start does not continue (``--fresh``; a run that moves
        elsewhere): suspended, it holds no pods but stays listed for good. Only deleted, or NotFound by the API
        server's word (``--ignore-not-found``), is gone; any other failure refuses the start with nothing changed,
        so that the experiment's row still names the RayJob and the next start, stop or delete tries again. Not
        ``required`` (the run ended, and its RayJob went as it ended, ``release``) the failure only warns."""
        if not manifests.is_job_name(handle, folder.name) or self.context is None:  # none of its, or its cluster gone
            return
        try:
            self.kubectl("delete", "rayjob", handle, "--ignore-not-found")
        except ClientError as error:  # it failed, or did not finish: the RayJob may be there still
            if not required:
                by_hand = shlex.join(gke.kubectl_call(self.context, "delete", "rayjob", handle))
                warnings.warn(
                    f"the RayJob {handle} of experiment '{folder.name}', which ended, could not be deleted from the "
                    f"GKE cluster '{self.cluster}' and may be left there ('{by_hand}' removes it once the cluster "
                    f"answers): {error.message}",
                    ClientWarning,
                    stacklevel=2,
                )
                return
            raise ClientError(
                f"the RayJob {handle} of experiment '{folder.name}' on the GKE cluster '{self.cluster}' could not be "
                f"deleted, so the new run was not started (nothing was changed): {error.message}",
                hint=f"Try again once the cluster answers. A cluster that no longer exists: 'tfcli cluster delete -c "
                f"{self.cluster}' forgets it, and its RayJobs with it.",
            ) from None
        if not self.cloud.dry_run and self.previous_job(folder) == handle:
            (folder / "gke" / JOB_FILE).unlink(missing_ok=True)  # it named the RayJob of the current run

    def job(self, handle: Handle | None) -> dict[str, Any] | str:
        """The RayJob as kubectl shows it, or GONE / UNKNOWN."""
        if not isinstance(handle, str) or self.context is None:  # no RayJob, or its cluster is gone with it
            return GONE
        try:  # a status read that hangs (an API server that does not answer) is no status: list and show go on
            result = self.kubectl("get", "rayjob", handle, "-o", "json", check=False, timeout=STATUS_SECONDS)
        except ClientError:
            return UNKNOWN
        if result.code != 0:  # gone only by the API server's word for this RayJob: kubectl says "not found" of
            # other things too (its auth plugin, a kube context), and a run judged gone is failed, its cluster released
            return GONE if "(NotFound)" in result.stderr and f'"{handle}" not found' in result.stderr else UNKNOWN
        try:
            data = json.loads(result.stdout)
        except ValueError:
            return UNKNOWN
        return data if isinstance(data, dict) else UNKNOWN

    def status(self, handle: Handle | None) -> str:
        """The RayJob's deployment status (``Running``, ``Suspended``, ``Complete``...), or GONE / UNKNOWN; or
        RESUMING / SUSPENDING while KubeRay has not yet acted on a change of its ``suspend`` (``deployment_status``)."""
        job = self.job(handle)
        if isinstance(job, str):
            return job
        return deployment_status(job)

    def alive(self, handle: Handle | None, folder: Path | None = None) -> bool:
        return self.status(handle) not in (GONE, "Suspended", *ENDED)  # UNKNOWN is not judged dead

    def _state(self, folder: Path) -> str | None:
        """The worker's state in ``progress.json`` (None when it has written none). A ClientError when the bucket
        cannot be read just now: no state is no reason to judge."""
        try:
            progress = json.loads(self.storage(folder).read_text("progress.json") or "{}")
        except ValueError:
            return None
        return progress.get("state") if isinstance(progress, dict) else None

    def _state_or_none(self, folder: Path) -> str | None:
        """``_state``, or None while the bucket cannot be read (a poll asks again)."""
        try:
            return self._state(folder)
        except ClientError:
            return None

    def signal(self, handle: Handle, request: str, timeout: float, folder: Path | None = None) -> bool:
        """Ask the worker through ``control.json``. A pause is answered (checkpoint, ``paused``) while the worker
        holds, then the RayJob is suspended; a stop ends the job, which is then deleted. True once done."""
        if folder is None:
            raise ValueError("the GKE backend signals through the experiment's folder")
        self.storage(folder).write_text(CONTROL, json.dumps({"request": request, "at": time.time()}))
        if self.status(handle) in NOT_STARTED and self._state(folder) != "running":
            return self._end_unstarted(handle, request, timeout)
        deadline = time.monotonic() + timeout
        wanted = "paused" if request == "pause" else "stopped"
        while time.monotonic() < deadline:
            status = self.status(handle)
            if status in (GONE, "Suspended", *ENDED):
                break
            if self._state_or_none(folder) == wanted:
                break
            time.sleep(1.0)
        else:
            return False
        if request == "pause" and self.status(handle) not in (GONE, "Suspended", *ENDED):
            self.kubectl("patch", "rayjob", str(handle), "--type=merge", '-p={"spec":{"suspend":true}}')
            while time.monotonic() < deadline and self.status(handle) not in (GONE, "Suspended", *ENDED):
                time.sleep(1.0)
        if request == "stop":
            while time.monotonic() < deadline and self.status(handle) not in (GONE, *ENDED):
                time.sleep(1.0)
            self.kubectl("delete", "rayjob", str(handle), "--ignore-not-found")
        return True

    def _end_unstarted(self, handle: Handle, request: str, timeout: float) -> bool:
        """A RayJob whose worker has not started (its pods pulling an image, waiting for nodes or GPUs that may
        never come) has nothing to checkpoint: a stop deletes it, a pause suspends it (the run's last checkpoint
        stands), at once."""
        if request == "stop":
            self.kubectl("delete", "rayjob", str(handle), "--ignore-not-found")
            return True
        self.kubectl("patch", "rayjob", str(handle), "--type=merge", '-p={"spec":{"suspend":true}}')
        deadline = time.monotonic() + timeout
        while self.status(handle) not in (GONE, "Suspended", *ENDED):
            if time.monotonic() > deadline:
                return False
            time.sleep(1.0)
        return True

    def outcome(self, handle: Handle | None, folder: Path) -> tuple[str, str | None] | None:
        status = self.status(handle)
        if status == UNKNOWN:  # the RayJob ended (alive() saw it), but how is not to be had now
            raise ClientError(f"the GKE cluster '{self.cluster}' did not answer just now")
        state = self._state(folder)
        if status == "Suspended" and (state == "paused" or (state != "running" and self.requested(folder) == "pause")):
            return "paused", None  # answered by the worker, or suspended before it started
        if status in ("Complete", GONE) and state in ("finished", "stopped"):
            return state, None
        if status == GONE and state != "running" and self.requested(folder) == "stop":
            return "stopped", None  # deleted before its worker started
        tail = "\n".join(self.logs(handle, folder).strip().splitlines()[-8:])
        job = self.job(handle)
        said = str((job.get("status") or {}).get("message") or "") if isinstance(job, dict) else ""
        reason = f"the RayJob {handle} on '{self.cluster}' ended {status}" + (f" ({said})" if said else "")
        return "failed", reason + (f"; its log ends:\n{tail}" if tail else "")

    def logs(self, handle: Handle | None, folder: Path) -> str:
        """The driver's log (the submitter Job's), or the worker's log file in the bucket when it is gone."""
        if isinstance(handle, str):
            result = self.kubectl("logs", f"job/{handle}", check=False)
            if result.code == 0:
                return str(result.stdout)
        return self.storage(folder).read_text("worker.log") or ""

    def stream_logs(self, handle: Handle | None, folder: Path) -> bool:
        """Follow the driver's log as it grows (``kubectl logs --follow``); False when there is no job to follow."""
        if not isinstance(handle, str) or self.status(handle) in (GONE, UNKNOWN):
            return False
        command = gke.kubectl_call(str(self.context), "logs", f"job/{handle}", "--follow")
        return self.cloud.attached(command) == 0  # in tfcli's gcloud configuration, as every call

    def download(self, folder: Path) -> Path:
        target = folder / "results"
        storage = self.storage(folder)
        if not storage.exists("") and not target.is_dir():
            raise ClientError(f"experiment '{folder.name}' has no results yet", hint="Start it first.")
        storage.download("", target, skip=(CONTROL,))
        return target

    def discard(self, folder: Path) -> None:
        self.storage(folder).remove("")

    def release(self, handle: Handle | None, folder: Path, *, keep_own_cluster: bool = False) -> None:
        """After the run has ended for good: its RayJob goes (a suspended one holds no pods, but is still listed),
        and so does the cluster the experiment created for itself, unless ``keep_own_cluster``."""
        if manifests.is_job_name(handle, folder.name):  # (another name, from a changed record, is none of its)
            self.kubectl("delete", "rayjob", handle, "--ignore-not-found", check=False)
        if not keep_own_cluster:
            release_own_cluster(self.project, folder.name)


def release_own_cluster(project: Any, experiment: str, *, unless_on: str | None = None) -> None:
    """The GKE cluster made for ``experiment`` (``gke.owned_by``), if any, is deleted: when its run ends, moves to
    another cluster, or the experiment is deleted; not where the run now starts (``unless_on``). One that others run
    on (started there with -c by the user) is kept, with a warning: they would fail with it; it goes when deleted by
    hand."""
    owned = gke.owned_by(project, experiment)
    if owned is None or owned.name == unless_on:
        return
    others = [name for name in runs_on(project, owned.name) if name != experiment]
    if others:
        warnings.warn(
            f"the cluster '{owned.name}' made for experiment '{experiment}' is kept: {', '.join(others)} "
            f"{'runs' if len(others) == 1 else 'run'} on it (delete it later: tfcli cluster delete -c {owned.name})",
            ClientWarning,
            stacklevel=3,
        )
        return
    gke.delete(project, owned, force=True, echo=lambda text: None)


def deployment_status(job: dict[str, Any]) -> str:
    """The status of the RayJob ``job`` (as ``kubectl get -o json`` shows it), its ``spec.suspend`` taken into
    account. KubeRay acts on a patch of ``suspend`` when its controller next reconciles the RayJob, not as the patch
    is written: right after ``start --resume`` unsuspends it, the status still says ``Suspended`` (or
    ``Suspending``), and right after a pause suspends it, still ``Running`` (or ``Initializing``...). Read as
    such, a resumed run would look paused, and be recorded so while KubeRay starts it; so ``suspend: false`` with
    ``Suspended``/``Suspending`` is RESUMING, and ``suspend: true`` with a status a suspension ends (``STILL_UP``)
    is SUSPENDING: both alive, neither ended. (``status.observedGeneration`` cannot tell this reliably: older
    KubeRay RayJob controllers wrote it, recent ones do not, and one that does not leaves it behind
    ``metadata.generation`` for good, which would keep an ended run alive.)"""
    status = str((job.get("status") or {}).get("jobDeploymentStatus") or "Initializing")
    suspend = bool((job.get("spec") or {}).get("suspend"))
    if not suspend and status in ("Suspended", SUSPENDING):
        return RESUMING
    if suspend and status in STILL_UP:
        return SUSPENDING
    return status


def recorded_zone(folder: Path, cluster: str) -> str | None:
    """The zone of the cluster ``cluster`` when the experiment in ``folder`` last ran a RayJob there
    (``gke/rayjob.json``): where a resume makes the experiment's own cluster again once it was deleted. None where
    its last RayJob ran on another cluster, or the file was written before tfcli recorded zones."""
    try:
        data = json.loads((folder / "gke" / JOB_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("cluster") != cluster or not isinstance(data.get("zone"), str):
        return None
    return str(data["zone"])


def recorded_bucket(folder: Path) -> str | None:
    """The bucket the experiment in ``folder`` began its GKE run in (``gke/bucket.json``), None without the file. A
    file that names no bucket is a ClientError: guessing would read, or resume from, another bucket's copy of the
    experiment."""
    path = folder / "gke" / BUCKET_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise ClientError(f"cannot read {path}: {error.strerror}") from None
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    bucket = data.get("bucket") if isinstance(data, dict) else None
    if isinstance(bucket, str) and BUCKET.fullmatch(bucket.rstrip("/")):
        return bucket.rstrip("/")
    raise ClientError(
        f'{path} is damaged: expected {{"bucket": "gs://NAME"}} (the bucket the experiment\'s GKE run keeps its '
        f"results in), got {text.strip()[:200]!r}",
        hint=f"Write the bucket the run began in into it (gs://BUCKET/PROJECT/{folder.name}/ holds its results), or "
        "remove the file if the run's results are in the linked bucket.",
    )


def run_manifest(
    project: Any,
    link: Link,
    cluster: dict[str, Any],
    spec: dict[str, Any],
    name: str,
    entrypoint: list[str],
    max_restarts: int,
    *,
    bucket: str | None = None,
) -> dict[str, Any]:
    """The RayJob of a run of the experiment ``spec`` on a cluster of spec ``cluster``: its pods by run mode, the
    cluster's GPUs for the one that learns, ``bucket`` (default: the link's) mounted."""
    return manifests.ray_job(
        name=name,
        project=project.name,
        experiment=spec["name"],
        image=link.image,
        bucket=bucket or link.bucket,
        entrypoint=entrypoint,
        run_mode=spec["run_mode"],
        num_workers=int(spec.get("num_workers") or 1),
        num_parameter_servers=int(spec.get("num_parameter_servers") or 1),
        gpus=int(cluster.get("gpus_per_node") or 0),
        gpu_type=cluster.get("gpu_type"),
        max_restarts=max_restarts,
        torch_threads=torch_threads_of(spec),
    )


def check_fits_before_creating(project: Any, cluster: Any, spec: dict[str, Any]) -> None:
    """Refuse, before a cluster is created for the experiment ``spec``, one whose nodes cannot hold its pods."""
    record = ClusterRecord(name=cluster.name, spec=cluster.spec(), status="planned", runtime={})
    link = Link.for_dry_run(project.settings, echo=lambda text: None)  # (a dry run may come before the link)
    name = manifests.job_name(spec["name"], "0000")
    gke.check_fits(run_manifest(project, link, record.spec, spec, name, ["python"], 0), record)
    check_gpus(spec, f"the GKE cluster '{cluster.name}'", int(record.spec.get("gpus_per_node") or 0), per=" a node")
