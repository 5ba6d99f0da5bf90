"""The Ray backend: each experiment run is a Ray Job on one of the project's Ray clusters.

The job runs the same worker as the local backend (``python -I -m torchforce.client.worker``), on the cluster's
head node, in the experiment's folder on the cluster's storage: ``<storage>/<project>/<experiment>/`` holds its
``experiment.json`` (uploaded at start) and ``results/`` (written by the worker). The client reads progress and
checkpoints from there and ``download`` copies the results into ``experiments/<name>/results/``.

Pausing and stopping write ``results/control.json``; the worker reads it about once a second, checkpoints and ends,
so the job ends with status SUCCEEDED and the experiment ``paused`` or ``stopped``.

Ray places a job by the resources it asks for: the job's own process asks for a CPU per torch thread it runs the
agent on (``entrypoint_num_cpus``: the experiment's ``torch_threads``, 1 by default, for each worker thread of the
multi-threaded run mode, which act and update at once, as the local queue and a GKE head pod count them; none in
the distributed run mode, whose Ray worker actors ask for ``torch_threads`` CPUs each, in a placement group), and a
job waits as
PENDING until the cluster has them. ``list`` and ``show`` show such a run as ``pending`` rather than running (the
state database says running: the workload exists). Nothing of it runs yet, so there is nothing to pause. A stop
writes its request and asks Ray to stop the job (``stop_job``), which Ray does not do before it has placed the job's
process (ray-project/ray#58353): the stop says so, and the worker stops at its first step once placed, as it reads
the request first. A job that no node could ever hold is refused at start instead (``check``: a process's CPUs on
one node). Ray fails a job still pending after 15 minutes
(the cluster's ``RAY_JOB_START_TIMEOUT_SECONDS``); the run is then ``failed`` with that message, and starts again
with ``start``. The worker never reaches the
project's state database (a remote cluster cannot): when a job has ended, the client takes the status the worker
left in ``progress.json``, or ``failed`` with the job's log tail.
"""

from __future__ import annotations

import http.client
import json
import shlex
import sys
import time
import urllib.error
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

from torchforce.client.backends.base import Backend, Handle, Launch, check_gpus, upload_spec
from torchforce.client.errors import ClientError
from torchforce.client.experiment_build import agent_process_cpus, torch_threads_of
from torchforce.client.modules import modules_folder
from torchforce.client.monitor import refuse_monitors
from torchforce.client.storage import Storage
from torchforce.spec.device import needs_gpu, uses_gpu

WORKER_MODULE = "torchforce.client.worker"
UNREACHABLE_SECONDS = 30.0  # a cluster that did not answer is not asked again for this long (by this process)
_unreachable: dict[str, float] = {}  # dashboard -> when it last failed to answer


def _says_no_such_job(error: urllib.error.HTTPError, handle: str) -> bool:
    """Whether a 404 is the Ray Jobs API's own "Job <id> does not exist" (another server on a dead cluster's port
    answers 404 to any path: that is no word on the job)."""
    try:
        body = error.read(4096).decode(errors="replace")
    except (OSError, http.client.HTTPException):
        return False
    return body.strip() == f"Job {handle} does not exist"


def _job_errors() -> tuple[type[BaseException], ...]:
    """What the Jobs client raises when a call fails: HTTP errors, lost connections (OSError), Ray's own errors
    (a refused token)."""
    from ray.exceptions import RayError

    return RuntimeError, OSError, ValueError, RayError


ENDED = ("SUCCEEDED", "FAILED", "STOPPED")
PENDING_STOP_SECONDS = 10.0  # how long a stop waits for a job still waiting for its CPUs to end
CONTROL = "control.json"


class RayBackend(Backend):
    name = "ray"
    supported_run_modes = ("single", "multi-threaded", "distributed")

    def __init__(self, project: Any, cluster: str) -> None:
        from torchforce.client import ray_cluster

        self.project, self.cluster = project, cluster
        self.record = ray_cluster.find(project, cluster)
        self.spec = ray_cluster.from_record(self.record)
        self.dashboard = str(self.record.runtime.get("dashboard") or "")
        self._client: Any = None

    # ------------------------------------------------------------------ the cluster

    @property
    def client(self) -> Any:
        """The cluster's Ray Jobs client for an action (a submission, a stop, a log): asked afresh even if the
        cluster did not answer a moment ago; a ClientError when it does not answer now."""
        return self._jobs(fresh=True)

    def _jobs(self, fresh: bool) -> Any:
        """The Jobs client. A status read (``fresh`` false) within UNREACHABLE_SECONDS of the cluster's last failure
        to answer is refused without asking, so that listing a silent cluster's experiments waits once, not once
        each; an answer clears that failure."""
        if self._client is None:
            from torchforce.client.ray_cluster import headers, reach

            failed = _unreachable.get(self.dashboard)
            if not fresh and failed is not None and time.monotonic() - failed < UNREACHABLE_SECONDS:
                raise ClientError(f"the Ray cluster '{self.cluster}' at {self.dashboard} did not answer just now")
            try:
                reach(self.dashboard, runtime=self.record.runtime)
            except ClientError:
                _unreachable[self.dashboard] = time.monotonic()
                raise
            _unreachable.pop(self.dashboard, None)
            from ray.job_submission import JobSubmissionClient

            from torchforce.execution.ray_cluster import no_proxy_for_loopback

            no_proxy_for_loopback(self.dashboard)
            try:
                self._client = JobSubmissionClient(self.dashboard, headers=headers(self.record.runtime))
            except _job_errors() as error:
                raise ClientError(f"cannot use the Ray cluster '{self.cluster}' at {self.dashboard}: {error}") from None
        return self._client

    def check(self, spec: dict[str, Any]) -> None:
        """Enough CPUs for the run: ``torch_threads`` per Ray worker in the distributed run mode, or for the job's
        process otherwise (per worker thread in the multi-threaded mode: ``agent_process_cpus``); and on one node,
        what one process asks for (Ray places a process on one node, and a job that no node can hold would wait for
        good: Ray cannot cancel a job before it starts)."""
        from torchforce.client.ray_cluster import status

        state = status(self.record)
        if state["state"] != "alive":
            raise ClientError(
                f"the Ray cluster '{self.cluster}' does not answer at {self.dashboard} ({state['state']})",
                hint=f"Has it ended? 'tfcli cluster delete -c {self.cluster}' forgets it; create it again with "
                "'tfcli cluster create'.",
            )
        threads, process = torch_threads_of(spec), agent_process_cpus(spec)
        distributed = spec["run_mode"] == "distributed"
        if distributed and not self.spec.local:
            refuse_monitors(
                spec,
                "in a distributed run on a Ray cluster of other machines",
                "each Ray worker's records would stay on the disk of its own node",
            )
        needed = spec["num_workers"] * process if distributed else process
        if state["cpus"] is not None and needed > state["cpus"]:
            raise ClientError(
                f"experiment '{spec['name']}' needs {needed} CPUs on the cluster '{self.cluster}', which has "
                f"{state['cpus']:g}",
                hint="Give fewer workers (--num-workers)"
                + (" or torch threads (--torch-threads)" if threads > 1 else "")
                + ", or a larger cluster (more nodes or cpus per node).",
            )
        largest = state.get("cpus_one_node")
        if largest is not None and process > largest:
            each = "each of its Ray workers" if distributed else "its job"
            why = "torch_threads" if process == threads else f"{spec['num_workers']} worker threads x torch_threads"
            raise ClientError(
                f"experiment '{spec['name']}' asks for {process} CPUs on one node for {each} ({why}), but "
                f"the largest node of the cluster '{self.cluster}' has {largest:g}",
                hint="Give fewer "
                + ("torch threads (--torch-threads)" if process == threads else "workers or torch threads")
                + ", or a cluster with larger nodes (cpus per node).",
            )
        # a run sees the one GPU that Ray gives it (its job, or each distributed worker), as cuda:0
        check_gpus(spec, f"the Ray cluster '{self.cluster}'", state["gpus"], visible=1)

    def storage(self, folder: Path) -> Storage:
        root = Storage(self.record.runtime.get("storage") or self.spec.storage or "")
        return root.child(self.project.name, folder.name, "results")

    def _run_folder(self, folder: Path) -> Storage:
        return Storage(self.storage(folder).location.rsplit("/", 1)[0])

    # ------------------------------------------------------------------ a run

    def start(self, folder: Path, project_root: Path, launch: Launch) -> str:
        run = self._run_folder(folder)
        results = self.storage(folder)
        if (
            not launch.resume or launch.carry
        ):  # a new run, or one resuming what ran elsewhere: nothing of an older run stays
            results.remove("")
        upload_spec(run, folder)
        results.remove(CONTROL)  # an old pause request must not end the new run at once
        if launch.carry:
            self._upload_results(folder / "results", results)  # the checkpoint it resumes from
        python = self.spec.python or (sys.executable if self.spec.local else "python")
        location = run.local if run.local is not None else run.location
        command = [python, "-I", "-m", WORKER_MODULE, str(location), "--log-file"]
        runtime_env: dict[str, Any] = {"env_vars": {"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}}
        modules = modules_folder(project_root)
        if modules.is_dir():  # the project's own classes: in place on this machine, uploaded to a remote cluster
            if self.spec.local:
                command += ["--modules", str(modules.resolve())]
            else:
                runtime_env["working_dir"] = str(modules)
                command += ["--modules", "."]
        command += launch.worker_flags()
        submission = f"tfcli-{folder.name}-{uuid.uuid4().hex[:8]}"
        spec = json.loads((folder / "experiment.json").read_text())
        learns_here = spec.get("run_mode") != "distributed"
        try:
            self.client.submit_job(
                entrypoint=shlex.join(command),
                submission_id=submission,
                # the job's own process: the run itself in the single and multi-threaded modes; in the distributed
                # one, the Ray workers it starts ask for a CPU each (and a share of the GPUs: worker_resources) and
                # the driver only coordinates
                entrypoint_num_cpus=agent_process_cpus(spec) if learns_here else 0,
                # an agent on a GPU gets one: Ray places the job on a node that has it and shows it that GPU alone
                entrypoint_num_gpus=self._job_gpus(spec) if learns_here else 0,
                runtime_env=runtime_env,
                metadata={"torchforce_experiment": folder.name, "torchforce_project": self.project.name},
            )
        except _job_errors() as error:
            raise ClientError(f"submitting the job to the Ray cluster '{self.cluster}' failed: {error}") from None
        return submission

    def _job_gpus(self, spec: dict[str, Any]) -> float:
        """The GPUs of a run whose agent computes on a GPU ("cuda", "auto"): one where the cluster has one, else
        none (an "auto" agent then computes on the CPU)."""
        from torchforce.client.ray_cluster import status

        device = spec.get("agent", {}).get("device")
        if not uses_gpu(device):
            return 0
        gpus = status(self.record)["gpus"]
        if gpus is None:  # not known now (check() found some for a run on "cuda"): one, which it needs
            return 1.0 if needs_gpu(device) else 0
        return min(1.0, gpus)

    @staticmethod
    def _upload_results(source: Path, target: Storage) -> None:
        for path in sorted(source.rglob("*")):
            if path.is_file() and not path.is_symlink() and path.name != CONTROL:
                target.upload(path, str(path.relative_to(source)))

    def job_status(self, handle: Handle | None, fresh: bool = False) -> str | None:
        """The Ray job's status; "UNREACHABLE" when the cluster does not answer (``fresh``: ask it even if it did
        not answer a moment ago), None when it knows no such job. One GET of the Jobs API (``/api/jobs/<id>``, what
        the Jobs client's ``get_job_status`` asks), without the Jobs client: reading a status does not import Ray
        (seconds), so listing, showing and pausing a run on a cluster answer sooner."""
        if not isinstance(handle, str):
            return None
        from torchforce.client.ray_cluster import REACH_TIMEOUT, get_json

        failed = _unreachable.get(self.dashboard)
        if not fresh and failed is not None and time.monotonic() - failed < UNREACHABLE_SECONDS:
            return "UNREACHABLE"
        url = f"{self.dashboard.rstrip('/')}/api/jobs/{urllib.parse.quote(handle, safe='')}"
        try:
            job = get_json(url, self.record.runtime, REACH_TIMEOUT)
        except urllib.error.HTTPError as error:
            _unreachable.pop(self.dashboard, None)
            if error.code == 404 and _says_no_such_job(error, handle):  # Ray answers, and knows no such job
                return None
            return "UNREACHABLE"  # a refused token, a failing dashboard, another server there: nothing is judged
        except (OSError, ValueError, http.client.HTTPException):  # nothing answers, or not with JSON or HTTP
            _unreachable[self.dashboard] = time.monotonic()
            return "UNREACHABLE"
        _unreachable.pop(self.dashboard, None)
        status = job.get("status") if isinstance(job, dict) else None
        return str(status) if status else "UNREACHABLE"

    def alive(self, handle: Handle | None, folder: Path | None = None) -> bool:
        status = self.job_status(handle)
        return status not in (None, *ENDED)  # a cluster that does not answer is not judged dead

    def signal(self, handle: Handle, request: str, timeout: float, folder: Path | None = None) -> bool:
        """Ask the worker through ``control.json``; wait until the job has ended. A job that waits for its CPUs
        (PENDING) has no worker yet to ask: a stop asks Ray to stop it too, which Ray does not do for a job whose
        process it has not placed yet (ray-project/ray#58353). Such a job keeps the request, and its worker stops
        at its first step once placed; the stop is then a ClientError that says so, rather than a long wait."""
        if folder is None:
            raise ValueError("the Ray backend signals through the experiment's folder")
        self.storage(folder).write_text(CONTROL, json.dumps({"request": request, "at": time.time()}))
        if request == "stop" and self.job_status(handle, fresh=True) == "PENDING":
            try:
                self.client.stop_job(handle)
            except _job_errors():
                pass  # it has started meanwhile: its worker reads the request
            if not self._ended_within(handle, PENDING_STOP_SECONDS) and self.job_status(handle) == "PENDING":
                raise ClientError(
                    f"the Ray job {handle} still waits for the CPUs it asked for on the cluster '{self.cluster}', and "
                    "Ray does not stop a job before it places it (ray-project/ray#58353)",
                    hint="The run keeps the stop request: it stops at its first step once the cluster has the CPUs "
                    "for it (or Ray fails it after 15 minutes of waiting). 'tfcli experiment show' follows it.",
                )
        return self._ended_within(handle, timeout)

    def _ended_within(self, handle: Handle, seconds: float) -> bool:
        """Whether the job ends (or is gone) within ``seconds``."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            status = self.job_status(handle, fresh=True)  # a wait asks each time: one silent moment is not its end
            if status is None or status in ENDED:
                return True
            time.sleep(0.2)
        return False

    def outcome(self, handle: Handle | None, folder: Path) -> tuple[str, str | None] | None:
        status = self.job_status(handle)
        if status == "UNREACHABLE":  # the job ended (alive() saw it), but how is not to be had now
            raise ClientError(f"the Ray cluster '{self.cluster}' at {self.dashboard} did not answer just now")
        try:
            progress = json.loads(self.storage(folder).read_text("progress.json") or "{}")
        except ValueError:
            progress = {}
        state = progress.get("state")
        if status == "SUCCEEDED" and state in ("finished", "paused", "stopped"):
            return state, None
        if status == "STOPPED" and state in (None, "stopped") and self.requested(folder) == "stop":
            return (
                "stopped",
                None if state else "stopped before it started (its Ray job waited for the CPUs it asked for)",
            )
        tail = "\n".join(self.logs(handle, folder).strip().splitlines()[-8:])
        reason = f"the Ray job {handle} ended {status or 'unknown'}"
        return "failed", reason + (f"; its log ends:\n{tail}" if tail else "")

    def logs(self, handle: Handle | None, folder: Path) -> str:
        """The job's log (the worker's output), or the worker's log file in storage when the job is unknown."""
        if isinstance(handle, str):
            errors: tuple[type[BaseException], ...] = (ClientError, *_job_errors())
            try:
                return str(self.client.get_job_logs(handle))
            except errors:
                pass  # the job or the cluster is gone: the log file downloaded last stands in
        return super().logs(handle, folder)

    def download(self, folder: Path) -> Path:
        target = folder / "results"
        storage = self.storage(folder)
        if not storage.exists("") and not target.is_dir():
            raise ClientError(f"experiment '{folder.name}' has no results yet", hint="Start it first.")
        target.mkdir(parents=True, exist_ok=True)
        storage.download("", target, skip=(CONTROL,))
        return target

    def discard(self, folder: Path) -> None:
        self.storage(folder).remove("")
