"""Pausing, stopping, downloading and deleting an experiment: a running worker is asked (a signal here, a control
file on a cluster) and must answer within SIGNAL_TIMEOUT, checkpointing first; a queued run leaves the queue instead;
a delete removes the row and the folder as one.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from torchforce.client import queue
from torchforce.client.errors import ClientError
from torchforce.client.experiment_state import STARTING_SECONDS, ExperimentState, describe, handle_of
from torchforce.client.queue import Queued
from torchforce.client.store import ExperimentRecord

SIGNAL_TIMEOUT = 120.0


class Controls(ExperimentState):
    """What is done to a run once it is started: ``pause``, ``stop``, ``download``, ``delete``."""

    def pause(self, project_id: str | None = None) -> ExperimentRecord:
        """Checkpoint the running experiment and end its worker; ``start(resume=True)`` continues it. A run that
        has not started (queued here, or its Ray job waiting for CPUs) has nothing to pause: a ClientError."""
        record = self.reconciled()
        if record.status == "queued":
            raise ClientError(
                f"experiment '{self.name}' is queued ({self.place_description()}), not running: there is nothing "
                "to pause",
                hint=f"It starts by itself when a run ends; 'tfcli experiment stop -e {self.name}' takes it out of "
                "the queue.",
            )
        if self.waiting_for_cluster(record):
            raise ClientError(
                f"experiment '{self.name}' has not started: its Ray job {record.job} waits for the CPUs it asked for "
                f"on the cluster '{record.cluster}', so there is nothing to pause",
                hint=f"It starts when the cluster has them; after 'tfcli experiment stop -e {self.name}' it stops at "
                "its first step.",
            )
        return self._signal("pause")

    def stop(self, no_download: bool = False) -> ExperimentRecord:
        """End the experiment for good (a running worker checkpoints first); download its results unless
        ``no_download`` (locally they are in place already). A queued run leaves the queue instead, back to the
        status it had before it was queued (nothing of it ran, and ``--fresh`` has discarded nothing yet)."""
        record = self.reconciled()
        if record.status == "queued":
            left = queue.leave(self.project, self.name)
            if left is not None:
                return left
            record = self.reconciled()  # it has started meanwhile: it stops as a running run does
        if record.status in ("stopped", "finished"):
            raise ClientError(f"experiment '{self.name}' is already {record.status}")
        if record.status == "new":
            raise ClientError(
                f"experiment '{self.name}' has not been started; there is nothing to stop",
                hint=f"Remove it with 'tfcli experiment delete -e {self.name}' if it is not wanted.",
            )
        if record.status == "running":
            record = self._signal("stop")
        else:
            self._refuse_a_local_live_worker(record)  # not a row marked stopped over a worker it lost
            if not self.project.store.update_experiment(
                self.name, expect=(record.status,), status="stopped", pid=None, ended_at=time.time()
            ):
                raise ClientError(f"experiment '{self.name}' changed state meanwhile; try again")
            self._release(record)  # a paused run's suspended RayJob, and the experiment's own cluster
        if not no_download:
            try:
                if self.results.is_dir() or self.storage().exists(""):
                    self.download()
            except ClientError as error:
                raise ClientError(
                    f"experiment '{self.name}' is stopped, but its results could not be downloaded: {error.message}",
                    hint=f"Download them with 'tfcli experiment download -e {self.name}' once that works.",
                ) from None
        return self.record()

    def download(self) -> Path:
        """The experiment's results (checkpoints, TensorBoard summaries, episode log) in ``results/``."""
        record = self.record()
        return self.backend(record).download(self.folder)

    def delete(self) -> None:
        """Remove an experiment that is not running: its row and its folder (if it still has one).

        The folder is renamed aside first (``experiments/.NAME.deleting-*``), then the row is removed, then the
        renamed folder: if removing the row fails (the database is busy, a start came first), the folder is put
        back, so the experiment is either whole or gone, and deleting it again is always possible. A queued run
        leaves the queue with its row (unless it has started meanwhile: then it is running, and stays)."""
        record = self.reconciled()
        if record.status == "running":
            raise ClientError(f"experiment '{self.name}' is running", hint="Stop it first.")
        self._refuse_a_local_live_worker(record)  # its folder is not removed under a worker the row lost
        before = Queued.of(record).previous(record) if record.status == "queued" else record
        if before.status == "paused":
            self._release(before)  # a paused GKE run's suspended RayJob, and the cluster it made for itself
        else:
            self._release_own_cluster()  # kept where its cleanup at the run's end failed
        aside = self.folder.with_name(f".{self.name}.deleting-{os.urandom(4).hex()}")
        if self.folder.is_dir():
            os.rename(self.folder, aside)
        try:
            removed = self.project.store.remove_experiment(self.name, expect=(record.status,))
            if not removed and self.project.store.experiment(self.name) is not None:
                raise ClientError(f"experiment '{self.name}' changed state meanwhile; try again")
        except BaseException:
            if aside.is_dir():
                os.rename(aside, self.folder)
            raise
        shutil.rmtree(aside, ignore_errors=True)

    def _running_record(self, request: str) -> ExperimentRecord:
        """The row of a running experiment, once its worker's PID is known (it may be starting)."""
        deadline = time.monotonic() + STARTING_SECONDS
        while True:
            record = self.record()
            if record.status != "running":
                raise ClientError(f"experiment '{self.name}' is not running (status: {record.status})")
            if handle_of(record) is not None:
                return record
            if time.monotonic() > deadline:
                raise ClientError(f"the worker of '{self.name}' has not started; cannot {request} it")
            time.sleep(0.05)

    def _signal(self, request: str) -> ExperimentRecord:
        """Ask the running worker to pause or stop; the row afterwards, which must say so."""
        record = self._running_record(request)
        handle = handle_of(record)
        if handle is None:  # _running_record waits for the handle
            raise ClientError(f"the worker of '{self.name}' has not started; cannot {request} it")
        backend = self.backend(record)
        if not backend.signal(handle, request, SIGNAL_TIMEOUT, self.folder):
            raise ClientError(
                f"the worker of '{self.name}' ({describe(record)}) did not {request} within {SIGNAL_TIMEOUT:.0f} s",
                hint=f"See its log with 'tfcli experiment logs -e {self.name}'." + self._late_signal_hint(request),
            )
        after = self.record()
        wanted = {"pause": "paused", "stop": "stopped"}[request]
        if after.status == wanted:
            return after
        if after.status == "finished":
            raise ClientError(f"experiment '{self.name}' finished before it could {request}")
        reason = (after.message or "").splitlines()[0] if after.message else ""
        raise ClientError(
            f"experiment '{self.name}' did not {request}: it is {after.status}" + (f" ({reason})" if reason else ""),
            hint=f"See its log with 'tfcli experiment logs -e {self.name}'.",
        )

    def _late_signal_hint(self, request: str) -> str:
        """What a pause or stop that the worker did not answer in time may still do: a distributed run answers once
        a hung Ray worker has been replaced (up to its worker_timeout)."""
        if (self.spec or {}).get("run_mode") != "distributed":
            return ""
        again = " (on GKE its RayJob is suspended only by a 'pause' given again then)" if request == "pause" else ""
        return (
            " A distributed run waits for a hung Ray worker to be replaced (its worker_timeout) before it checkpoints: "
            f"it may still {request}{again}."
        )
