"""What a worker process has been asked to do, by a signal (``Signals``) or by ``results/control.json``
(``control_request``: how the Ray backend asks, as a job's process is out of its reach)."""

from __future__ import annotations

import json
import signal
from pathlib import Path


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
