"""The local backend: the embedded default. Each experiment runs as a detached worker process on this machine."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from torchforce.client.backends.base import WORKSPACE, Backend, Handle, Launch, check_gpus
from torchforce.client.errors import ClientError
from torchforce.client.modules import modules_folder
from torchforce.client.signals import Signals
from torchforce.spec.device import needs_gpu

WORKER_MODULE = "torchforce.client.worker"
# The worker's pause and stop signals. They stay blocked from before the worker's exec until it has installed its
# handlers (the mask survives exec), so one that arrives while it starts waits instead of killing it.
WORKER_SIGNALS = frozenset(Signals.REQUESTS)
PROC = Path("/proc")


def process_alive(pid: int | None, folder: str | Path | None = None) -> bool:
    """Whether ``pid`` is a live (not zombie) torchforce worker (of the experiment in ``folder``, if given); a
    reused PID of another program is not. Reads /proc where there is one (Linux), else asks ``ps`` (macOS)."""
    if not pid:
        return False
    try:
        os.waitpid(pid, os.WNOHANG)  # reap it if it is our own finished child
    except ChildProcessError:
        pass
    found = _from_proc(pid) if PROC.is_dir() else _from_ps(pid)
    if found is None:
        return False
    state, command = found
    if command is None:  # nothing to tell who it is: a live process with our worker's PID is taken to be it
        return True
    words = f" {command.strip()} "  # whole arguments only: ".../experiments/run" is not ".../experiments/run-2"
    return (
        not state.startswith(("Z", "X"))
        and f" {WORKER_MODULE} " in words
        and (folder is None or f" {Path(folder).resolve()} " in words)
    )


def _from_proc(pid: int) -> tuple[str, str | None] | None:
    """The process state letter and command line from /proc, or None if there is no such process."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
        command = (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[0], command


def _from_ps(pid: int) -> tuple[str, str | None] | None:
    """The same without /proc: ``os.kill(pid, 0)`` says whether it exists, ``ps`` what it is."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return None  # another user's process: never one of our workers
    try:
        result = subprocess.run(  # noqa: S603, S607 - a fixed command
            ["ps", "-ww", "-o", "stat=", "-o", "command=", "-p", str(pid)], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return "R", None
    state, _, command = result.stdout.strip().partition(" ")
    return (state, command) if result.returncode == 0 and state else None


@contextmanager
def worker_signals_blocked() -> Iterator[None]:
    """Block the worker's signals in this thread while it launches a child: the child inherits the mask."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, WORKER_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Run SIGINT's handler (a Ctrl-C: KeyboardInterrupt in tfcli) once the block is done, not in it. Blocking the
    signal in this thread is not enough: another thread (torch starts one) may take it, and the KeyboardInterrupt
    then comes out of wherever this thread is, also from inside ``subprocess.Popen`` once the child exists.
    Python runs the handlers in the main thread, and only there can they be changed: in another thread the block
    runs as it is (no KeyboardInterrupt comes out of it there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[FrameType | None] = []
    previous = signal.signal(signal.SIGINT, lambda _number, frame: held.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if held and callable(previous):
        previous(signal.SIGINT, held[0])
    elif held and previous == signal.SIG_DFL:
        signal.raise_signal(signal.SIGINT)


class LocalBackend(Backend):
    name = "local"
    supported_run_modes = ("single", "multi-threaded", "distributed")

    def check(self, spec: dict[str, Any]) -> None:
        """An agent on "cuda" needs CUDA on this machine."""
        if needs_gpu(spec["agent"].get("device")):
            import torch

            check_gpus(spec, "this machine", torch.cuda.device_count())

    def start(self, folder: Path, project_root: Path, launch: Launch) -> int:
        results = folder / "results"
        results.mkdir(exist_ok=True)
        (results / "control.json").unlink(missing_ok=True)  # a request left by a run elsewhere is not for this one
        workspace = folder / WORKSPACE  # the worker's (empty) current folder: Ray puts a driver's on its actors' path
        shutil.rmtree(workspace, ignore_errors=True)
        workspace.mkdir()
        # -I: neither the project folder (the working directory) nor PYTHONPATH is on the worker's path; the
        # project's modules/ folder is, explicitly (see torchforce/client/modules.py)
        command = [
            sys.executable,
            "-I",
            "-m",
            WORKER_MODULE,
            str(folder.resolve()),
            "--project",
            str(project_root),
            "--modules",
            str(modules_folder(project_root)),
            *launch.worker_flags(),
        ]
        environment = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        header = f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {'resume' if launch.resume else 'start'} ===\n"
        process = None
        try:
            with open(results / "worker.log", "ab") as log, interrupts_held():  # a Ctrl-C: once process is set
                log.write(header.encode())
                log.flush()
                with worker_signals_blocked():
                    process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                        command,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        cwd=workspace,
                        env=environment,
                        start_new_session=True,  # detached: survives the tfcli call and its terminal
                    )
        except BaseException:
            if process is not None:  # spawned, but cut before its PID is handed over: it must not run unknown
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)  # its session's group: it and anything it started
                process.wait()
            raise
        return process.pid

    def alive(self, pid: Handle | None, folder: Path | None = None) -> bool:
        return isinstance(pid, int) and process_alive(pid, folder)

    def signal(self, pid: Handle, request: str, timeout: float, folder: Path | None = None) -> bool:
        """Ask the worker to pause or stop (it checkpoints first); wait until it has exited."""
        number = signal.SIGUSR1 if request == "pause" else signal.SIGTERM
        if not isinstance(pid, int):
            return True
        try:
            os.kill(pid, number)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not process_alive(pid):
                return True
            time.sleep(0.05)
        return False

    def download(self, folder: Path) -> Path:
        results = folder / "results"
        if not results.is_dir():
            raise ClientError(f"experiment '{folder.name}' has no results yet", hint="Start it first.")
        return results  # the worker wrote them here already
