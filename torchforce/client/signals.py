"""What a worker process has been asked to do, by a signal (``Signals``) or by ``results/control.json``
(``control_request``: how the Ray backend asks, as a job's process is out of its reach)."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
from pathlib import Path

SUPERVISOR_VARIABLE = "TORCHFORCE_SUPERVISOR"  # a supervised worker's supervisor's PID (worker.supervise sets it)
PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies


class Signals:
    """What the worker has been asked to do: None, "pause" or "stop" (set from signal handlers)."""

    REQUESTS: dict[int, str] = {signal.SIGUSR1: "pause", signal.SIGINT: "pause", signal.SIGTERM: "stop"}
    request: str | None = None

    @classmethod
    def install(cls) -> None:
        """Install the handlers, then unblock the signals: the local backend starts the worker with them blocked,
        so one sent while it was starting is pending, and is handled now instead of having killed it."""
        for number, request in cls.REQUESTS.items():
            signal.signal(number, lambda *_, request=request: cls.ask(request))
        signal.pthread_sigmask(signal.SIG_UNBLOCK, set(cls.REQUESTS))

    @classmethod
    def ask(cls, request: str) -> None:
        """Ask for ``request``; a stop outranks a pause."""
        if cls.request != "stop":
            cls.request = request


def control_request(results: Path) -> str | None:
    """What ``results/control.json`` asks (``"pause"``, ``"stop"``), or None when there is none (or no valid one)."""
    try:
        request = json.loads((results / "control.json").read_text()).get("request")
    except (OSError, ValueError, AttributeError):
        return None
    return request if request in ("pause", "stop") else None


def stop_with_the_supervisor() -> None:
    """A supervised worker (``--max-restarts``: the child of ``worker.supervise``, whose PID is the run's, and the one
    tfcli prints) is asked to stop when its supervisor dies, killed even with -9: it checkpoints and ends
    ``stopped``, as ``tfcli experiment stop`` would have it, where it would otherwise train on unsupervised while
    its run is judged failed. Linux (prctl's PR_SET_PDEATHSIG: a SIGTERM, which ``Signals`` takes as a stop);
    elsewhere it trains on as before."""
    supervisor = os.environ.get(SUPERVISOR_VARIABLE, "")
    if not supervisor.isdigit() or not sys.platform.startswith("linux"):
        return
    try:
        asked = ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return
    if asked and os.getppid() != int(supervisor):  # it died before the request was in place
        Signals.ask("stop")
