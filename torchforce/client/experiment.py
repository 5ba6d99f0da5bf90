"""The Experiment of the 2018 client: create, start, pause, stop and download an experiment of a project
(docs/tensorforce-0.4.md, Client and experiment files).

The ``tfcli experiment ...`` commands are thin wrappers over this class, and scripts can use it directly::

    experiment = Experiment(name="cartpole", agent="ppo_cartpole", environment="cartpole", total_timesteps=50_000)
    experiment.generate_locally()
    experiment.start()

Every change of state goes through the project's state database with a compare-and-set on the status, so two
concurrent calls cannot both start (or both create) the same experiment.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from torchforce.client import queue, warm_start
from torchforce.client.backends import Backend, Handle, Launch, get_backend
from torchforce.client.backends.base import WORKSPACE
from torchforce.client.errors import ClientError, ClientWarning
from torchforce.client.experiment_file import (
    NULL_MEANS_SOMETHING,
    check_environment_id,
    check_name,
    check_stored,
    resolve_experiment,
)
from torchforce.client.monitor import check_monitors
from torchforce.client.project import Project, current_umask, write_bytes_atomically, write_json_atomically
from torchforce.client.queue import BEFORE, Queued
from torchforce.client.storage import Storage, refuse_links
from torchforce.client.store import ExperimentRecord
from torchforce.spec import SpecError, did_you_mean, expect_dict, load_file

SIGNAL_TIMEOUT = 120.0
# A worker whose row says running but has no PID yet is starting (its start call writes the PID in a moment): for
# this long it is not judged dead, so a status check during a start cannot mark a live worker failed.
ENDED = ("finished", "stopped", "failed")
EXITING_SECONDS = 10.0  # how long a worker that has written its end may take to exit before it counts as running
STARTING_SECONDS = 30.0


class TakenOver(Exception):
    """A start's claim on its row was taken over by another start (see ``Experiment._renew_claim``)."""


def _move(previous: ExperimentRecord, backend: Backend, cluster: str | None, resume: bool) -> tuple[bool, bool]:
    """Whether a start on ``backend``'s ``cluster`` moves the run from where it last ran, and whether a resume must
    carry its checkpoint along: not between clusters of a backend whose clusters share the results' folder (GKE's
    bucket), where they stay."""
    moved = (previous.backend, previous.cluster) != (backend.name, cluster)
    in_place = moved and previous.backend == backend.name and backend.shared_storage
    return moved, resume and moved and not in_place


class Experiment:
    """An experiment of ``project`` (default: the project around the current folder).

    Keyword arguments are the 2018 experiment fields: ``file`` (a spec file holding any of them),
    ``name``, ``environment``, ``agent``, ``network``, ``cluster``, ``episodes``, ``total_timesteps``,
    ``max_timesteps_per_episode``, ``deterministic``, ``repeat_actions``, ``debug_logging``, ``run_mode``,
    ``num_workers``, ``num_parameter_servers``, ``saver_frequency``, ``summary_frequency``; and ours: ``seed``,
    ``num_environments``, ``vectorization``, ``torch_threads``, ``worker_timeout``, ``description``. Values given
    here override the file's.
    """

    _created_own_cluster: str | None = None  # the GKE cluster the current start created for it
    _spawned = False  # whether the current start has launched its workload
    _resuming_in_place = False  # a resume where the run ran last is under way: its own GKE cluster stays for it

    def __init__(self, project: Project | None = None, **kwargs: Any) -> None:
        self.project = project or Project.find()
        file = kwargs.pop("file", None)
        raw: dict[str, Any] = {}
        self.file = None
        if file is not None:
            path = self.project.find_config(str(file), "experiments", "experiment.file")
            try:
                raw = dict(expect_dict(load_file(path), "experiment"))
            except SpecError as error:
                raise error.with_file(str(path)) from None
            self.file = str(path)
        if kwargs.get("total_timesteps") is not None:
            raw.pop("timesteps", None)  # a flag overrides the file's 2018 'timesteps' too
        # None is "not given", except where null says something (worker_timeout: no timeout)
        raw.update({key: value for key, value in kwargs.items() if value is not None or key in NULL_MEANS_SOMETHING})
        self.raw = raw
        self.spec: dict[str, Any] | None = None
        if raw.get("name") is not None:
            check_name(raw["name"])

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

    @classmethod
    def load(cls, project: Project, name: str, *, damaged: bool = False) -> Experiment:
        """The existing experiment ``name`` of ``project``. Its stored spec is checked again (a person may have
        edited it). With ``damaged``, an experiment whose folder is gone or whose spec is broken is still
        returned (with ``spec`` None), so that it can be deleted."""
        folder = project.experiment_folder(name)
        spec_file = folder / "experiment.json"
        shown = spec_file.relative_to(project.root)
        record = project.store.experiment(name)
        if record is None:
            from torchforce.client.groups import memberships  # (groups are made of experiments)

            runs = memberships(project).get(name)
            if runs:  # a command that takes a group found it before; this one takes one run
                raise ClientError(
                    f"'{name}' is a group of {len(runs)} run{'s' * (len(runs) != 1)}, and this takes one experiment",
                    hint=f"Give one of its runs: {', '.join(runs)}.",
                )
            known = [r.name for r in project.store.experiments()]
            guess = did_you_mean(name, known)
            unregistered = f"{folder.relative_to(project.root)} exists, but the project's state database lacks it. "
            raise ClientError(
                f"no experiment named '{name}' in project '{project.name}'",
                hint=(unregistered + "Move that folder away to reuse the name. " if spec_file.is_file() else "")
                + (f"Did you mean '{guess}'? " if guess else "")
                + ("Known: " + ", ".join(known) + "." if known else "Create one with 'tfcli experiment new'."),
            )
        experiment = cls.__new__(cls)
        experiment.project, experiment.file = project, str(spec_file)
        experiment.raw, experiment.spec = {"name": name}, None
        try:
            if not spec_file.is_file():
                raise ClientError(
                    f"the folder of experiment '{name}' is missing: no {shown}",
                    hint=f"Restore it, or remove the experiment with 'tfcli experiment delete -e {name}'.",
                )
            experiment.spec = check_stored(project, spec_file, name)
        except (ClientError, SpecError):
            if damaged:
                return experiment
            raise
        experiment.raw = dict(experiment.spec)
        return experiment

    # ------------------------------------------------------------------ creating

    def validate(self) -> dict[str, Any]:
        """Resolve and check the whole spec (building environment and agent once); nothing is written."""
        if self.raw.get("name") is None:
            raise SpecError("experiment.name", "an experiment needs a name", hint="Give -n/--name NAME.")
        self.spec = resolve_experiment(self.project, self.raw)
        return self.spec

    def generate_locally(self, *, sweep: str | None = None) -> Path:
        """Validate, then create ``experiments/<name>/experiment.json`` and the state database row atomically:
        on any error nothing is left behind. A name that is taken is refused before the spec is built (seconds), and
        so is one of a sweep's trials' names (``<sweep>-t003-s0``), unless ``sweep`` names that sweep (its driver
        creates its trials' runs)."""
        if self.raw.get("name") is not None:
            check_name(self.raw["name"])
            self._check_name_is_free(sweep)
        spec = self.validate()
        from torchforce import __version__

        spec = {**spec, "created_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "torchforce_version": __version__}
        folder, store = self.folder, self.project.store
        self._check_name_is_free(sweep)
        staging = Path(tempfile.mkdtemp(dir=self.project.experiments_folder, prefix=f".{self.name}."))
        try:
            os.chmod(staging, 0o777 & ~current_umask())  # mkdtemp makes it private; an experiment folder is not
            if spec.get("warm_start") is not None:  # what it starts from travels with it (see warm_start.py)
                warm_start.copy_into(self.project, spec["warm_start"], staging)
            write_json_atomically(staging / "experiment.json", spec)
            try:  # the folder first: once the row exists, every reader finds the folder too
                os.rename(staging, folder)
            except OSError:
                raise ClientError(f"experiment '{self.name}' already exists ({folder})") from None
            try:
                store.add_experiment(self.name, cluster=(spec.get("cluster") or {}).get("name"))
            except BaseException as error:
                shutil.rmtree(folder, ignore_errors=True)
                if "UNIQUE" in str(error):
                    raise ClientError(f"experiment '{self.name}' already exists") from None
                raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        self.spec = spec
        return folder

    def _check_name_is_free(self, sweep: str | None = None) -> None:
        from torchforce.client.sweep import Sweep  # (sweep.py builds on this module)

        owner = Sweep.owner_of_name(self.project, self.name)
        if owner is not None and owner != sweep:
            raise ClientError(
                f"the name '{self.name}' is kept for sweep '{owner}': its driver names its trials' runs "
                f"{owner}-t000-s0, {owner}-t001-s0, ... (and their groups {owner}-t000, ...), and would meet this "
                "experiment there",
                hint="Pick another name.",
            )
        shown = self.folder.relative_to(self.project.root)
        registered = self.project.store.experiment(self.name) is not None
        if registered and not self.folder.exists():
            raise ClientError(
                f"experiment '{self.name}' already exists, though its folder {shown} is missing",
                hint=f"Remove it with 'tfcli experiment delete -e {self.name}', then create it again.",
            )
        if self.folder.exists():
            raise ClientError(
                f"experiment '{self.name}' already exists ({shown})",
                hint=f"Pick another name, or remove the old one with 'tfcli experiment delete -e {self.name}'."
                if registered
                else f"Pick another name, or move the folder {shown} away (the project does not know it).",
            )

    def write_json_file(self, file: str | Path | None = None) -> Path:
        """Write the resolved spec to ``file`` (default: the experiment's ``experiment.json``)."""
        spec = self.spec or self.validate()
        target = Path(file) if file is not None else self.folder / "experiment.json"
        write_json_atomically(target, spec)
        return target

    def setup_cluster(self, cluster: str | None = None, project_id: str | None = None, start: bool = False) -> Any:
        """The cluster spec this experiment would run on (``cluster``, else its spec's); with ``start``, a Ray
        cluster the project has not created yet is created."""
        from torchforce.client.cluster import cluster_from_spec, get_cluster_from_string

        spec = (self.spec or {}).get("cluster")
        found = get_cluster_from_string(cluster) if cluster else cluster_from_spec(spec) if spec else None
        if start and found is not None and self.project.store.cluster(found.name) is None:
            if getattr(found, "type", None) == "ray":
                found.create(self.project)
            else:
                found.create()
        return found

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

    def _target(
        self, cluster: str | None, record: ExperimentRecord, resume: bool, *, yes: bool = False
    ) -> tuple[str, str | None]:
        """Where a start runs: ``cluster`` ("local", or a cluster of the project), else the row's cluster when
        resuming, else the spec's cluster (a Ray one must have been created; a GKE one is created now if it is not,
        for this experiment, which deletes it when it ends: see ``_own_cluster_to_make``), else this machine."""
        from torchforce.client import ray_cluster

        spec_cluster = (self.spec or {}).get("cluster") or {}
        own = self._own_cluster_to_make(cluster, record, resume)
        if own is not None:
            self._create_own_cluster(own, yes=yes, again=resume)
        if cluster is None and resume:
            return record.backend, record.cluster
        if cluster is None and spec_cluster.get("type") == "ray":
            cluster = spec_cluster["name"]
            if self.project.store.cluster(cluster) is None:
                raise ClientError(
                    f"experiment '{self.name}' runs on the Ray cluster '{cluster}', which this project has not created",
                    hint=f"Create it with 'tfcli cluster create -f {cluster}', or run it here with "
                    f"'tfcli experiment start -e {self.name} -c local'.",
                )
        if cluster is None and spec_cluster.get("type", "gke") == "gke" and spec_cluster.get("name"):
            cluster = spec_cluster["name"]
        if cluster is None or cluster == "local":
            return "local", None
        found = ray_cluster.find(self.project, cluster)  # a clear error for a name that is no cluster of the project
        return ("gke" if found.spec.get("type") == "gke" else "ray"), cluster

    def _dry_start(self, cluster: str | None, record: ExperimentRecord, launch: Launch, fresh: bool = False) -> None:
        """What ``start`` would do on GKE, printed: the cluster it would create for itself, or the calls and the
        manifest of the run, in ``_run``'s order (``fresh``: the results discarded first, in the run's own bucket)."""
        from torchforce.client import gke
        from torchforce.client.backends.gke import GkeBackend
        from torchforce.client.cluster import Cluster

        spec = self.spec or self.validate()
        own = self._own_cluster_to_make(cluster, record, launch.resume)
        if own is not None:
            gke.create(self.project, Cluster(**{k: v for k, v in own.items() if k != "type"}), dry_run=True)
            how = "resume" if launch.resume else "start"
            print(
                f"then the run would {how} on it, as 'tfcli experiment start -e {self.name} -c {own['name']}"
                + (" --resume" if launch.resume else "")
                + "' does"
            )
            return
        where, cluster_name = self._target(cluster, record, launch.resume)
        if where != "gke" or cluster_name is None:
            raise ClientError(
                "--dry-run shows the cloud calls of a run on GKE; this run would be "
                + ("on this machine" if where == "local" else f"on the Ray cluster '{cluster_name}'"),
                hint="Give -c with a GKE cluster of the project.",
            )
        backend = GkeBackend(self.project, cluster_name, dry_run=True)
        backend.check(spec)
        moved, carry = _move(record, backend, cluster_name, launch.resume)
        if (moved or not launch.resume) and record.backend == "gke" and record.cluster and record.job:
            GkeBackend(self.project, record.cluster, dry_run=True).retire(record.job, self.folder)
        if fresh:
            backend.discard(self.folder)
        backend.start(self.folder, self.project.root, Launch(**{**launch.__dict__, "carry": carry}))

    def _own_cluster_to_make(
        self, cluster: str | None, record: ExperimentRecord, resume: bool
    ) -> dict[str, Any] | None:
        """The spec's GKE cluster (its values) that a start without -c creates for the experiment, where the project
        does not have it: at a start that does not resume; and at a resume of a run that last ran there (its own
        cluster, deleted when that run ended), made again in the zone it was in, wherever the link points now."""
        from torchforce.client.backends.gke import recorded_zone

        own = (self.spec or {}).get("cluster") or {}
        if cluster is not None or own.get("type", "gke") != "gke" or not own.get("name"):
            return None
        if self.project.store.cluster(own["name"]) is not None:
            return None
        if not resume:
            return own
        if (record.backend, record.cluster) != ("gke", own["name"]):
            return None  # it ran elsewhere since (-c): it resumes there
        return {**own, "location": own.get("location") or recorded_zone(self.folder, own["name"])}

    def _create_own_cluster(self, values: dict[str, Any], *, yes: bool, again: bool = False) -> None:
        """The experiment's own GKE cluster, as 2018's client made it: created on start, deleted when it ends;
        ``again``: made again for a resume, once the run it was made for has ended and it was deleted."""
        from torchforce.client import gke
        from torchforce.client.cluster import Cluster

        spec = Cluster(**{key: value for key, value in values.items() if key != "type"})
        try:
            gke.Link.of(self.project.settings)
        except ClientError as error:  # before anything else, and with the way to run it here instead
            raise ClientError(
                f"experiment '{self.name}' runs on the GKE cluster '{spec.name}', but {error.message}",
                hint=f"{error.hint} Or run it on this machine: 'tfcli experiment start -e {self.name} -c local'.",
            ) from None
        from torchforce.client.backends.gke import check_fits_before_creating

        check_fits_before_creating(self.project, spec, self.spec or self.validate())
        if again:
            print(
                f"Experiment '{self.name}' resumes on its own GKE cluster '{spec.name}', which was deleted when its "
                "run ended: created again now, as its first start made it, and deleted when it ends."
            )
        else:
            print(
                f"Experiment '{self.name}' runs on its own GKE cluster '{spec.name}', created now and deleted when it "
                "ends."
            )
        existed = self.project.store.cluster(spec.name) is not None
        try:
            gke.create(self.project, spec, yes=yes, owner=self.name)
        finally:  # made, if only in part (its GPU pool refused, say): it goes again if the start fails. Only if made
            # for this experiment: a start of another run racing this one may have made it first (and this create
            # failed as "exists already"), and its run would go with it
            made = self.project.store.cluster(spec.name)
            if not existed and made is not None and made.runtime.get("owner") == self.name:
                self._created_own_cluster = spec.name

    # ------------------------------------------------------------------ status

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
        if again is None or again.status != "running" or _handle(again) != _handle(record) or self._may_be_alive(again):
            return again or record
        try:
            outcome = self.backend(record).outcome(_handle(record), self.folder)
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
            self.backend(record).release(_handle(record), self.folder, keep_own_cluster=self._resuming_in_place)
        except ClientError as error:
            warnings.warn(
                f"experiment '{self.name}' ended, but cleaning up after it failed: {error}", ClientWarning, stacklevel=3
            )

    def _may_be_alive(self, record: ExperimentRecord) -> bool:
        handle = _handle(record)
        if handle is None:
            return time.time() - (record.started_at or 0.0) < STARTING_SECONDS
        try:
            return self.backend(record).alive(handle, self.folder)
        except ClientError:
            return True  # a cluster that cannot be asked (gone from the project): nothing is judged

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
            return self.backend(record).logs(_handle(record), self.folder) if record else ""
        except ClientError:
            return Storage(self.results).read_text("worker.log") or ""

    def stream_logs(self) -> bool:
        """Print the worker's log as it grows until the run ends, where the backend streams it (GKE); False
        when it does not (then ``logs`` is read again and again)."""
        record = self.project.store.experiment(self.name)
        if record is None:
            return False
        try:
            return self.backend(record).stream_logs(_handle(record), self.folder)
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

    # ------------------------------------------------------------------ lifecycle

    def start(
        self,
        project_id: str | None = None,
        resume: bool = False,
        cluster: str | None = None,
        fresh: bool = False,
        max_restarts: int = 0,
        trust_pickle: bool = False,
        yes: bool = False,
        dry_run: bool = False,
        budget: dict[str, int] | None = None,
    ) -> Handle | None:
        """Start the experiment (``resume``: continue from its latest checkpoint; ``fresh``: discard the results
        of an earlier run and start over) on ``cluster`` ("local", or a Ray cluster of the project; default: see
        ``_target``). ``max_restarts``: after a crash, resume from the last checkpoint up to this many times.
        ``trust_pickle``: resuming, unpickle the environments' state even if this user did not sign it (results
        from someone else: it runs whatever that file says). ``budget``: the run's new ``total_timesteps`` and/or
        ``episodes`` (with ``resume``: train longer, a finished run too), written to ``experiment.json`` once the
        start holds the run's slot (a queued start: when it leaves the queue), and put back if the launch fails.
        On this machine, a start beyond the project's limit of runs at once is queued (torchforce/client/queue.py):
        its status is ``queued`` and it starts by itself, as asked here, when its turn comes.
        Returns the workload's handle (a process id, or a Ray job's id); None when the run was queued (``place``
        tells where it stands) or for a dry run."""
        spec = self.spec or self.validate()
        check_monitors(spec["environment"])  # (a stored spec changed since it was made)
        # a resume where the run last ran: a run found ended just now keeps the cluster made for it, which the
        # resume would otherwise make again at once (minutes); released below where the start does not happen
        in_place = resume and cluster is None and not dry_run
        self._resuming_in_place = in_place
        try:
            record = self.record()
        finally:
            self._resuming_in_place = False
        try:
            return self._start(spec, record, resume, cluster, fresh, max_restarts, trust_pickle, yes, dry_run, budget)
        except BaseException:
            if in_place and not self._spawned and record.status in ENDED:
                self._release_own_cluster()  # (kept by the look above, for a start that did not happen)
            raise

    def _start(
        self,
        spec: dict[str, Any],
        record: ExperimentRecord,
        resume: bool,
        cluster: str | None,
        fresh: bool,
        max_restarts: int,
        trust_pickle: bool,
        yes: bool,
        dry_run: bool,
        budget: dict[str, int] | None,
    ) -> Handle | None:
        """``start`` with the run's row as it is now (``record``)."""
        self._spawned = False
        if max_restarts < 0:
            raise ClientError(f"--max-restarts must be 0 or more, got {max_restarts}")
        if record.status == "queued":
            raise ClientError(
                f"experiment '{self.name}' is already queued ({self.place_description()})",
                hint=f"It starts by itself when a run ends; 'tfcli experiment stop -e {self.name}' takes it out of "
                "the queue.",
            )
        if record.status == "running":
            raise ClientError(
                f"experiment '{self.name}' is already running"
                + (f" ({_describe(record)})" if _handle(record) is not None else " (its worker is starting)"),
                hint=f"Pause it with 'tfcli experiment pause -e {self.name}'.",
            )
        if resume and fresh:
            raise ClientError("--resume and --fresh contradict each other", hint="Give one of them.")
        check_environment_id(self.project, spec, self.name)
        if not dry_run:
            self._check_can_start(record, resume=resume, fresh=fresh, extending=bool(budget))
        extended = self._extended_spec(budget, resume=resume) if budget else None
        if dry_run:
            self._dry_start(
                cluster, record, Launch(resume=resume, max_restarts=max_restarts, trust_pickle=trust_pickle), fresh
            )
            return None
        if spec.get("warm_start") is not None and not resume and not (self.folder / warm_start.FILE_NAME).is_file():
            raise ClientError(
                f"experiment '{self.name}' starts warm (its spec's warm_start), but experiments/{self.name}/"
                f"{warm_start.FILE_NAME}, the checkpoint it starts from, is missing",
                hint="Create the experiment again with --warm-start, or take warm_start out of its experiment.json.",
            )
        self._created_own_cluster = None
        try:
            return self._launch(spec, record, cluster, resume, fresh, max_restarts, trust_pickle, yes, budget, extended)
        except BaseException:
            self._delete_own_cluster_after_a_failed_start()
            raise

    @contextlib.contextmanager
    def _budget_written(self, extended: dict[str, Any] | None) -> Iterator[None]:
        """Around the launch of a start that holds the run's claim (its row running, no workload yet): its new
        budget (``extended``, the spec with it; None: nothing to write) in ``experiment.json``, which the worker
        reads, here or uploaded to a cluster. Written only by the claim's holder, so that a concurrent start cannot
        launch on it or undo it; put back if the launch fails before its workload started."""
        if extended is None:
            yield
            return
        file = self.folder / "experiment.json"
        before = file.read_bytes()
        write_json_atomically(file, extended)
        self.spec = check_stored(self.project, file, self.name)
        try:
            yield
        except BaseException:
            if not self._spawned:
                write_bytes_atomically(file, before)
                self.spec = check_stored(self.project, file, self.name)
            raise

    def _extended_spec(
        self, budget: dict[str, int], *, resume: bool, record: ExperimentRecord | None = None
    ) -> dict[str, Any]:
        """The stored spec with the run's new ``budget`` (``total_timesteps`` and/or ``episodes``), checked as any
        spec; for a ``resume`` also against the latest checkpoint (where the run of ``record``, default the row, ran
        last): each new limit must lie beyond the counters the run goes on from, and a limit left as it was must not
        have been reached there (a run that ended on its episodes needs more of them, not only more timesteps).
        Nothing is written here."""
        from torchforce.client.sweep import Sweep

        flags = {"total_timesteps": "-t/--total-timesteps", "episodes": "--episodes"}
        owner = Sweep.owner_of_name(self.project, self.name)
        if owner is not None:
            raise ClientError(
                f"'{self.name}' is a run of a trial of sweep '{owner}', whose budget is the sweep's: its driver judges "
                "and compares the trials on it",
                hint=f"Resume it without {' or '.join(flags[key] for key in budget)}, or try a longer budget in a new "
                f"sweep (the sweep file's base experiment).",
            )
        stored = dict(expect_dict(load_file(self.folder / "experiment.json"), "experiment"))
        spec = {**stored, **budget}
        try:  # the same checks as any stored spec, the new budget's errors named as the field they set
            resolve_experiment(self.project, spec, build=False)
        except SpecError as error:
            raise ClientError(str(error)) from None
        if not resume:
            return spec
        try:
            latest = json.loads(self.storage(record).read_text("checkpoints/latest.json") or "null")
        except ValueError:
            latest = None
        counters = {key: latest.get(key) for key in ("timesteps", "episodes")} if isinstance(latest, dict) else {}
        if not all(isinstance(value, int) for value in counters.values()) or len(counters) < 2:
            raise ClientError(
                f"experiment '{self.name}' has no readable checkpoint to resume from",
                hint=f"Start it over with the new budget: 'tfcli experiment start -e {self.name} --fresh -t N'.",
            )
        for key, flag in flags.items():
            limit, reached = spec.get(key), counters["timesteps" if key == "total_timesteps" else "episodes"]
            if limit is None or limit > reached:
                continue
            unit = "timesteps" if key == "total_timesteps" else "episodes"
            if key in budget:
                raise ClientError(
                    f"{flag}: {limit:,} is no more than the {reached:,} {unit} of the latest checkpoint; expected "
                    f"more than {reached:,}",
                    hint=f"The run goes on from its latest checkpoint ({counters['timesteps']:,} timesteps, "
                    f"{counters['episodes']:,} episodes).",
                )
            raise ClientError(
                f"experiment '{self.name}' reached its budget of {limit:,} {unit} ({key}) at its latest checkpoint, "
                f"so a new {' and '.join(flags[given] for given in budget)} alone does not let it go on",
                hint=f"Give {flag} too, more than {reached:,}.",
            )
        return spec

    def _launch(
        self,
        spec: dict[str, Any],
        record: ExperimentRecord,
        cluster: str | None,
        resume: bool,
        fresh: bool,
        max_restarts: int,
        trust_pickle: bool,
        yes: bool,
        budget: dict[str, int] | None = None,
        extended: dict[str, Any] | None = None,
    ) -> Handle | None:
        """``start`` once the request is known to be sound: where it runs, the checks there, a slot (on this
        machine: or the queue, then None, the new ``budget`` kept with the queued start), the launch (with the spec
        of the new budget, ``extended``, written once the slot is this start's)."""
        where, cluster_name = self._target(cluster, record, resume, yes=yes)
        backend = get_backend(where, project=self.project, cluster=cluster_name)
        if spec["run_mode"] not in backend.supported_run_modes:
            raise ClientError(
                f"run mode '{spec['run_mode']}' is not available yet on the {backend.name} backend",
                hint="Use run_mode 'single' (with num_environments for vectorized environments) for now.",
            )
        try:
            previous = self.backend(record)
        except ClientError:
            previous = None  # its cluster is gone: nothing of it runs there any more
        if previous is not None:
            self._refuse_a_live_worker(record, previous)
        backend.check(spec)
        launch = Launch(resume=resume, max_restarts=max_restarts, trust_pickle=trust_pickle)
        started = time.time()  # this start's mark on the row: a start cut short takes back its own claim only
        try:
            if where == "local":
                choices = Queued(
                    resume, fresh, max_restarts, trust_pickle, queue.cpus_per_run(spec), budget=budget or {}
                )
                if queue.admit(self.project, self.name, record.status, choices, started) is not None:
                    return None  # queued: whoever frees a slot starts it (queue.promote)
            elif not self.project.store.update_experiment(
                self.name,
                expect=(record.status,),
                status="running",
                pid=None,
                job=None,
                backend=where,
                cluster=cluster_name,
                message=None,
                started_at=started,
                ended_at=None,
            ):
                raise ClientError(f"experiment '{self.name}' changed state meanwhile; try again")
            with self._budget_written(extended):
                return self._run(record, backend, cluster_name, fresh, launch)
        except BaseException:
            # cut (a Ctrl-C, an error) between the commit that took the slot and _run's own guard: the row, still
            # this start's with no workload, goes back (a row that moved on since is left as it is)
            self.project.store.update_experiment(
                self.name,
                expect=("running",),
                expect_values={"pid": None, "job": None, "started_at": started},
                **{key: getattr(record, key) for key in BEFORE},
            )
            raise

    def start_from_queue(self, choices: Queued, queued: ExperimentRecord | None = None) -> Handle:
        """Start the queued run whose slot ``queue.claim_next`` has just taken (its row says running, with no
        workload yet) as its start was asked for, from where ``start`` would go on. ``queued``: the row as it was
        in the queue, which a start cut short by a Ctrl-C puts back (the run keeps its place); a start that fails
        goes back to the row as it was before it was queued."""
        record = self.project.store.experiment(self.name)
        if record is None:
            raise ClientError(f"no experiment named '{self.name}'")
        previous = choices.previous(record)
        extending = bool(choices.budget)
        # checked again: its checkpoint may have gone since, and a new budget must still lie beyond it
        self._check_can_start(previous, resume=choices.resume, fresh=choices.fresh, extending=extending)
        # the checkpoint where the run last ran (a start with -c local brings it here only once it launches)
        extended = self._extended_spec(choices.budget, resume=choices.resume, record=previous) if extending else None
        launch = Launch(resume=choices.resume, max_restarts=choices.max_restarts, trust_pickle=choices.trust_pickle)
        self._spawned = False
        with self._budget_written(extended):
            return self._run(previous, get_backend("local"), None, choices.fresh, launch, requeue=queued)

    def _run(
        self,
        previous: ExperimentRecord,
        backend: Backend,
        cluster: str | None,
        fresh: bool,
        launch: Launch,
        *,
        requeue: ExperimentRecord | None = None,
    ) -> Handle:
        """Launch the worker of a start whose row says running already (its slot taken) and record its handle;
        ``previous`` is the row as it was before. A launch that fails or is cut short (Ctrl-C) puts the row back,
        its slot free (the local backend's start leaves no worker running when it raises), or, for a start from the
        queue cut short, ``requeue`` (the row in the queue: the run keeps its place); once the workload has its
        handle, the handle is recorded whatever cuts the start, so that no workload runs unknown."""
        handle = None
        claimed = self.project.store.experiment(self.name)  # this start's claim: its started_at tells it apart
        try:
            moved, carry = _move(previous, backend, cluster, launch.resume)
            # first what changes nothing if it fails: the checkpoint comes along to where it resumes; then what the
            # last run left on its cluster goes (a start that cannot remove it changes nothing either)
            if carry:
                self._bring_home(previous)
            if fresh or moved:
                self._retire(previous)
            if fresh:
                shutil.rmtree(self.results, ignore_errors=True)
                backend.discard(self.folder)
            self._renew_claim(claimed)
            handle = backend.start(self.folder, self.project.root, replace(launch, carry=carry))
            self._spawned = True
            self._record_handle(handle, backend)
            if moved:  # the run left the cluster it last ran on: one made for it is not needed any more
                self._release_own_cluster(unless_on=cluster)
        except TakenOver:
            raise ClientError(
                f"experiment '{self.name}' took more than {STARTING_SECONDS:.0f} s to start here (downloading or "
                "removing what its run needed), was judged dead meanwhile, and another start took it over: nothing "
                "was started here",
                hint=f"See 'tfcli experiment show -e {self.name}'.",
            ) from None
        except BaseException as error:
            if handle is None and requeue is not None and not isinstance(error, Exception):  # a Ctrl-C, not a failure
                columns = (*BEFORE, "queued_at", "launch")
                self.project.store.update_experiment(self.name, **{key: getattr(requeue, key) for key in columns})
            elif handle is None:
                self.project.store.update_experiment(self.name, **{key: getattr(previous, key) for key in BEFORE})
            else:
                self._record_handle(handle, backend)  # (a no-op where the first write got through)
            raise
        return handle

    def _renew_claim(self, claimed: ExperimentRecord | None) -> None:
        """Just before the worker is spawned, this start's claim (running, no PID yet) starts its grace period of
        STARTING_SECONDS again, so that what came before (a checkpoint downloaded, results removed) does not count
        against it; ``TakenOver`` when the claim is no longer this start's (judged dead meanwhile, and claimed by
        another start): two workers must never write into one folder."""
        started = None if claimed is None else claimed.started_at
        if not self.project.store.update_experiment(
            self.name,
            expect=("running",),
            expect_pid=None,
            expect_values={"job": None, "started_at": started},
            started_at=time.time(),
        ):
            raise TakenOver

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

    def _retire(self, previous: ExperimentRecord) -> None:
        """What the last run left on its cluster (a paused GKE run's suspended RayJob) goes before a start that
        does not continue it; for a paused run a ClientError when it cannot, before anything is discarded or
        started. A run that ended had its workload removed as it ended (``_release``): trying again is best effort,
        and a cluster that does not answer (the likely reason to move a failed run) only warns."""
        handle = _handle(previous)
        if handle is None or previous.backend == "local":
            return
        try:
            backend = self.backend(previous)
        except ClientError:
            return  # its cluster is gone, and what ran on it
        backend.retire(handle, self.folder, required=previous.status not in ENDED)

    def _delete_own_cluster_after_a_failed_start(self) -> None:
        """A GKE cluster this start created for the experiment goes again when the start fails after all (it
        would cost money, running nothing)."""
        name = getattr(self, "_created_own_cluster", None)
        if not name or self._spawned:  # its workload runs there already: it goes when that run ends
            return
        from torchforce.client import gke

        record = self.project.store.cluster(name)
        try:
            if record is not None:
                gke.delete(self.project, record, force=True, echo=lambda text: None)
        except ClientError as error:
            warnings.warn(
                f"the start failed, and deleting the cluster '{name}' made for it failed too: {error}; delete it "
                f"with 'tfcli cluster delete -c {name}'",
                ClientWarning,
                stacklevel=3,
            )

    def _bring_home(self, record: ExperimentRecord) -> None:
        """The results of the last run into ``results/``; from a cluster that is gone, those downloaded before. A
        GKE run's are in the bucket, which outlives its clusters: a download from there that fails is an error,
        never a reason to resume from an older copy here (which would then replace them)."""
        try:
            self.backend(record).download(self.folder)
        except ClientError as error:
            if record.backend == "gke":
                raise ClientError(
                    f"experiment '{self.name}' ran on the GKE cluster '{record.cluster}', and its results could not "
                    f"be brought here from the bucket to resume it elsewhere, so nothing was changed: {error.message}",
                    hint=f"Try again once the bucket answers ('tfcli experiment download -e {self.name}' brings them "
                    "here). On another GKE cluster (-c NAME) it resumes from the bucket, with no download.",
                ) from None
            if not (self.results / "checkpoints" / "latest.json").is_file():
                raise ClientError(
                    f"experiment '{self.name}' ran on the cluster '{record.cluster}', which is gone, and no checkpoint "
                    "of it was downloaded",
                    hint=f"Start it afresh with 'tfcli experiment start -e {self.name} --fresh'.",
                ) from None

    def _check_can_start(self, record: ExperimentRecord, *, resume: bool, fresh: bool, extending: bool = False) -> None:
        if resume and fresh:
            raise ClientError("--resume and --fresh contradict each other", hint="Give one of them.")
        refuse_links(self.folder, f"experiment '{self.name}'", skip=(WORKSPACE,))
        if resume:
            if record.status == "finished" and not extending:
                raise ClientError(
                    f"experiment '{self.name}' has finished; there is nothing to resume",
                    hint=f"Train it longer with 'tfcli experiment start -e {self.name} --resume -t N' (N: the new "
                    f"total), or run it again from the start with 'tfcli experiment start -e {self.name} --fresh'.",
                )
            if not self.has_checkpoint(record):
                raise ClientError(
                    f"experiment '{self.name}' has no checkpoint to resume from",
                    hint=f"Start it without --resume: 'tfcli experiment start -e {self.name}'."
                    if record.status == "new"
                    else f"Start it afresh with 'tfcli experiment start -e {self.name} --fresh'.",
                )
        elif record.status != "new" and not fresh:
            resumable = record.status != "finished" and self.has_checkpoint(record)
            raise ClientError(
                f"experiment '{self.name}' has already run (status: {record.status})",
                hint="Use --resume to continue from its last checkpoint, or --fresh to start over."
                if resumable
                else "Use --fresh to start over (its results are discarded).",
            )

    def _refuse_a_live_worker(self, record: ExperimentRecord, backend: Any) -> None:
        """No second worker on the same results (nor --fresh deleting them under one), whatever the status says."""
        local = record.backend == "local"
        for pid in dict.fromkeys((_handle(record), self.progress().get("pid") if local else None)):
            if pid and backend.alive(pid, self.folder) and not self._exits_soon(record, pid, backend):
                raise ClientError(
                    f"a worker of experiment '{self.name}' is still running (PID {pid}), though its status is "
                    f"'{record.status}'",
                    hint=f"Wait for it to end, or end it with 'kill {pid}'.",
                )

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

    def _ended_by_its_progress(self, record: ExperimentRecord) -> tuple[str, None] | None:
        """How a local run ended by its progress file, when its worker wrote a final state there during this run
        (after the run's start) but never reached the database (a busy or failing write, a kill right after): the
        run finished, paused or stopped, not died."""
        progress = self.progress()
        state, written = progress.get("state"), progress.get("updated_at")
        if state not in ("finished", "paused", "stopped") or not isinstance(written, (int, float)):
            return None
        return (state, None) if record.started_at is not None and written >= record.started_at else None

    def _refuse_a_local_live_worker(self, record: ExperimentRecord) -> None:
        """``_refuse_a_live_worker`` for a run on this machine whose row says it is not running (a worker whose
        supervisor was killed, say). A cluster's workload is asked of the cluster while the row says running, and
        a cluster that is gone must not keep a row from being stopped or deleted."""
        if record.backend == "local":
            self._refuse_a_live_worker(record, self.backend(record))

    def _record_handle(self, handle: Handle, backend: Backend) -> None:
        """Write the new workload's handle (a PID, or a job id), checked: only onto this start's row (running, no
        handle yet)."""
        store = self.project.store
        column = {"pid": handle} if isinstance(handle, int) else {"job": handle}
        if store.update_experiment(self.name, expect=("running",), expect_pid=None, **column):
            return
        current = store.experiment(self.name)
        if current is not None and current.status == "failed" and backend.alive(handle, self.folder):
            # judged dead while it started (a start slower than STARTING_SECONDS): it is not
            store.update_experiment(
                self.name, expect=("failed",), status="running", message=None, ended_at=None, **column
            )
        # otherwise the worker has ended already and written its own status: that stands

    def _running_record(self, request: str) -> ExperimentRecord:
        """The row of a running experiment, once its worker's PID is known (it may be starting)."""
        deadline = time.monotonic() + STARTING_SECONDS
        while True:
            record = self.record()
            if record.status != "running":
                raise ClientError(f"experiment '{self.name}' is not running (status: {record.status})")
            if _handle(record) is not None:
                return record
            if time.monotonic() > deadline:
                raise ClientError(f"the worker of '{self.name}' has not started; cannot {request} it")
            time.sleep(0.05)

    def _signal(self, request: str) -> ExperimentRecord:
        """Ask the running worker to pause or stop; the row afterwards, which must say so."""
        record = self._running_record(request)
        handle = _handle(record)
        if handle is None:  # _running_record waits for the handle
            raise ClientError(f"the worker of '{self.name}' has not started; cannot {request} it")
        backend = self.backend(record)
        if not backend.signal(handle, request, SIGNAL_TIMEOUT, self.folder):
            raise ClientError(
                f"the worker of '{self.name}' ({_describe(record)}) did not {request} within {SIGNAL_TIMEOUT:.0f} s",
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


def refuse_busy(runs: Sequence[Experiment], *, whole: str, stop_first: str) -> None:
    """A ClientError naming the runs of ``whole`` that run or are queued, if any: nothing of it may go yet."""
    busy = [f"{run.name} ({status})" for run in runs if (status := run.record().status) in ("running", "queued")]
    if busy:
        message = f"{whole} has runs that are not over: {', '.join(busy)}; nothing was deleted"
        raise ClientError(message, hint=stop_first)


def delete_runs(
    runs: Sequence[Experiment],
    *,
    whole: str,
    stop_first: str,
    again: str,
    delete: Callable[[Experiment], object] = Experiment.delete,
) -> list[str]:
    """Delete the runs of ``whole`` (``group 'g'``, ``sweep 's'``) as one: none while one of them runs or is queued
    (``stop_first`` says how to stop them), else one after the other with ``delete``. A run that cannot be deleted
    stops there, and the error names the runs deleted before it and how to delete the rest (``again``). Returns the
    names of the runs deleted."""
    refuse_busy(runs, whole=whole, stop_first=stop_first)
    deleted: list[str] = []
    for run in runs:
        try:
            delete(run)
        except ClientError as error:  # (it changed state since the check above): say what went and what stays
            raise ClientError(
                f"{whole}: run '{run.name}' was not deleted: {error.message}",
                hint=("Deleted before it: " + ", ".join(deleted) + ". " if deleted else "") + again,
            ) from None
        deleted.append(run.name)
    return deleted


def _handle(record: ExperimentRecord) -> Handle | None:
    """The running workload's handle: its PID, or its Ray job's id."""
    return record.pid if record.pid is not None else record.job


def _describe(record: ExperimentRecord) -> str:
    return f"PID {record.pid}" if record.pid is not None else f"Ray job {record.job} on '{record.cluster}'"


def get_experiment_from_string(experiment: str, running: bool = False, project: Project | None = None) -> Experiment:
    """An experiment by name (an existing one of the project), or a new one from a spec file."""
    project = project or Project.find()
    if project.store.experiment(experiment) is not None:
        found = Experiment.load(project, experiment)
        if running and found.record().status != "running":
            raise ClientError(f"experiment '{experiment}' is not running")
        return found
    if Path(experiment).suffix in (".json", ".yaml", ".yml") or Path(experiment).exists():
        return Experiment(project, file=experiment)
    return Experiment.load(project, experiment)  # raises the did-you-mean error


def get_local_experiments(as_objects: bool = False, project: Project | None = None) -> list[Any]:
    """The names (or Experiment objects) of the project's experiments, oldest first."""
    project = project or Project.find()
    names = [record.name for record in project.store.experiments()]
    return [Experiment.load(project, name) for name in names] if as_objects else names
