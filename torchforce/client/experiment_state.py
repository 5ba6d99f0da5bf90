"""An experiment as it stands: its folder and checked spec, its row in the project's state database reconciled with
what runs (a worker that died reads failed), where its results are, its worker's progress and log, and the checks
that keep a second worker from ever writing into its folder.

``Experiment`` (client/experiment.py) is built on it, with the start (client/experiment_start.py, where it runs:
client/experiment_placement.py) and the controls of a run (client/experiment_control.py).
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path
from typing import Any

from torchforce.client import queue
from torchforce.client.backends import Backend, Handle, get_backend
from torchforce.client.errors import ClientError, ClientWarning
from torchforce.client.experiment_file import resolve_experiment
from torchforce.client.project import Project
from torchforce.client.storage import Storage
from torchforce.client.store import ExperimentRecord
from torchforce.spec import SpecError

ENDED = ("finished", "stopped", "failed")
EXITING_SECONDS = 10.0  # how long a worker that has written its end may take to exit before it counts as running
# A worker whose row says running but has no PID yet is starting (its start call writes the PID in a moment): for
# this long it is not judged dead, so a status check during a start cannot mark a live worker failed.
STARTING_SECONDS = 30.0


class ExperimentState:
    """What every part of an ``Experiment`` reads: its project, spec and folder, its row as it really is, its
    results, progress and log; and the lifecycle's own marks, which a start sets and the status checks read."""

    project: Project
    file: str | None
    raw: dict[str, Any]
    spec: dict[str, Any] | None
    _created_own_cluster: str | None = None  # the GKE cluster the current start created for it
    _spawned = False  # whether the current start has launched its workload
    _resuming_in_place = False  # a resume where the run ran last is under way: its own GKE cluster stays for it

    @property
    def name(self) -> str:
        return str((self.spec or self.raw).get("name"))

    @property
    def checked_spec(self) -> dict[str, Any]:
        """The resolved and checked spec; a ClientError for an experiment loaded ``damaged`` (its spec None)."""
        if self.spec is None:
            raise ClientError(
                f"experiment '{self.name}' has no valid spec",
                hint=f"Delete it with 'tfcli experiment delete -e {self.name}'.",
            )
        return self.spec

    @property
    def folder(self) -> Path:
        return self.project.experiment_folder(self.name)

    @property
    def results(self) -> Path:
        return self.folder / "results"

    def validate(self) -> dict[str, Any]:
        """Resolve and check the whole spec (building environment and agent once); nothing is written."""
        if self.raw.get("name") is None:
            raise SpecError("experiment.name", "an experiment needs a name", hint="Give -n/--name NAME.")
        self.spec = resolve_experiment(self.project, self.raw)
        return self.spec

    def backend(self, record: ExperimentRecord | None = None) -> Backend:
        """The backend the experiment runs (or last ran) on."""
        record = record or self.project.store.experiment(self.name)
        if record is None:
            raise ClientError(f"no experiment named '{self.name}'")
        return get_backend(record.backend, project=self.project, cluster=record.cluster)

    def storage(self, record: ExperimentRecord | None = None) -> Storage:
        """Where the experiment's worker writes its results (its ``results/`` folder unless it runs on a cluster);
        ``record``: where the run that row describes wrote them (default: the current row's). A cluster that is
        gone leaves the results downloaded last."""
        record = record or self.project.store.experiment(self.name)
        if record is None or record.backend == "local":
            return Storage(self.results)
        try:
            return self.backend(record).storage(self.folder)
        except ClientError:
            return Storage(self.results)

    def record(self) -> ExperimentRecord:
        """The state database's row, reconciled with reality: a worker that died shows as failed. A worker that is
        still starting (``running`` with no PID yet, for STARTING_SECONDS) is never judged dead. When slots are
        free, queued runs start first (``queue.promote``: this one among them, perhaps)."""
        record = self.reconciled()
        if queue.promote(self.project):
            record = self.project.store.experiment(self.name) or record
        return record

    def place(self) -> queue.Place | None:
        """Where the experiment stands in its project's queue for this machine (None when it is not queued)."""
        return queue.place(self.project, self.name)

    def place_description(self) -> str:
        """``place`` in words, for messages."""
        place = self.place()
        return place.describe() if place is not None else "it has just left the queue"

    def reconciled(self) -> ExperimentRecord:
        """``record`` without moving the queue on: what stop, pause and delete act on, and what a cluster's delete
        judges its runs by (``cluster.runs_on``)."""
        store = self.project.store
        record = store.experiment(self.name)
        if record is None:
            raise ClientError(f"no experiment named '{self.name}'")
        if record.status != "running" or self._may_be_alive(record):
            return record
        time.sleep(0.2)  # a worker that just exited may be writing its own final status
        again = store.experiment(self.name)
        if (
            again is None
            or again.status != "running"
            or handle_of(again) != handle_of(record)
            or self._may_be_alive(again)
        ):
            return again or record
        try:
            outcome = self.backend(record).outcome(handle_of(record), self.folder)
        except ClientError:
            return record  # a cluster that cannot be asked just now: nothing is judged, the next look decides
        if outcome is None and record.backend == "local":
            outcome = self._ended_by_its_progress(record)
        if outcome is None:
            tail = self.log_tail()
            outcome = "failed", "the worker died" + (f"; its log ends:\n{tail}" if tail else "")
        status, message = outcome
        # only if nothing changed meanwhile (a starting call may just have written the PID)
        store.update_experiment(
            self.name,
            expect=("running",),
            expect_pid=record.pid,
            status=status,
            pid=None,
            message=message,
            ended_at=None if status == "paused" else time.time(),
        )
        after = store.experiment(self.name) or record
        if after.status in ENDED:
            self._release(record)
        return after

    def _release(self, record: ExperimentRecord) -> None:
        """What the ended run leaves on its cluster goes (a GKE RayJob, the experiment's own GKE cluster). Best
        effort: a cluster that does not answer keeps it, and 'tfcli cluster list' still shows the cluster."""
        try:
            self.backend(record).release(handle_of(record), self.folder, keep_own_cluster=self._resuming_in_place)
        except ClientError as error:
            warnings.warn(
                f"experiment '{self.name}' ended, but cleaning up after it failed: {error}", ClientWarning, stacklevel=3
            )

    def _may_be_alive(self, record: ExperimentRecord) -> bool:
        handle = handle_of(record)
        if handle is None:
            return time.time() - (record.started_at or 0.0) < STARTING_SECONDS
        try:
            backend = self.backend(record)
            if backend.alive(handle, self.folder):
                return True
        except ClientError:
            return True  # a cluster that cannot be asked (gone from the project): nothing is judged
        # a supervised local run's worker (the PID its progress file names) outlives its supervisor for as long as
        # it takes to checkpoint and stop (signals.stop_with_the_supervisor): until then the run is not over
        return record.backend == "local" and backend.alive(self.progress().get("pid"), self.folder)

    def _ended_by_its_progress(self, record: ExperimentRecord) -> tuple[str, None] | None:
        """How a local run ended by its progress file, when its worker wrote a final state there during this run
        (after the run's start) but never reached the database (a busy or failing write, a kill right after): the
        run finished, paused or stopped, not died."""
        progress = self.progress()
        state, written = progress.get("state"), progress.get("updated_at")
        if state not in ("finished", "paused", "stopped") or not isinstance(written, (int, float)):
            return None
        return (state, None) if record.started_at is not None and written >= record.started_at else None

    def progress(self) -> dict[str, Any]:
        """The worker's progress file, {} when there is none, it is damaged, or it cannot be read just now (a
        bucket gcloud fails to read): what is shown, never what a run is judged on (see ``outcome``)."""
        try:
            progress = json.loads(self.storage().read_text("progress.json") or "{}")
        except (ValueError, RecursionError):  # damaged: not JSON, not UTF-8, or nested past the parser's depth
            return {}
        except ClientError:
            return {}
        return progress if isinstance(progress, dict) else {}

    def episode_log(self) -> Path:
        """The episode log to read: where the worker writes it, when that is on this machine, else the one
        downloaded last."""
        local = self.storage().local
        return (local if local is not None else self.results) / "episodes.jsonl"

    def logs(self) -> str:
        """The worker's log so far (a Ray job's log on a Ray cluster)."""
        record = self.project.store.experiment(self.name)
        try:
            return self.backend(record).logs(handle_of(record), self.folder) if record else ""
        except ClientError:
            return Storage(self.results).read_text("worker.log") or ""

    def stream_logs(self) -> bool:
        """Print the worker's log as it grows until the run ends, where the backend streams it (GKE); False
        when it does not (then ``logs`` is read again and again)."""
        record = self.project.store.experiment(self.name)
        if record is None:
            return False
        try:
            return self.backend(record).stream_logs(handle_of(record), self.folder)
        except ClientError:
            return False

    def log_tail(self, lines: int = 8) -> str:
        return "\n".join(self.logs().strip().splitlines()[-lines:])

    def has_checkpoint(self, record: ExperimentRecord | None = None) -> bool:
        """Whether the run has a checkpoint to resume from; a ClientError when its storage cannot be asked just
        now (a start must not be told to begin afresh, discarding the results, because gcloud failed)."""
        return self.storage(record).exists("checkpoints/latest.json")

    def checkpoint_timesteps(self) -> int:
        """The timestep of the latest checkpoint (0 when there is none, or it cannot be read just now): where a
        resumed run goes on from, as messages show it."""
        try:
            return int(json.loads(self.storage().read_text("checkpoints/latest.json") or "")["timesteps"])
        except (ValueError, KeyError, TypeError, ClientError):
            return 0

    def waiting_for_cluster(self, record: ExperimentRecord | None = None) -> bool:
        """Whether the run waits on its Ray cluster for the CPUs it asked for (its Ray job is PENDING): Ray starts
        it once they are free. (On GKE the same wait is a RayJob whose pods are Pending.)"""
        record = record or self.project.store.experiment(self.name)
        if record is None or record.status != "running" or record.backend != "ray" or record.job is None:
            return False
        from torchforce.client.backends.ray import RayBackend

        try:
            backend = self.backend(record)
        except ClientError:
            return False  # its cluster is gone from the project
        return isinstance(backend, RayBackend) and backend.job_status(record.job) == "PENDING"

    def _refuse_a_live_worker(self, record: ExperimentRecord, backend: Any) -> None:
        """No second worker on the same results (nor --fresh deleting them under one), whatever the status says."""
        local = record.backend == "local"
        for pid in dict.fromkeys((handle_of(record), self.progress().get("pid") if local else None)):
            if pid and backend.alive(pid, self.folder) and not self._exits_soon(record, pid, backend):
                raise ClientError(
                    f"a worker of experiment '{self.name}' is still running (PID {pid}), though its status is "
                    f"'{record.status}'",
                    hint=f"Wait for it to end, or end it with 'kill {pid}'.",
                )

    def _refuse_a_local_live_worker(self, record: ExperimentRecord) -> None:
        """``_refuse_a_live_worker`` for a run on this machine whose row says it is not running (a worker whose
        supervisor was killed, say). A cluster's workload is asked of the cluster while the row says running, and
        a cluster that is gone must not keep a row from being stopped or deleted."""
        if record.backend == "local":
            self._refuse_a_live_worker(record, self.backend(record))

    def _exits_soon(self, record: ExperimentRecord, pid: Any, backend: Any) -> bool:
        """Whether the worker ``pid`` of a run whose status is one its worker writes as it ends (finished, stopped,
        paused; not failed, which a lost worker is given) exits within ``EXITING_SECONDS``: it writes that status,
        then closes its environments and its interpreter, which takes a moment on a busy machine ('tfcli experiment
        delete' right after 'watch' said finished)."""
        if record.status not in ("finished", "stopped", "paused"):
            return False
        deadline = time.monotonic() + EXITING_SECONDS
        while backend.alive(pid, self.folder):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def _release_own_cluster(self, unless_on: str | None = None) -> None:
        """The GKE cluster made for this experiment goes, unless the run now starts there (``unless_on``). A failure
        warns (the cluster stays listed: ``tfcli cluster delete`` removes it)."""
        from torchforce.client.backends.gke import release_own_cluster

        try:
            release_own_cluster(self.project, self.name, unless_on=unless_on)
        except ClientError as error:
            warnings.warn(
                f"the GKE cluster made for experiment '{self.name}' could not be deleted: {error}",
                ClientWarning,
                stacklevel=3,
            )


def handle_of(record: ExperimentRecord) -> Handle | None:
    """The running workload's handle: its PID, or its Ray job's id."""
    return record.pid if record.pid is not None else record.job


def describe(record: ExperimentRecord) -> str:
    return f"PID {record.pid}" if record.pid is not None else f"Ray job {record.job} on '{record.cluster}'"
