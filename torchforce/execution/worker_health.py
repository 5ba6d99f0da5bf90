"""How the driver of a distributed run (``torchforce.execution.distributed``) tells how its Ray workers fare: each
one's status row (where it ran, its steps, restarts, lost steps and hangs), a worker that has stopped answering
(``Absence``: for how long, and how many deaths, before it is given up), and what failed in a remote call."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NotRequired, TypedDict

MAX_WORKER_RESTARTS = 20  # a worker process that keeps dying (a crashing environment) ends the run after this many
RESTART_TIMEOUT = 300.0  # seconds a worker that Ray is restarting may take to answer again (more on a busy machine)


def described_failure(error: Exception) -> str:
    """What failed in a remote call: the error the remote code raised (not Ray's header of process title and
    colours), its type and first line."""
    cause = getattr(error, "cause", None) or error
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[0] if text else ''}".rstrip(": ")


class WorkerStatus(TypedDict):
    """One row of ``DistributedRunner.worker_status()``: where a worker ran and what it did (see there)."""

    worker: int
    node: str | None
    steps: int
    episodes: int
    steps_per_second: float | None
    restarts: int
    lost_steps: int
    hangs: int
    sync_seconds: NotRequired[float]
    syncs: NotRequired[int]


class Absence:
    """A worker that has stopped answering: since when, and how many of the failed calls were deaths. While Ray
    starts a killed worker's process again, calls fail with ``ActorUnavailableError`` (for seconds, or longer on a
    busy machine): waited out up to ``RESTART_TIMEOUT``; other actor errors are deaths, up to
    ``MAX_WORKER_RESTARTS`` of them."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.since: float | None = None
        self.calls = 0
        self.deaths = 0

    def failed(self, error: Exception) -> float:
        """Count ``error`` (a ``RayActorError``) and return the seconds to wait before the next call; raise it once
        the worker is given up."""
        from ray.exceptions import ActorUnavailableError

        now = self.clock()
        self.since = now if self.since is None else self.since
        self.calls += 1
        self.deaths += not isinstance(error, ActorUnavailableError)
        if self.deaths > MAX_WORKER_RESTARTS or now - self.since > RESTART_TIMEOUT:
            raise error
        return min(0.1 * self.calls, 2.0)

    def answered(self) -> None:
        """The restarted worker answered again: the wait for it is over (a later death waits anew), while its deaths
        count on until one of its chunks succeeds (a worker that dies in every chunk is still given up)."""
        self.since, self.calls = None, 0
