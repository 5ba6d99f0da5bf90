"""The local backend: the embedded default. Each experiment runs as a detached worker process on this machine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from torchforce.client.backends.base import Backend
from torchforce.client.errors import ClientError

WORKER_MODULE = "torchforce.client.worker"


def process_alive(pid: int | None) -> bool:
    """Whether ``pid`` is a live (not zombie) torchforce worker; a reused PID of another program is not."""
    if not pid:
        return False
    try:
        os.waitpid(pid, os.WNOHANG)  # reap it if it is our own finished child
    except ChildProcessError:
        pass
    proc = Path(f"/proc/{pid}")
    try:
        stat = (proc / "stat").read_text()
        command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    state = stat.rsplit(")", 1)[-1].split()[0]
    return state not in ("Z", "X") and WORKER_MODULE in command


class LocalBackend(Backend):
    name = "local"
    supported_run_modes = ("single",)

    def start(self, folder: Path, project_root: Path, *, resume: bool) -> int:
        results = folder / "results"
        results.mkdir(exist_ok=True)
        command = [sys.executable, "-m", WORKER_MODULE, str(folder), "--project", str(project_root)]
        if resume:
            command.append("--resume")
        environment = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        with open(results / "worker.log", "ab") as log:
            log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {'resume' if resume else 'start'} ===\n".encode())
            log.flush()
            process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=project_root,
                env=environment,
                start_new_session=True,  # detached: survives the tfcli call and its terminal
            )
        return process.pid

    def alive(self, pid: int | None) -> bool:
        return process_alive(pid)

    def signal(self, pid: int, request: str, timeout: float) -> bool:
        """Ask the worker to pause or stop (it checkpoints first); wait until it has exited."""
        number = signal.SIGUSR1 if request == "pause" else signal.SIGTERM
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
