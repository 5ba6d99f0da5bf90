"""A monitor's episode records: one JSON line per finished episode (or real Atari game) in ``DIR/episodes.jsonl``,
appended by every environment that shares the directory (the copies of a vector, the environments of a resumed run,
Ray workers started again): each record numbered after the file's last, under ``flock`` where the file system has
locks, a line cut off by a crash removed first (``append_record``)."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, SupportsFloat

from torchforce.spec import SpecError

RECORDS_FILE = "episodes.jsonl"  # a monitor's records, in its directory
TAIL_BYTES = 4096  # how much of a records file is read back at first to find its last record (one is ~150 bytes)


class EpisodeLog:
    """Appends one JSON line per finished episode to ``file`` (the 2018 monitor's statistics), with the keys
    ``extra()`` returns at the episode's end added (the Atari game monitor adds ``frames``); each record is numbered
    after the file's last (``append_record``)."""

    def __init__(self, file: Path, extra: Callable[[], dict[str, Any]] | None = None) -> None:
        self.file = file
        self.extra = extra
        self.reward = 0.0
        self.length = 0
        self.start = time.monotonic()

    def step(self, reward: SupportsFloat, terminated: bool, truncated: bool) -> None:
        self.reward += float(reward)
        self.length += 1
        if terminated or truncated:
            record = {
                "reward": self.reward,
                "length": self.length,
                "terminal": 1 if terminated else 2,
                "seconds": round(time.monotonic() - self.start, 6),
                **(self.extra() if self.extra is not None else {}),
            }
            append_record(self.file, record)
            self.reset()

    def reset(self) -> None:
        self.reward, self.length, self.start = 0.0, 0, time.monotonic()

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a checkpoint's environments) with the seconds the episode has lasted, not the monotonic clock's
        reading at its start, which means nothing to the process that resumes it, later or on another machine."""
        state = dict(self.__dict__)
        state["elapsed"] = time.monotonic() - state.pop("start")
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        if "elapsed" in state:  # (a log pickled before kept its start)
            state["start"] = time.monotonic() - state.pop("elapsed")
        self.__dict__.update(state)


def records_file(directory: Path, *, keep: bool, safe: bool = False, path: str = "monitor") -> Path:
    """``directory/episodes.jsonl``, the directory made. The records already there are kept (``keep``: a run that
    continues them), else removed, or with ``safe`` refused: a SpecError at ``path``, the monitor's place in the
    spec."""
    directory.mkdir(parents=True, exist_ok=True)
    file = directory / RECORDS_FILE
    if keep:
        return file
    if safe and file.exists() and file.stat().st_size:
        raise SpecError(path, f"'{directory}' already holds episode records and monitor_safe is set")
    file.unlink(missing_ok=True)
    return file


def append_record(file: Path, record: dict[str, Any]) -> int:
    """Append ``record`` to the records ``file`` as the episode after the file's last (0 for the first), holding the
    file's lock meanwhile, so that whatever appends to one file (the copies of a vectorized environment, in any
    process) numbers one sequence; returns its number. A last line that a crash cut short (no newline) goes first."""
    with file.open("a+b") as stream:  # closing it writes the record, then drops the lock
        if _lock(stream):
            _cut_torn_line(stream)
        elif not _ends_a_line(stream):  # unlocked (another writer may be halfway through its line): the record
            stream.write(b"\n")  # starts a line of its own, and nothing is cut
        number = last_episode(stream) + 1
        stream.write(json.dumps({"episode": number, **record}).encode() + b"\n")
    return number


def _ends_a_line(stream: BinaryIO) -> bool:
    """Whether ``stream``'s file is empty or ends with a newline (the position left at its end)."""
    end = stream.seek(0, os.SEEK_END)
    if not end:
        return True
    stream.seek(end - 1)
    return stream.read(1) == b"\n"


def _lock(stream: BinaryIO) -> bool:
    """Hold ``stream``'s file alone (``flock``) until it is closed, and say whether it is held: where there are no
    such locks (Windows, a file system without them: NFS without its lock daemon) records are numbered without, and
    a warning says so once."""
    global _UNLOCKED_WARNED
    try:
        import fcntl

        fcntl.flock(stream, fcntl.LOCK_EX)
        return True
    except (ImportError, OSError) as error:
        if not _UNLOCKED_WARNED:
            _UNLOCKED_WARNED = True
            logging.getLogger(__name__).warning(
                "the monitor's records file %s cannot be locked (%s): copies writing it at once may number their "
                "episodes alike",
                stream.name,
                error,
            )
        return False


_UNLOCKED_WARNED = False


def last_episode(stream: BinaryIO) -> int:
    """The ``episode`` of the last whole record in ``stream`` (a records file open for reading), or -1 when it has
    none. Read from the back, a growing piece at a time; lines that are not records are passed over."""
    end = stream.seek(0, os.SEEK_END)
    size = TAIL_BYTES
    while True:
        start = max(0, end - size)
        stream.seek(start)
        lines = stream.read(end - start).split(b"\n")[:-1]  # (after the last newline: no whole line)
        for line in reversed(lines[1:] if start else lines):  # (the first piece may begin before ``start``)
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):
                continue
            episode = record.get("episode") if isinstance(record, dict) else None
            if isinstance(episode, int) and not isinstance(episode, bool):
                return episode
        if start == 0:
            return -1
        size *= 4


def _cut_torn_line(stream: BinaryIO) -> None:
    """Truncate ``stream`` (open for reading and writing) after its last newline: what follows it is a record whose
    write a crash cut short, to which the next record must not be joined."""
    end = stream.seek(0, os.SEEK_END)
    position = end
    while position > 0:
        start = max(0, position - TAIL_BYTES)
        stream.seek(start)
        newline = stream.read(position - start).rfind(b"\n")
        if newline >= 0:
            position = start + newline + 1
            break
        position = start
    if position < end:
        stream.truncate(position)
