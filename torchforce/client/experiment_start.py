"""Starting an experiment: the checks that the request is sound (nothing runs twice, a resume has its checkpoint, a
new budget lies beyond it), then a slot (on this machine: the queue's), then the launch, with every step undone that a
failure or a Ctrl-C leaves half done: the row goes back, a new budget in ``experiment.json`` is put back, a cluster
made for the start goes again. Once a workload has its handle, the handle is recorded whatever happens next, so that
nothing ever runs unknown.

Every change of state is a compare-and-set on the row's status in the project's state database, so two concurrent
starts cannot both launch.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from torchforce.client import queue, warm_start
from torchforce.client.backends import Backend, Handle, Launch, get_backend
from torchforce.client.backends.base import WORKSPACE
from torchforce.client.errors import ClientError
from torchforce.client.experiment_file import check_environment_id, check_stored, resolve_experiment
from torchforce.client.experiment_placement import Placement, moving
from torchforce.client.experiment_state import ENDED, STARTING_SECONDS, describe, handle_of
from torchforce.client.monitor import check_monitors
from torchforce.client.project import write_bytes_atomically, write_json_atomically
from torchforce.client.queue import BEFORE, Queued
from torchforce.client.storage import refuse_links
from torchforce.client.store import ExperimentRecord
from torchforce.spec import SpecError, expect_dict, load_file


class TakenOver(Exception):
    """A start's claim on its row was taken over by another start (see ``Starting._renew_claim``)."""


class Starting(Placement):
    """``start`` and ``start_from_queue``, and what they do in order."""

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
                + (f" ({describe(record)})" if handle_of(record) is not None else " (its worker is starting)"),
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
            moved, carry = moving(previous, backend, cluster, launch.resume)
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

    def _retire(self, previous: ExperimentRecord) -> None:
        """What the last run left on its cluster (a paused GKE run's suspended RayJob) goes before a start that
        does not continue it; for a paused run a ClientError when it cannot, before anything is discarded or
        started. A run that ended had its workload removed as it ended (``_release``): trying again is best effort,
        and a cluster that does not answer (the likely reason to move a failed run) only warns."""
        handle = handle_of(previous)
        if handle is None or previous.backend == "local":
            return
        try:
            backend = self.backend(previous)
        except ClientError:
            return  # its cluster is gone, and what ran on it
        backend.retire(handle, self.folder, required=previous.status not in ENDED)

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
