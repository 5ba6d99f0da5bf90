"""A process's SIGINT and SIGTERM handlers while it starts Ray. ``ray.init`` begins by putting a SIGTERM handler of
its own in place, one that exits at once (``sys.exit``): in the seconds a cluster takes to start, a stop asked of a
run (tfcli's SIGTERM to its worker) would end it with a SystemExit, as failed, where the run's own handler
checkpoints and stops it. So while Ray starts, a caller with a handler of its own keeps it (``handlers_kept``), and
once Ray has started, whatever Ray changed is put back (``restore_signal_handlers``)."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any


def signal_handlers() -> dict[int, Any]:
    """The process's SIGINT and SIGTERM handlers (none outside the main thread, which alone may set them)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}


def restore_signal_handlers(handlers: dict[int, Any]) -> None:
    """Put back what ``signal_handlers`` found: a stop asked for (tfcli's SIGTERM) while the Ray workers start is the
    caller's to handle, not Ray's exit."""
    for number, handler in handlers.items():
        if handler is not None and signal.getsignal(number) is not handler:
            signal.signal(number, handler)


@contextlib.contextmanager
def handlers_kept(handlers: dict[int, Any]) -> Iterator[None]:
    """Around ``ray.init``: where ``handlers`` (``signal_handlers``) hold a SIGTERM handler of the caller's own, Ray
    does not replace it with its exit (its ``ray._private.utils.set_sigterm_handler`` does nothing meanwhile), so a
    SIGTERM that comes while Ray starts reaches the caller. Without such a handler, or in a Ray that installs its
    own some other way, Ray's stays until ``restore_signal_handlers``."""
    utils: Any = sys.modules.get("ray._private.utils")  # (Ray's own, untyped)
    if not callable(handlers.get(signal.SIGTERM)) or utils is None or not hasattr(utils, "set_sigterm_handler"):
        yield
        return
    install = utils.set_sigterm_handler
    utils.set_sigterm_handler = lambda handler: None
    try:
        yield
    finally:
        utils.set_sigterm_handler = install
