"""A sweep's driver process: the lock that one process alone holds to drive the trials (the driver, or a stop's
cleanup after a driver that died) and that a look at the sweep shares for a moment; telling the driver by its command
line from a reused PID; and collecting the exit status of a driver this process started."""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchforce.client.sweep import Sweep

DRIVER_MODULE = "torchforce.client.sweep_driver"  # the driver process's module (sweep_driver.py)
# the modules a driver may run as: sweep_driver.py, and sweep.py, where drivers started before 2026-12-07 still run
DRIVER_MODULES = (DRIVER_MODULE, "torchforce.client.sweep")


@contextmanager
def probe_lock(path: Path) -> Iterator[bool]:
    """Take the lock at ``path``, shared, if no process holds it alone (a driver, a stop's cleanup); yields whether
    it was taken (released afterwards). Probes share it, so they never fail for each other, and a driver or a
    cleanup waiting for the lock alone waits a moment at most (``hold_lock``). Where the file is missing no one
    holds it, and it is not made (a look at a sweep writes nothing)."""
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        yield True
        return
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(descriptor)  # closing releases the lock


def hold_lock(path: Path, seconds: float) -> int | None:
    """The lock at ``path``, held alone until the descriptor returned is closed (at the latest when the process
    ends); None if another process keeps it for ``seconds`` (a probe holds it only for a moment)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return descriptor
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(descriptor)
                return None
            time.sleep(0.05)


def is_driver(pid: int, sweep: Sweep) -> bool:
    """Whether ``pid`` is the driver of ``sweep`` (not a reused PID of another program)."""
    try:  # the arguments as given (a project path with spaces in it is one of them)
        arguments = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        module = next((argument for argument in arguments if argument in DRIVER_MODULES), None)
        return module is not None and sweep.name in arguments and str(sweep.project.root) in arguments
    except OSError:
        try:
            done = subprocess.run(  # noqa: S603, S607 - a fixed command (no /proc: macOS)
                ["ps", "-ww", "-o", "command=", "-p", str(pid)], capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.SubprocessError):
            return False
        command = f" {done.stdout.strip()} "  # ps joins the arguments with spaces: whole arguments only
        return any(f" {module} " in command for module in DRIVER_MODULES) and all(
            f" {argument} " in command for argument in (sweep.name, str(sweep.project.root))
        )


def reap(pid: int, seconds: float = 10.0) -> None:
    """Collect the exit status of a driver this process started, once it has exited (so that it leaves no zombie
    behind); a driver another process started is not this one's to wait for."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done or time.monotonic() > deadline:
            return
        time.sleep(0.02)
