"""The project's state database (SQLite): each experiment's status, backend, worker PID and timestamps.

Specs and results stay plain files; the database only knows what changes as experiments run. Every write is one
short ``BEGIN IMMEDIATE`` transaction, and the database runs in WAL mode with a generous busy timeout, so many
``tfcli`` processes (and the background workers) can use it at once without corrupting it or failing on a lock.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from torchforce.client.errors import ClientError

STATUSES = ("new", "running", "paused", "stopped", "finished", "failed")
SCHEMA = """
CREATE TABLE IF NOT EXISTS experiments (
    name        TEXT PRIMARY KEY,
    status      TEXT NOT NULL CHECK (status IN ('new', 'running', 'paused', 'stopped', 'finished', 'failed')),
    backend     TEXT NOT NULL DEFAULT 'local',
    cluster     TEXT,
    pid         INTEGER,
    message     TEXT,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL,
    started_at  REAL,
    ended_at    REAL
);
CREATE TABLE IF NOT EXISTS clusters (
    name        TEXT PRIMARY KEY,
    spec        TEXT NOT NULL,
    status      TEXT NOT NULL,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL
);
"""


@dataclass
class ExperimentRecord:
    name: str
    status: str
    backend: str = "local"
    cluster: str | None = None
    pid: int | None = None
    message: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    started_at: float | None = None
    ended_at: float | None = None


COLUMNS = tuple(f.name for f in fields(ExperimentRecord))


class Store:
    """The state database at ``path`` (created on first use)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            connection = self._connect()
            try:
                connection.executescript(SCHEMA)
            finally:
                connection.close()
        except sqlite3.DatabaseError as error:
            raise ClientError(
                f"the state database {self.path} cannot be used: {error}",
                hint="If it is damaged, move it away; 'tfcli init' makes a new, empty one.",
            ) from None

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        connection.execute("PRAGMA busy_timeout = 30000")
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
        return connection

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: taken with BEGIN IMMEDIATE, so concurrent writers queue instead of failing."""
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
        return self.experiment(name)

    def experiment(self, name: str) -> ExperimentRecord | None:
        connection = self._connect()
        try:
            row = connection.execute(f"SELECT {', '.join(COLUMNS)} FROM experiments WHERE name = ?", (name,)).fetchone()
        finally:
            connection.close()
        return None if row is None else ExperimentRecord(*row)

    def experiments(self) -> list[ExperimentRecord]:
        connection = self._connect()
        try:
            rows = connection.execute(f"SELECT {', '.join(COLUMNS)} FROM experiments ORDER BY created_at").fetchall()
        finally:
            connection.close()
        return [ExperimentRecord(*row) for row in rows]

    def update_experiment(
        self, name: str, *, expect: tuple[str, ...] | None = None, expect_pid: Any = ..., **values: Any
    ) -> bool:
        """Set ``values`` on the experiment; with ``expect``, only if its status is one of those (compare-and-set,
        so two concurrent ``start`` calls cannot both win), with ``expect_pid`` only if its PID is that one (None:
        no PID). Returns whether the row changed."""
        unknown = set(values) - set(COLUMNS)
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
        with self.transaction() as connection:
            changed = connection.execute(query, parameters).rowcount
        return changed == 1

    def remove_experiment(self, name: str) -> None:
        with self.transaction() as connection:
            connection.execute("DELETE FROM experiments WHERE name = ?", (name,))

    def check(self) -> str:
        """SQLite's own integrity check ("ok" when the file is sound)."""
        connection = self._connect()
        try:
            return str(connection.execute("PRAGMA integrity_check").fetchone()[0])
        finally:
            connection.close()
