"""The local queue: at most so many runs at once on this machine; a start beyond that waits its turn as ``queued``.

Runs on the local backend share this machine's CPUs. Four runs started at once on two cores all crawl, and all
finish late; run two at a time and the first two finish in half the time. So a local start takes a slot if one is
free and otherwise joins the queue, and queued runs start in the order they were queued (first in, first out; the
head of the queue is never overtaken) as slots free.

How many at once (``Limit``): with the project setting ``queue.max_parallel`` (``tfcli project config
--max-parallel N`` writes it into ``.tfcli/project.json``), at most N runs, whatever their size. Without it, by
CPUs: a run starts when the CPUs of the runs in their slots plus its own fit the CPUs this process may use
(``os.sched_getaffinity``), or when no run is in a slot (a run larger than the machine runs alone). For runs of
one size that is ``cores // cpus per run`` at once, at least 1. The CPUs of a run (``cpus_per_run``), with T its
``torch_threads`` (1 unless the experiment says): a single-mode run is one process with T torch threads and its
environments in it (T), or with ``vectorization: subprocess`` its environments' processes, which step in parallel
while the agent's threads wait for them (the larger of ``num_environments`` and T); a multi-threaded run
``num_workers`` x T; a distributed one ``num_workers`` Ray worker processes of T threads plus its driver.

There is no daemon: whoever frees a slot or sees one free moves the queue on (``promote``). The local worker does
at its exit (it has the project's root when the local backend started it), and so does every command that reads
an experiment's status (``Experiment.record``, so ``list``, ``show``, ``start`` and ``--follow``'s polling): a
worker that crashed holds no slot (the slots count live workers, and workers still starting), so the next such
command starts the next run. Taking a slot is one SQLite transaction (``BEGIN IMMEDIATE``) that counts the slots in
use and changes the row from ``queued`` to ``running`` only if it is still queued: promoters in many processes at
once never start a run twice, nor more runs than the limit. The start itself then goes the way of
``Experiment.start`` (``Experiment.start_from_queue``) with the choices the queued start was made with, which the
row keeps (``Queued``, the ``launch`` column), with the status it had before, to go back to.

Runs on a Ray cluster or on GKE are not queued here: their cluster places them by the resources they ask for (a
Ray job waits as ``PENDING``, shown as ``pending``; a KubeRay pod as ``Pending``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torchforce.client.errors import ClientError, ClientWarning
from torchforce.client.store import COLUMNS, ExperimentRecord

if TYPE_CHECKING:
    from torchforce.client.project import Project

SETTING = "queue"  # the key of the queue's settings in .tfcli/project.json: {"max_parallel": N}


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity, which a container or ``taskset`` may narrow)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # macOS has no affinity
        return os.cpu_count() or 1


def cpus_per_run(spec: dict[str, Any]) -> int:
    """The CPUs one run of ``spec`` keeps busy on this machine (see the module's docstring)."""
    from torchforce.client.experiment_build import agent_process_cpus

    process = agent_process_cpus(spec)  # the worker's own process, or each Ray worker's
    if spec.get("run_mode") == "distributed":
        return max(int(spec.get("num_workers") or 1), 1) * process + 1
    if spec.get("vectorization") == "subprocess" and spec.get("run_mode") != "multi-threaded":
        return max(int(spec.get("num_environments") or 1), process)
    return process


@dataclass(frozen=True)
class Limit:
    """How many runs may be in their slots at once: ``max_parallel`` runs when the project sets it, else as many as
    fit ``cpus``."""

    max_parallel: int | None
    cpus: int

    def admits(self, occupied: list[int], cpus: int) -> bool:
        """Whether a run of ``cpus`` CPUs may start beside runs of ``occupied`` CPUs."""
        if self.max_parallel is not None:
            return len(occupied) < self.max_parallel
        return not occupied or sum(occupied) + cpus <= self.cpus

    def at_once(self, cpus: int) -> int:
        """How many runs of ``cpus`` CPUs run at once."""
        return self.max_parallel if self.max_parallel is not None else max(self.cpus // cpus, 1)

    def describe(self) -> str:
        if self.max_parallel is not None:
            return f"at most {self.max_parallel} run{'s' if self.max_parallel > 1 else ''} at once (project setting)"
        return f"as many runs at once as fit {self.cpus} CPU{'s' if self.cpus > 1 else ''} (no project setting)"


def limit(project: Project) -> Limit:
    """The project's limit as its settings file says now (a command that runs for long, ``watch`` or a follow,
    sees a ``project config --max-parallel`` made meanwhile); a ClientError naming the file and the key when its
    setting is damaged."""
    from torchforce.client.project import MARKER, SETTINGS, read_settings

    path = project.root / MARKER / SETTINGS
    settings = (read_settings(path) if path.is_file() else project.settings).get(SETTING)
    value = settings.get("max_parallel") if isinstance(settings, dict) else None
    if settings is not None and (
        not isinstance(settings, dict) or (value is not None and (type(value) is not int or value < 1))
    ):
        raise ClientError(
            f"the project settings .tfcli/project.json have a damaged '{SETTING}': expected "
            f'{{"max_parallel": N}} with N a whole number >= 1, got {json.dumps(settings)}',
            hint="Set it again with 'tfcli project config --max-parallel N' (or 'auto': as many as the CPUs fit).",
        )
    return Limit(value, available_cpus())


def set_max_parallel(project: Project, value: int | None) -> None:
    """Write the project's ``max_parallel`` (None: by CPUs) into its settings, keeping the file's permissions."""
    from torchforce.client.project import MARKER, SETTINGS, write_json_atomically

    path = project.root / MARKER / SETTINGS
    settings = {key: item for key, item in project.settings.items() if key != SETTING}
    if value is not None:
        settings[SETTING] = {"max_parallel": value}
    write_json_atomically(path, settings, mode=path.stat().st_mode & 0o777)
    project.settings = settings


@dataclass(frozen=True)
class Queued:
    """How a local start was asked for, kept with the row (its ``launch`` column) so that a queued start, started
    later by whoever promotes it, runs as asked; and, while queued, the row as it was before (``before``: status,
    message, place, job, times), which taking it out of the queue puts back."""

    resume: bool = False
    fresh: bool = False
    max_restarts: int = 0
    trust_pickle: bool = False
    cpus: int = 1
    before: dict[str, Any] = dataclasses.field(default_factory=dict)
    budget: dict[str, int] = dataclasses.field(default_factory=dict)  # a new total_timesteps/episodes to run to

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def of(cls, record: ExperimentRecord) -> Queued:
        """The row's start choices (the defaults where it has none, or a damaged one: each field of another type
        than its default's keeps the default, so that a damaged row cannot stop the queue)."""
        try:
            data = json.loads(record.launch or "{}")
        except ValueError:
            return cls()
        if not isinstance(data, dict):
            return cls()
        default = cls()
        kept: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            value, usual = data.get(field.name), getattr(default, field.name)
            if type(value) is type(usual) and (not isinstance(value, int) or value >= 0):
                kept[field.name] = value
        kept["budget"] = {  # a budget's values are whole numbers of timesteps or episodes, or it is none
            key: value
            for key, value in kept.get("budget", {}).items()
            if key in ("total_timesteps", "episodes") and type(value) is int and value > 0
        }
        return cls(**kept)

    def previous(self, record: ExperimentRecord) -> ExperimentRecord:
        """The row as it was before it was queued (a row that does not tell: ``new``)."""
        kept = {key: value for key, value in self.before.items() if key in BEFORE}
        return dataclasses.replace(record, queued_at=None, **{"status": "new", **kept})


# What a queued row remembers of itself from before (the queue changes its status and message; a start from the
# queue, its backend, cluster, job and times: a paused GKE run's RayJob, which the start removes, or a start that
# fails puts back)
BEFORE = ("status", "message", "backend", "cluster", "job", "started_at", "ended_at")


@dataclass(frozen=True)
class Place:
    """Where a queued run stands: ``position`` of ``length`` in the queue, ``running`` runs in their slots, and how
    many such runs the limit lets run ``at_once``."""

    position: int
    length: int
    running: int
    at_once: int

    def describe(self) -> str:
        return f"position {self.position} of {self.length}; {self.running} running, at most {self.at_once} at once"


# ---------------------------------------------------------------------------------------------- the queue's state


def _rows(connection: sqlite3.Connection) -> list[ExperimentRecord]:
    rows = connection.execute(f"SELECT {', '.join(COLUMNS)} FROM experiments").fetchall()
    return [ExperimentRecord(*row) for row in rows]


def waiting(records: list[ExperimentRecord]) -> list[ExperimentRecord]:
    """The queued runs, first in first."""
    return sorted((r for r in records if r.status == "queued"), key=lambda r: (r.queued_at or 0.0, r.created_at))


def occupied(project: Project, records: list[ExperimentRecord]) -> list[int]:
    """The CPUs of each run in a slot: a local run whose worker lives, or which is still starting (no PID yet, for
    as long as ``Experiment`` does not judge it dead)."""
    from torchforce.client.backends.local import process_alive
    from torchforce.client.experiment_state import STARTING_SECONDS

    taken = []
    for record in records:
        if record.status != "running" or record.backend != "local":
            continue
        if record.pid is None:
            holds = time.time() - (record.started_at or 0.0) < STARTING_SECONDS
        else:
            holds = process_alive(record.pid, project.root / "experiments" / record.name)
        if holds:
            taken.append(Queued.of(record).cpus)
    return taken


def place(project: Project, name: str) -> Place | None:
    """Where the queued run ``name`` stands (None when it is not queued)."""
    records = project.store.experiments()
    queue = waiting(records)
    names = [record.name for record in queue]
    if name not in names:
        return None
    index = names.index(name)
    return Place(
        index + 1, len(queue), len(occupied(project, records)), limit(project).at_once(Queued.of(queue[index]).cpus)
    )


def _claim(connection: sqlite3.Connection, name: str, launch: Queued, started: float | None = None) -> None:
    """The row takes its slot: running since ``started`` (default: now), no workload yet (the start writes it in a
    moment)."""
    now = time.time()
    connection.execute(
        "UPDATE experiments SET status = 'running', pid = NULL, job = NULL, backend = 'local', cluster = NULL, "
        "message = NULL, started_at = ?, ended_at = NULL, queued_at = NULL, launch = ?, updated_at = ? "
        "WHERE name = ?",
        (now if started is None else started, launch.to_json(), now, name),
    )


# ---------------------------------------------------------------------------------------------- moving it


def admit(project: Project, name: str, expect: str, launch: Queued, started: float | None = None) -> Place | None:
    """A local start of ``name`` (whose status must still be ``expect``): it takes a slot when one is free and no
    run is queued before it (None: start it now; the row running since ``started``, default now), else it joins
    the end of the queue (its place)."""
    with project.store.transaction() as connection:
        records = _rows(connection)
        record = next((r for r in records if r.name == name), None)
        if record is None or record.status != expect:
            raise ClientError(f"experiment '{name}' changed state meanwhile; try again")
        launch = dataclasses.replace(launch, before={key: getattr(record, key) for key in BEFORE})
        queue, taken, rules = waiting(records), occupied(project, records), limit(project)
        if not queue and rules.admits(taken, launch.cpus):
            _claim(connection, name, launch, started)
            return None
        now = time.time()
        connection.execute(
            "UPDATE experiments SET status = 'queued', queued_at = ?, launch = ?, message = NULL, updated_at = ? "
            "WHERE name = ?",
            (now, launch.to_json(), now, name),
        )
        return Place(len(queue) + 1, len(queue) + 1, len(taken), rules.at_once(launch.cpus))


@dataclass(frozen=True)
class Claim:
    """The slot ``claim_next`` took for the run at the head of the queue: the row as it was in the queue
    (``queued``), its start choices, and when the claim was made (the row's ``started_at`` while it is this claim)."""

    queued: ExperimentRecord
    launch: Queued
    started: float


def claim_next(project: Project) -> Claim | None:
    """Take a slot for the run at the head of the queue, if one is free (it is ``running`` now, with no workload
    yet), or None."""
    with project.store.transaction() as connection:
        records = _rows(connection)
        queue = waiting(records)
        if not queue:
            return None
        head = queue[0]
        launch = Queued.of(head)
        if not limit(project).admits(occupied(project, records), launch.cpus):
            return None
        started = time.time()
        _claim(connection, head.name, launch, started)
        return Claim(head, launch, started)


def unclaim(project: Project, claim: Claim) -> bool:
    """Put a claimed run back where it was in the queue, if its row is still that claim (running since the claim,
    no workload): a promotion cut short (a Ctrl-C) before the start took it over. Whether it went back."""
    back = claim.queued
    return project.store.update_experiment(
        back.name,
        expect=("running",),
        expect_values={"pid": None, "job": None, "started_at": claim.started},
        **{key: getattr(back, key) for key in (*BEFORE, "queued_at", "launch")},
    )


def promote(project: Project) -> list[str]:
    """Start queued runs, first in first, while slots are free; the names started. A run whose start fails goes
    back to the status it had before it was queued, with the error as its message (and a warning), and the next
    one is tried."""
    if not any(record.status == "queued" for record in project.store.experiments()):
        return []
    from torchforce.client.experiment import Experiment

    started = []
    while (claim := claim_next(project)) is not None:
        name, launch = claim.queued.name, claim.launch
        try:
            Experiment.load(project, name).start_from_queue(launch, claim.queued)
            started.append(name)
        except Exception as error:  # noqa: BLE001 - a start that fails must not stop the queue, nor its caller
            message = f"the queued start failed: {error}".splitlines()[0]
            back = launch.previous(project.store.experiment(name) or ExperimentRecord(name, "new"))
            project.store.update_experiment(  # (the start puts the row back itself when it gets that far)
                name,
                expect=("running", back.status),
                expect_pid=None,
                **{key: getattr(back, key) for key in BEFORE if key != "message"},
                message=message,
                launch=None,
            )
            warnings.warn(f"experiment '{name}' did not start from the queue: {message}", ClientWarning, stacklevel=2)
        except BaseException:
            # a Ctrl-C (of the list or watch that promotes) before the start's own guard: back to its place at the
            # head of the queue, not a slot held with no worker until judged dead and failed (once the launch has
            # begun, the start puts it back there itself)
            unclaim(project, claim)
            raise
    return started


def leave(project: Project, name: str) -> ExperimentRecord | None:
    """Take the queued run ``name`` out of the queue, back to the status it had before (nothing of it ran, nothing
    was discarded); the row afterwards, or None when it was no longer queued (it has started meanwhile)."""
    store = project.store
    record = store.experiment(name)
    if record is None or record.status != "queued":
        return None
    back = Queued.of(record).previous(record)
    if not store.update_experiment(
        name, expect=("queued",), **{key: getattr(back, key) for key in BEFORE}, queued_at=None, launch=None
    ):
        return None
    return store.experiment(name)
