"""The project's state database (SQLite): each experiment's status, backend, worker PID and timestamps.

Specs and results stay plain files; the database only knows what changes as experiments run. Every write is one
short ``BEGIN IMMEDIATE`` transaction, and the database runs in WAL mode with a generous busy timeout, so many
``tfcli`` processes (and the background workers) can use it at once without corrupting it or failing on a lock.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from torchforce.client.errors import ClientError

# ``queued``: started while the local backend had no free slot, waiting its turn (torchforce/client/queue.py).
STATUSES = ("new", "queued", "running", "paused", "stopped", "finished", "failed")
# How long a command waits for another process's lock on the database before it gives up with a ClientError
# saying who holds it (a module constant, so that tests can shorten it).
BUSY_TIMEOUT = 30.0
EXPERIMENTS_TABLE = f"""
CREATE TABLE IF NOT EXISTS experiments (
    name        TEXT PRIMARY KEY,
    status      TEXT NOT NULL CHECK (status IN ({", ".join(f"'{status}'" for status in STATUSES)})),
    backend     TEXT NOT NULL DEFAULT 'local',
    cluster     TEXT,
    pid         INTEGER,
    job         TEXT,
    message     TEXT,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL,
    started_at  REAL,
    ended_at    REAL,
    queued_at   REAL,
    launch      TEXT
);
"""
SCHEMA = (
    EXPERIMENTS_TABLE
    + """
CREATE TABLE IF NOT EXISTS clusters (
    name        TEXT PRIMARY KEY,
    spec        TEXT NOT NULL,
    status      TEXT NOT NULL,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL
);
"""
)


@dataclass
class ExperimentRecord:
    name: str
    status: str
    backend: str = "local"
    cluster: str | None = None
    pid: int | None = None
    job: str | None = None  # the workload's id where it is no local process (a Ray job's submission id)
    message: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    started_at: float | None = None
    ended_at: float | None = None
    queued_at: float | None = None  # when it joined the queue (while ``queued``: the queue is in this order)
    launch: str | None = None  # JSON: how its last local start was asked for (queue.py, ``Queued``)


COLUMNS = tuple(f.name for f in fields(ExperimentRecord))


@dataclass
class ClusterRecord:
    """A cluster this project created or attached to: its spec, and what running it left to know (addresses, the
    PIDs of the processes it started, its private folder)."""

    name: str
    spec: dict[str, Any]
    status: str
    runtime: dict[str, Any]
    created_at: float = 0.0
    updated_at: float = 0.0


def _migrate(connection: sqlite3.Connection) -> None:
    """Bring a database of an older torchforce up to this schema, keeping every row: columns are only ever added,
    and a status check that lacks a status of ``STATUSES`` (``queued``, added with the queue) is widened, which
    SQLite can only do by copying the table into a new one. In one transaction, checked again once it holds the
    lock: two processes opening an old database at once migrate it once."""
    if _current(connection):
        return
    connection.execute("BEGIN IMMEDIATE")
    try:
        if not _current(connection):
            columns = [row[1] for row in connection.execute("PRAGMA table_info(experiments)")]
            kept = ", ".join(column for column in columns if column in COLUMNS)
            connection.execute("ALTER TABLE experiments RENAME TO experiments_before_migration")
            connection.execute(EXPERIMENTS_TABLE)
            connection.execute(f"INSERT INTO experiments ({kept}) SELECT {kept} FROM experiments_before_migration")
            connection.execute("DROP TABLE experiments_before_migration")
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise


def _current(connection: sqlite3.Connection) -> bool:
    """Whether the experiments table has every column and allows every status of this schema."""
    columns = {row[1] for row in connection.execute("PRAGMA table_info(experiments)")}
    row = connection.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'experiments'").fetchone()
    return set(COLUMNS) <= columns and row is not None and all(f"'{status}'" in row[0] for status in STATUSES)


class Store:
    """The state database at ``path`` (created on first use)."""

    def __init__(self, path: str | Path, *, timeout: float | None = None) -> None:
        self.path = Path(path)
        self._timeout = timeout
        try:
            with self._translated():
                self._create_or_migrate()
        except sqlite3.DatabaseError as error:  # what _translated leaves (a constraint failing while migrating)
            raise unusable_error(self.path, error) from None

    def _create_or_migrate(self) -> None:
        """The schema made, or migrated from an older one. When several processes open the database first at once,
        SQLite can answer busy without waiting (the switch to WAL while another connection reads, or two
        connections that would each wait for the other): that is tried again until ``timeout`` has passed."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                connection = self._connect()
                try:
                    connection.executescript(SCHEMA)
                    _migrate(connection)
                    return
                finally:
                    connection.close()
            except sqlite3.OperationalError as error:
                if not is_busy(error) or time.monotonic() >= deadline:
                    raise
            time.sleep(0.05)

    @property
    def timeout(self) -> float:
        """Seconds to wait for another process's lock (``BUSY_TIMEOUT`` unless the Store was given its own)."""
        return BUSY_TIMEOUT if self._timeout is None else self._timeout

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        try:
            connection.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = NORMAL")
        except BaseException:
            connection.close()
            raise
        return connection

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """A lock held past the timeout ("database is locked") becomes a ClientError that says who holds it; a
        damaged file ("database disk image is malformed", often found only by a query) one that says what to do.
        Constraint errors (IntegrityError) are left to the caller."""
        try:
            yield
        except sqlite3.DatabaseError as error:
            if is_busy(error):
                raise busy_error(self.path, self.timeout) from None
            if isinstance(error, sqlite3.OperationalError) or type(error) is sqlite3.DatabaseError:
                raise unusable_error(self.path, error) from None
            raise
        except UnicodeDecodeError as error:  # a text value of a damaged file, bytes that are not UTF-8
            raise unusable_error(self.path, error) from None

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """A connection for reads (no transaction); a lock held too long is a ClientError, as in ``transaction``."""
        with self._translated():
            connection = self._connect()
            try:
                yield connection
            finally:
                connection.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: taken with BEGIN IMMEDIATE, so concurrent writers queue instead of failing (for
        up to ``timeout`` seconds; then a ClientError says the database is busy and who holds it)."""
        with self._translated():
            connection = self._connect()
            try:
                connection.execute("BEGIN IMMEDIATE")
                yield connection
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:  # not when BEGIN itself failed: that error is the one to see
                    connection.execute("ROLLBACK")
                raise
            finally:
                connection.close()

    # ------------------------------------------------------------------ experiments

    def add_experiment(self, name: str, *, backend: str = "local", cluster: str | None = None) -> ExperimentRecord:
        now = time.time()
        with self.transaction() as connection:
            # Kubernetes names write "_" as "-", so "my_run" and "my-run" would share their Jobs and Services.
            clash = connection.execute(
                "SELECT name FROM experiments WHERE replace(name, '_', '-') = replace(?, '_', '-') AND name != ?",
                (name, name),
            ).fetchone()
            if clash is not None:
                raise ClientError(
                    f"experiment name '{name}' clashes with the existing '{clash[0]}': both are "
                    f"'{name.replace('_', '-')}' in Kubernetes resource names",
                    hint="Pick another name.",
                )
            connection.execute(
                "INSERT INTO experiments (name, status, backend, cluster, created_at, updated_at) "
                "VALUES (?, 'new', ?, ?, ?, ?)",
                (name, backend, cluster, now, now),
            )
        record = self.experiment(name)
        if record is None:  # another process removed it in between
            raise ClientError(f"experiment '{name}' was removed just after it was added")
        return record

    def experiment(self, name: str) -> ExperimentRecord | None:
        with self._reading() as connection:
            row = connection.execute(f"SELECT {', '.join(COLUMNS)} FROM experiments WHERE name = ?", (name,)).fetchone()
        return None if row is None else ExperimentRecord(*row)

    def experiments(self) -> list[ExperimentRecord]:
        with self._reading() as connection:
            rows = connection.execute(f"SELECT {', '.join(COLUMNS)} FROM experiments ORDER BY created_at").fetchall()
        return [ExperimentRecord(*row) for row in rows]

    def update_experiment(
        self,
        name: str,
        *,
        expect: tuple[str, ...] | None = None,
        expect_pid: Any = ...,
        expect_values: dict[str, Any] | None = None,
        **values: Any,
    ) -> bool:
        """Set ``values`` on the experiment; with ``expect``, only if its status is one of those (compare-and-set,
        so two concurrent ``start`` calls cannot both win), with ``expect_pid`` only if its PID is that one (None:
        no PID), with ``expect_values`` only if those columns hold those values (None: NULL). Returns whether the
        row changed."""
        unknown = (set(values) | set(expect_values or {})) - set(COLUMNS)
        if unknown:
            raise KeyError(f"unknown experiment columns {sorted(unknown)}")
        if "status" in values and values["status"] not in STATUSES:
            raise ValueError(f"unknown status {values['status']!r}")
        values["updated_at"] = time.time()
        assignments = ", ".join(f"{key} = ?" for key in values)
        query = f"UPDATE experiments SET {assignments} WHERE name = ?"
        parameters: list[Any] = [*values.values(), name]
        if expect is not None:
            query += f" AND status IN ({', '.join('?' for _ in expect)})"
            parameters += list(expect)
        if expect_pid is not ...:
            query += " AND pid IS ?"
            parameters.append(expect_pid)
        for key, value in (expect_values or {}).items():
            query += f" AND {key} IS ?"
            parameters.append(value)
        with self.transaction() as connection:
            changed = connection.execute(query, parameters).rowcount
        return changed == 1

    def remove_experiment(self, name: str, *, expect: tuple[str, ...] | None = None) -> bool:
        """Remove the experiment's row; with ``expect``, only if its status is one of those (so that a concurrent
        start wins over a delete). Returns whether a row was removed."""
        query, parameters = "DELETE FROM experiments WHERE name = ?", [name]
        if expect is not None:
            query += f" AND status IN ({', '.join('?' for _ in expect)})"
            parameters += list(expect)
        with self.transaction() as connection:
            return connection.execute(query, parameters).rowcount == 1

    def adopt_experiments(self, records: list[ExperimentRecord]) -> dict[str, str | None]:
        """Insert rows for experiments whose folders the database lost (``tfcli project repair``), in one
        transaction. Returns, per name, None where its row was added, else why not (a row exists, or its name
        clashes with another's in Kubernetes names)."""
        outcome: dict[str, str | None] = {}
        with self.transaction() as connection:
            for record in records:
                clash = connection.execute(
                    "SELECT name FROM experiments WHERE replace(name, '_', '-') = replace(?, '_', '-')",
                    (record.name,),
                ).fetchone()
                if clash is not None:
                    outcome[record.name] = (
                        "the state database has it already"
                        if clash[0] == record.name
                        else f"its name clashes with the experiment '{clash[0]}' (both are "
                        f"'{record.name.replace('_', '-')}' in Kubernetes resource names)"
                    )
                    continue
                values = {column: getattr(record, column) for column in COLUMNS}
                connection.execute(
                    f"INSERT INTO experiments ({', '.join(values)}) VALUES ({', '.join('?' for _ in values)})",
                    list(values.values()),
                )
                outcome[record.name] = None
        return outcome

    def check(self) -> str:
        """SQLite's own integrity check ("ok" when the file is sound)."""
        with self._reading() as connection:
            return str(connection.execute("PRAGMA integrity_check").fetchone()[0])

    # ------------------------------------------------------------------ clusters

    def add_cluster(self, name: str, spec: dict[str, Any], status: str, runtime: dict[str, Any]) -> ClusterRecord:
        """Record a new cluster; a ClientError if the project has one by that name already."""
        now = time.time()
        payload = json.dumps({"spec": spec, "runtime": runtime})
        with self.transaction() as connection:
            if connection.execute("SELECT 1 FROM clusters WHERE name = ?", (name,)).fetchone():
                raise ClientError(
                    f"cluster '{name}' exists already in this project",
                    hint=f"See it with 'tfcli cluster list', or delete it with 'tfcli cluster delete -c {name}'.",
                )
            connection.execute(
                "INSERT INTO clusters (name, spec, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                (name, payload, status, now, now),
            )
        record = self.cluster(name)
        if record is None:  # another process removed it in between
            raise ClientError(f"cluster '{name}' was removed just after it was added")
        return record

    def cluster(self, name: str) -> ClusterRecord | None:
        with self._reading() as connection:
            row = connection.execute(
                "SELECT name, spec, status, created_at, updated_at FROM clusters WHERE name = ?", (name,)
            ).fetchone()
        return None if row is None else _cluster_record(row)

    def clusters(self) -> list[ClusterRecord]:
        with self._reading() as connection:
            rows = connection.execute(
                "SELECT name, spec, status, created_at, updated_at FROM clusters ORDER BY created_at"
            ).fetchall()
        return [_cluster_record(row) for row in rows]

    def update_cluster(self, name: str, *, status: str | None = None, runtime: dict[str, Any] | None = None) -> None:
        with self.transaction() as connection:
            row = connection.execute("SELECT spec FROM clusters WHERE name = ?", (name,)).fetchone()
            if row is None:
                return
            payload = json.loads(row[0])
            if runtime is not None:
                payload["runtime"] = runtime
            connection.execute(
                "UPDATE clusters SET spec = ?, status = coalesce(?, status), updated_at = ? WHERE name = ?",
                (json.dumps(payload), status, time.time(), name),
            )

    def remove_cluster(self, name: str) -> None:
        with self.transaction() as connection:
            connection.execute("DELETE FROM clusters WHERE name = ?", (name,))


def unusable_error(path: Path, error: Exception) -> ClientError:
    return ClientError(
        f"the state database {path} cannot be used: {error}",
        hint="If it is damaged, move it away; 'tfcli init' makes a new, empty one, and 'tfcli project repair' then "
        "adopts the experiment folders again.",
    )


def is_busy(error: sqlite3.DatabaseError) -> bool:
    """Whether SQLite's ``error`` says another connection holds a lock ("database is locked", "busy")."""
    return isinstance(error, sqlite3.OperationalError) and ("locked" in str(error) or "busy" in str(error))


def busy_error(path: Path, timeout: float) -> ClientError:
    """The error for a database another process has kept locked for ``timeout`` seconds: it names the processes
    that have the file open, where /proc tells (else the file), and what to do."""
    holders = database_holders(path)
    who = "; ".join(holders[:3]) + (f" and {len(holders) - 3} more" if len(holders) > 3 else "")
    return ClientError(
        f"the state database {path} is busy: another process has held its lock for over {timeout:g} s",
        hint=(f"Processes that have it open: {who}. " if holders else f"Some other process has {path.name} locked. ")
        + "Wait for it to finish and run the command again; if it hangs, end it.",
    )


def database_holders(path: Path) -> list[str]:
    """The other processes that have the database (or its -wal/-shm/-journal file) open, as ``PID 12 (command
    line)``, from /proc/PID/fd (Linux; only processes this user may inspect). Empty where that cannot be told."""
    base = os.path.realpath(path)
    targets = {base + suffix for suffix in ("", "-wal", "-shm", "-journal")}
    holders = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for pid in entries:
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            descriptors = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for descriptor in descriptors:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{descriptor}")
            except OSError:
                continue
            if target in targets:
                holders.append(f"PID {pid} ({_command_line(pid)})")
                break
    return holders


def _command_line(pid: str, limit: int = 80) -> str:
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").replace(b"\0", b" ")
    except OSError:
        return "?"
    text = " ".join(words.decode(errors="replace").split()) or "?"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _cluster_record(row: tuple[Any, ...]) -> ClusterRecord:
    name, payload, status, created_at, updated_at = row
    try:
        data = json.loads(payload)
        spec, runtime = dict(data["spec"]), dict(data["runtime"])
    except (ValueError, KeyError, TypeError):
        spec, runtime = {}, {}  # written by hand or by an older torchforce: shown, and deletable
    return ClusterRecord(name, spec, status, runtime, created_at, updated_at)
