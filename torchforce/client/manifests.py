"""The Kubernetes objects of the GKE backend, as plain dicts: pure functions, no cluster and no ``kubectl`` needed.

- ``service_account``: the identity the pods run as. Workload Identity maps it to the linked Google service account
  (its annotation), so pods read and write the bucket with no key file anywhere in the cluster.
- ``ray_job``: one run of an experiment, a KubeRay RayJob. KubeRay builds a Ray cluster shaped by the run mode,
  submits the worker's entry point to it from a small Job, and deletes the cluster when the job ends. Setting
  ``suspend`` deletes the pods (a pause); clearing it runs the same entry point again on a new cluster, and the
  worker resumes from its latest checkpoint. ``backoffLimit`` is how many times a failed run is started again.
- Every Ray pod sees the project's bucket at ``MOUNT`` through GKE's Cloud Storage FUSE driver (the experiment in,
  results out, nothing copied), and, when the run signs checkpoints, the user's checkpoint key from a Secret,
  readable by root only.
- ``dns_label``, ``job_name``, ``labels``: Kubernetes names and label values are DNS labels; a name that cannot be
  one is a SpecError naming the spec field, before anything reaches ``kubectl``.
- ``dump``: manifests as one YAML file for ``kubectl apply -f``.

The tests check these against the schemas the cluster applies: KubeRay's CRD at ``KUBERAY_VERSION`` for the RayJob,
Kubernetes ``GKE_VERSION``'s own for the pods and the service account (tests/client/test_gke_manifests.py).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any, TypeGuard

import yaml

from torchforce.spec import SpecError

MOUNT = "/mnt/tfcli"  # the bucket, in every pod
SERVICE_ACCOUNT = "tfcli-worker"
KEY_SECRET = "tfcli-checkpoint-key"  # holds checkpoint.key
KEY_FILE = "checkpoint.key"
DATA_HOME = "/var/run/tfcli"  # XDG_DATA_HOME of the worker: it reads $XDG_DATA_HOME/torchforce/checkpoint.key
NAMESPACE = "default"
GKE_VERSION = "1.34"  # the Kubernetes minor version of GKE's regular channel that the manifests are checked against
KUBERAY_VERSION = "feeaf72facab4881ba2b179248bb67315634e229"  # ray-project/kuberay commit (2026-08-19) of the CRDs
RAY_VERSION = "2.60.0"  # the Ray the workers' image installs: the pin of the ray extra in pyproject.toml
RUN_MODES = ("single", "multi-threaded", "distributed")
MAX_JOB_NAME = 47  # KubeRay's limit: it names the Ray cluster after the RayJob, plus 6 characters, within 53
TOKEN = re.compile(r"[0-9a-f]{4}")
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
HEAD_PORTS = {"gcs-server": 6379, "dashboard": 8265, "client": 10001}  # the port names KubeRay looks for
GPU = "nvidia.com/gpu"
BUCKET_VOLUME = "bucket"
KEY_VOLUME = "checkpoint-key"


def kube_label(value: str) -> str:
    """``value`` as Kubernetes names take it: lower case, ``_`` as ``-`` (``dns_label`` checks the result)."""
    return value.lower().replace("_", "-")


def dns_label(value: str, path: str, what: str, max_length: int = 63) -> str:
    """``value`` as a DNS-1123 label (lower case, ``_`` as ``-``); a SpecError at ``path`` when it cannot be one.
    ``what`` says what the label becomes (``the RayJob's name``)."""
    label = kube_label(value)
    if len(label) > max_length or not DNS_LABEL.fullmatch(label):
        raise SpecError(
            path,
            f"cannot be used for {what}",
            got=value,
            expected=f"at most {max_length} letters, digits or '-' ('_' becomes '-'), starting and ending with a "
            "letter or digit",
        )
    return label


def is_job_name(name: object, experiment: str | None = None) -> TypeGuard[str]:
    """Whether ``name`` has the form of a RayJob's name as ``job_name`` makes them, ``tf-<experiment>-<token>`` (of
    ``experiment``'s runs where it is given): the names read back from files and the project's store are checked so
    before kubectl is given one, which then never takes an option (``--all``) or another's RayJob for a run's."""
    if not isinstance(name, str) or len(name) > MAX_JOB_NAME or not DNS_LABEL.fullmatch(name):
        return False
    label, _, token = name.removeprefix("tf-").rpartition("-")
    if not name.startswith("tf-") or not label or not TOKEN.fullmatch(token):
        return False
    return experiment is None or label == kube_label(experiment)


def job_name(experiment: str, token: str) -> str:
    """The RayJob's name for a run of ``experiment``: ``tf-<experiment>-<token>``, ``token`` 4 hex digits."""
    if not TOKEN.fullmatch(token):
        raise ValueError(f"a run token is 4 lower-case hex digits, not {token!r}")
    room = MAX_JOB_NAME - len("tf--") - len(token)
    label = dns_label(experiment, "experiment.name", "a GKE run's name")
    if len(label) > room:
        raise SpecError(
            "experiment.name",
            f"too long for a GKE run's name (tf-<name>-{token} may have at most {MAX_JOB_NAME} characters)",
            got=experiment,
            expected=f"a name of at most {room} characters",
            hint="Create the experiment under a shorter name to run it on GKE.",
        )
    return f"tf-{label}-{token}"


def labels(project: str, experiment: str | None) -> dict[str, str]:
    """The labels of every object tfcli makes: who manages it, its project and (for a run) its experiment."""
    result = {
        "app.kubernetes.io/managed-by": "tfcli",
        "torchforce.dev/project": dns_label(project, "project.name", "a Kubernetes label"),
    }
    if experiment is not None:
        result["torchforce.dev/experiment"] = dns_label(experiment, "experiment.name", "a Kubernetes label")
    return result


def service_account(gcp_service_account: str, project: str) -> dict[str, Any]:
    """The Kubernetes service account of the pods, acting as ``gcp_service_account`` through Workload Identity."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": SERVICE_ACCOUNT,
            "namespace": NAMESPACE,
            "labels": labels(project, None),
            "annotations": {"iam.gke.io/gcp-service-account": gcp_service_account},
        },
    }


def ray_version() -> str:
    """The RayJob's ``rayVersion``: the Ray the workers' image runs, which is the pin of torchforce's ``ray`` extra
    that the image installs (``pip install .[ray,...]``: ``RAY_VERSION``, held to pyproject.toml's pin by the
    tests). Not the Ray installed here: a client with another Ray, or none, still names the image's, and KubeRay
    picks by it how it probes the Ray pods' health."""
    return RAY_VERSION


def ray_job(
    *,
    name: str,
    project: str,
    experiment: str,
    image: str,
    bucket: str,
    entrypoint: list[str],
    run_mode: str,
    num_workers: int,
    num_parameter_servers: int,
    gpus: int,
    gpu_type: str | None,
    max_restarts: int,
    suspend: bool = False,
    checkpoint_key: bool = True,
    torch_threads: int = 1,
) -> dict[str, Any]:
    """The RayJob of one run (see the module docstring).

    The Ray cluster follows ``run_mode``: ``single`` is one head pod that runs the agent, a CPU per torch thread
    (``torch_threads``); ``multi-threaded`` one head pod with ``torch_threads`` CPUs per worker thread;
    ``distributed`` a head of 1 CPU for the driver only (Ray places no actor there), a group of ``num_workers``
    worker pods of ``torch_threads`` CPUs and one of ``num_parameter_servers`` parameter-server pods of 1 CPU.
    ``gpus`` (of ``gpu_type``) go to each pod that learns: the head, or each distributed worker.
    ``bucket`` is ``gs://NAME``; ``entrypoint`` the worker's command line, as a list.
    """
    if run_mode not in RUN_MODES:
        raise SpecError("experiment.run_mode", "no such run mode on GKE", got=run_mode, expected=" | ".join(RUN_MODES))
    if not is_job_name(name):
        raise ValueError(f"not a RayJob name (see job_name): {name!r}")
    if not bucket.startswith("gs://") or "/" in bucket.removeprefix("gs://"):
        raise ValueError(f"not a bucket (gs://NAME): {bucket!r}")
    if gpus < 0 or (gpus and not gpu_type):
        raise ValueError(f"{gpus} GPUs of type {gpu_type!r}: a count >= 0, and a type when there are any")
    if max_restarts < 0 or num_parameter_servers < 0 or num_workers < (1 if run_mode != "single" else 0):
        raise ValueError("max_restarts and num_parameter_servers are >= 0, num_workers >= 1")
    if torch_threads < 1:
        raise ValueError(f"torch_threads is >= 1, got {torch_threads}")
    tags = labels(project, experiment)
    pod = _PodMaker(tags, image, bucket.removeprefix("gs://"), checkpoint_key, gpus, gpu_type)
    if run_mode == "distributed":
        head = pod.group("head", cpus=1, memory_gi=4, ray_cpus=0)
        workers = [
            pod.worker_group("workers", num_workers, cpus=torch_threads, learns=True),
            pod.worker_group("parameter-servers", num_parameter_servers, cpus=1, learns=False),
        ]
    else:
        cpus = torch_threads * (num_workers if run_mode == "multi-threaded" else 1)
        head = pod.group("head", cpus=cpus, memory_gi=max(4, 2 * cpus), ray_cpus=cpus, learns=True)
        workers = []
    head["rayStartParams"]["dashboard-host"] = "0.0.0.0"  # reached inside the cluster only (no Service outside)
    cluster: dict[str, Any] = {"rayVersion": ray_version(), "headGroupSpec": head}
    if workers:
        cluster["workerGroupSpecs"] = workers
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": tags},
        "spec": {
            "entrypoint": shlex.join(entrypoint),
            "runtimeEnvYAML": yaml.safe_dump(
                {"env_vars": {"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}}, sort_keys=False
            ),
            "submissionMode": "K8sJobMode",
            "shutdownAfterJobFinishes": True,
            # KubeRay deletes the Ray cluster 5 minutes after the job ends (its pods, logs); the RayJob stays
            "ttlSecondsAfterFinished": 300,
            "backoffLimit": max_restarts,
            "suspend": suspend,
            "rayClusterSpec": cluster,
        },
    }


@dataclass(frozen=True)
class _PodMaker:
    """Builds the head and worker groups of one run from what all its pods share."""

    tags: dict[str, str]
    image: str
    bucket_name: str
    checkpoint_key: bool
    gpus: int
    gpu_type: str | None

    def worker_group(self, group: str, replicas: int, *, cpus: int, learns: bool) -> dict[str, Any]:
        spec = self.group("worker", cpus=cpus, memory_gi=max(2, cpus), ray_cpus=cpus, learns=learns)
        # a fixed size: the runner places exactly this many actors, so there is nothing to scale
        return {"groupName": group, "replicas": replicas, "minReplicas": replicas, "maxReplicas": replicas, **spec}

    def group(self, role: str, *, cpus: int, memory_gi: int, ray_cpus: int, learns: bool = False) -> dict[str, Any]:
        """A head or worker group's ``rayStartParams`` and pod template; ``learns`` gives its pods the GPUs."""
        resources = {"cpu": str(cpus), "memory": f"{memory_gi}Gi"}
        start = {"num-cpus": str(ray_cpus)}
        pod: dict[str, Any] = {"serviceAccountName": SERVICE_ACCOUNT}
        if learns and self.gpus:
            resources[GPU] = str(self.gpus)
            start["num-gpus"] = str(self.gpus)
            pod["nodeSelector"] = {"cloud.google.com/gke-accelerator": self.gpu_type}
        container: dict[str, Any] = {"name": f"ray-{role}", "image": self.image, "imagePullPolicy": "IfNotPresent"}
        if self.checkpoint_key:
            container["env"] = [{"name": "XDG_DATA_HOME", "value": DATA_HOME}]
        # requests = limits: the pod gets exactly what Ray is told it has (Guaranteed QoS, never evicted first)
        container["resources"] = {"requests": resources, "limits": dict(resources)}
        if role == "head":
            container["ports"] = [{"name": port, "containerPort": number} for port, number in HEAD_PORTS.items()]
        container["volumeMounts"] = self.mounts()
        pod.update(containers=[container], volumes=self.volumes())
        return {
            "rayStartParams": start,
            "template": {
                # the annotation asks GKE to add the Cloud Storage FUSE sidecar that serves the bucket volume
                "metadata": {"labels": dict(self.tags), "annotations": {"gke-gcsfuse/volumes": "true"}},
                "spec": pod,
            },
        }

    def volumes(self) -> list[dict[str, Any]]:
        # implicit-dirs: `gcloud storage cp` writes objects without folder markers, and the worker must see folders
        options = {"bucketName": self.bucket_name, "mountOptions": "implicit-dirs,rename-dir-limit=1000"}
        volumes = [
            {"name": BUCKET_VOLUME, "csi": {"driver": "gcsfuse.csi.storage.gke.io", "volumeAttributes": options}}
        ]
        if self.checkpoint_key:
            volumes.append({"name": KEY_VOLUME, "secret": {"secretName": KEY_SECRET, "defaultMode": 0o400}})
        return volumes

    def mounts(self) -> list[dict[str, Any]]:
        mounts: list[dict[str, Any]] = [{"name": BUCKET_VOLUME, "mountPath": MOUNT}]
        if self.checkpoint_key:
            # The key file alone (subPath), in $XDG_DATA_HOME/torchforce/: a Secret volume shows each key as a
            # symlink, which the worker refuses (it opens its key with O_NOFOLLOW); mounted by subPath it is the
            # file itself, root-owned and mode 0400, as the worker requires of a key.
            mounts.append(
                {
                    "name": KEY_VOLUME,
                    "mountPath": f"{DATA_HOME}/torchforce/{KEY_FILE}",
                    "subPath": KEY_FILE,
                    "readOnly": True,
                }
            )
        return mounts


def dump(*manifests: dict[str, Any]) -> str:
    """The manifests as one multi-document YAML text, keys in the order written."""
    return str(yaml.safe_dump_all(manifests, sort_keys=False))
