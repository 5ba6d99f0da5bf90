"""The worker's JSON-lines results (``episodes.jsonl``, ``evaluations.jsonl``): writing them while tfcli reads
them, cutting them back to a checkpoint, reading them; and the figures of an episode log (recent and best mean
returns, steps and time to a threshold) and of a group of runs (``aggregate`` has the statistics).

A line is complete once its newline is written. The worker writes whole lines, but a reader may still catch the
last one half written (or a crash may have cut it off): every reader here leaves out a final line without its
newline, silently, as the line it will be once written (or, after a crash, the line the resumed run writes again).
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np

from torchforce.client.aggregate import (
    WINDOW,
    Spread,
    aligned,
    bootstrap_interval,
    first_crossing,
    interquartile_mean,
    running_mean,
)
from torchforce.client.commands.output import relative
from torchforce.client.errors import ClientWarning

FLUSH_SECONDS = 0.5  # a record appended to a results log is in the file this long afterwards at the latest
SCAN_BYTES = 1 << 16  # how much of a log's end ``drop_after`` reads at a time


# ---------------------------------------------------------------------------------------------- writing


class JsonLines:
    """A JSON-lines results file the worker appends to while readers follow it. ``append`` keeps a record and
    writes what is pending, in whole lines, once ``FLUSH_SECONDS`` have passed since the last write; ``flush``
    writes at once (``due_only``: only if that time has passed, for a caller that polls, so a record never waits
    longer), as a checkpoint and the end of a run do. Threads may append concurrently (the multi-threaded run
    mode's workers log their episodes from their own threads)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = open(path, "ab")  # noqa: SIM115 - held for the run, closed by close()
        self._pending: list[str] = []
        self._lock = threading.Lock()
        self._written = time.monotonic()

    def append(self, record: dict[str, Any]) -> None:
        with self._lock:
            self._pending.append(json.dumps(record) + "\n")
        self.flush(due_only=True)

    def flush(self, *, due_only: bool = False) -> None:
        with self._lock:
            now = time.monotonic()
            if due_only and now - self._written < FLUSH_SECONDS:
                return
            self._written = now
            if self._pending:
                self._file.write("".join(self._pending).encode())
                self._file.flush()
                self._pending.clear()

    def close(self) -> None:
        self.flush()
        self._file.close()


def drop_after(path: Path, field: str, last: float) -> int:
    """Cut the log at ``path`` back to a checkpoint: drop its final lines whose ``field`` is past ``last`` (they
    will be played again), along with damaged lines among them and a final line without its newline; stop at the
    first whole record from the end at or before ``last``. Reads only the end it drops, from the back (logs are
    in the order of ``field``); returns how many lines went."""
    try:
        file = open(path, "r+b")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return 0
    with file:
        position = file.seek(0, os.SEEK_END)
        tail, end, dropped = b"", 0, 0  # tail: the bytes from ``position`` on; its lines from ``end`` on are judged
        while position + end > 0:
            newline = tail.rfind(b"\n", 0, end - 1) if end else -1  # the one ending the line before this one
            if newline < 0 and position > 0:
                begin = max(0, position - SCAN_BYTES)
                file.seek(begin)
                tail, end, position = file.read(position - begin) + tail[:end], end + position - begin, begin
                continue
            line = tail[newline + 1 : end]
            try:
                record = json.loads(line) if line.endswith(b"\n") else None
            except (ValueError, RecursionError):
                record = None
            value = record.get(field) if isinstance(record, dict) else None
            if _number(value) and value <= last:
                break
            end, dropped = newline + 1, dropped + 1
        file.truncate(position + end)
    return dropped


# ---------------------------------------------------------------------------------------------- reading


def whole_lines(path: Path) -> Iterator[bytes]:
    """The lines of ``path`` that end with their newline (see the module doc)."""
    with open(path, "rb") as file:
        for line in file:
            if line.endswith(b"\n"):
                yield line


def read_episodes(path: Path) -> list[dict]:
    """The episode log's records. A line that is not a whole record (garbage, a wrong type) is skipped; skipped
    lines are counted and reported once, as a ClientWarning naming the file. A final line without its newline is
    being written: it is left out and not counted."""
    return _read_records(path, episode_record)


def read_evaluations(path: Path) -> list[dict]:
    """The records of ``evaluations.jsonl``: ``timesteps``, ``episodes`` (training episodes so far),
    ``mean_return``, ``std_return``, ``returns`` (each evaluation episode's) and ``wall_time``; a round whose
    returns were no numbers has NaN (or infinite) figures, a record all the same. Damaged lines are skipped, counted
    and reported as in ``read_episodes``; an absent file has none."""
    return _read_records(path, evaluation_record)


def _read_records(path: Path, parse: Callable[[bytes], dict | None]) -> list[dict]:
    if not path.is_file():
        return []
    records, damaged = [], 0
    for line in whole_lines(path):
        record = parse(line)
        if record is None:
            damaged += line.strip() != b""
        else:
            records.append(record)
    if damaged:
        lines = "line" if damaged == 1 else "lines"
        warnings.warn(f"{damaged} damaged {lines} skipped in {relative(path)}", ClientWarning, stacklevel=3)
    return records


def episode_record(line: bytes) -> dict | None:
    """One line of the log as a record, or None if it is not one: an object with a finite number of ``timesteps``
    (an integer >= 0) and a numeric ``return`` (and ``wall_time``, if given, a finite number)."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):  # ValueError covers bad UTF-8 and JSON
        return None
    if not isinstance(record, dict):
        return None
    steps, value, seconds = record.get("timesteps"), record.get("return"), record.get("wall_time", 0.0)
    if not (isinstance(steps, int) and not isinstance(steps, bool) and steps >= 0):
        return None
    if not _number(value) or not (_number(seconds) and math.isfinite(seconds)):
        return None
    return record


def evaluation_record(line: bytes) -> dict | None:
    """One line of the evaluation log as a record, or None: an object with ``timesteps`` and ``episodes`` (integers
    >= 0), a finite ``wall_time``, numbers ``mean_return`` and ``std_return`` (>= 0) and ``returns`` a list of
    numbers. A round whose returns were no numbers (a diverged policy, an environment's NaN rewards) is a record
    too: its figures are NaN or infinite, and a null among them (a writer that has no NaN) reads as NaN."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(record, dict):
        return None
    counts = (record.get("timesteps"), record.get("episodes"))
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
        return None
    seconds, returns = record.get("wall_time"), record.get("returns")
    if not (_number(seconds) and math.isfinite(seconds)) or not isinstance(returns, list):
        return None
    if not record.keys() >= {"mean_return", "std_return"}:  # a null figure reads as NaN, an absent one is damage
        return None
    mean, deviation = _result(record["mean_return"]), _result(record["std_return"])
    results = [_result(value) for value in returns]
    if mean is None or deviation is None or deviation < 0 or None in results:
        return None
    return {**record, "mean_return": mean, "std_return": deviation, "returns": results}


def _result(value: object) -> float | int | None:
    """A figure of an evaluation round: a number as it is (NaN and infinities too), null as NaN; None if neither."""
    if value is None:
        return math.nan
    return value if _number(value) else None


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def curve(records: list[dict], window: int = WINDOW, *, by: str = "timesteps") -> tuple[np.ndarray, np.ndarray]:
    """A run's learning curve: each episode's ``by`` (``timesteps`` or ``wall_time``) and its return smoothed
    over ``window`` episodes."""
    x = np.array([r.get(by, 0.0) for r in records], dtype=float)
    return x, running_mean(np.array([r["return"] for r in records], dtype=float), window)


def recent_mean(records: list[dict], window: int = WINDOW) -> float | None:
    """The mean return of the last ``window`` episodes; None before the first one."""
    return float(np.mean([r["return"] for r in records[-window:]])) if records else None


@dataclass
class Summary:
    """One run's figures, its returns smoothed over ``window`` episodes."""

    name: str
    episodes: int
    timesteps: int
    seconds: float | None
    final_mean_return: float | None
    best_mean_return: float | None
    steps_per_second: float | None
    threshold: float | None = None
    timesteps_to_threshold: int | None = None
    seconds_to_threshold: float | None = None
    window: int = WINDOW
    kind: str = "experiment"

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(
    name: str,
    records: list[dict],
    threshold: float | None = None,
    window: int = WINDOW,
    timesteps: int | None = None,
    elapsed: float | None = None,
) -> Summary:
    """One run's figures from its episode records. ``timesteps`` and ``elapsed``: the run's own count and seconds
    (its progress, as ``list`` and ``show`` give them; default: the timestep and wall time of its last episode's
    end), which its steps per second are then of too. The best mean return and the threshold are judged over whole
    windows of ``window`` episodes (a run with fewer: the mean of them all), never over a lucky first few
    episodes."""
    if not records:
        return Summary(name, 0, timesteps or 0, None, None, None, None, threshold, window=window)
    steps, means = curve(records, window)
    seconds, _ = curve(records, window, by="wall_time")
    first_whole = first_whole_window(len(means), window)
    whole = means[first_whole:]
    total_steps = max(int(steps[-1]), timesteps or 0)
    total_seconds = max(float(seconds[-1]), elapsed or 0.0)  # the steps past the last episode took time too
    summary = Summary(
        name=name,
        episodes=len(records),
        timesteps=total_steps,
        seconds=total_seconds,
        final_mean_return=float(means[-1]),
        best_mean_return=_best(whole),
        steps_per_second=total_steps / total_seconds if total_seconds > 0 else None,
        threshold=threshold,
        window=window,
    )
    crossed = None if threshold is None else first_crossing(whole, threshold)
    if crossed is not None:
        summary.timesteps_to_threshold = int(steps[first_whole + crossed])
        summary.seconds_to_threshold = float(seconds[first_whole + crossed])
    return summary


def whole_windows(records: list[dict], window: int) -> tuple[np.ndarray, np.ndarray]:
    """A run's smoothed curve (``curve``) from its first whole window of ``window`` episodes on (a run with fewer:
    its last point, the mean of them all)."""
    steps, means = curve(records, window)
    first_whole = first_whole_window(len(means), window)
    return steps[first_whole:], means[first_whole:]


def first_whole_window(episodes: int, window: int) -> int:
    """The index of a smoothed curve's first point over a whole window (with fewer episodes: the last point)."""
    return min(window, episodes) - 1


@dataclass
class GroupSummary:
    """A group's figures across its runs (the seeds of one setup): each run's ``Summary``; the mean of the runs'
    final returns with its 95% bootstrap interval over seeds (none for one seed) and their interquartile mean; the
    peak of the mean curve, each run held at its final return past its last episode (so never below the final
    mean); episodes and timesteps as means per run (how far the group has come, runs not started yet at 0), time
    and speed as means per run that has episodes; and, for a threshold, how many runs reached it and the spread of
    their steps and time to it. Runs without episodes yet count in ``runs`` and in the means of episodes and
    timesteps only."""

    name: str
    runs: list[Summary]
    seeds: list[int | None]
    window: int
    episodes: float
    timesteps: float
    seconds: float | None
    steps_per_second: float | None
    final_mean_return: float | None = None
    final_low: float | None = None
    final_high: float | None = None
    final_iqm: float | None = None
    best_mean_return: float | None = None
    threshold: float | None = None
    reached: int = 0
    timesteps_to_threshold: Spread | None = None
    seconds_to_threshold: Spread | None = None
    kind: str = "group"

    @property
    def counted(self) -> list[Summary]:
        """The runs that have episodes, whose returns the group's figures are made of."""
        return [run for run in self.runs if run.episodes]

    def to_dict(self) -> dict:
        return asdict(self)


def summarize_group(
    name: str,
    logs: dict[str, list[dict]],
    seeds: list[int | None],
    threshold: float | None = None,
    window: int = WINDOW,
    timesteps: dict[str, int | None] | None = None,
    elapsed: dict[str, float | None] | None = None,
) -> GroupSummary:
    """The figures of the group ``name`` from its runs' episode records (``logs``: run name to records, in the
    order of ``seeds``; ``timesteps`` and ``elapsed``: run name to its own count and seconds, as ``summarize``
    takes them)."""
    counts, times = timesteps or {}, elapsed or {}
    runs = [
        summarize(run, records, threshold, window, counts.get(run), times.get(run)) for run, records in logs.items()
    ]
    counted = [run for run in runs if run.episodes]
    group = GroupSummary(
        name=name,
        runs=runs,
        seeds=list(seeds),
        window=window,
        episodes=_mean([run.episodes for run in runs]) or 0.0,
        timesteps=_mean([run.timesteps for run in runs]) or 0.0,
        seconds=_mean([run.seconds for run in counted]),
        steps_per_second=_mean([run.steps_per_second for run in counted]),
        threshold=threshold,
    )
    if counted:
        finals = [run.final_mean_return or 0.0 for run in counted]
        group.final_mean_return = float(np.mean(finals))
        if len(finals) > 1:  # one seed gives no interval (its bootstrap has zero width)
            group.final_low, group.final_high = bootstrap_interval(finals)
        group.final_iqm = interquartile_mean(finals)
        # the mean curve runs on to the last run's end, runs that ended before held at their final returns: it ends
        # at the final mean (up to rounding, so that is taken too), and its peak is never below it
        _, curves = aligned([whole_windows(logs[run.name], window) for run in counted], hold=True)
        group.best_mean_return = _best(np.append(curves.mean(axis=0), group.final_mean_return))
    if threshold is not None:
        reached = [run for run in counted if run.timesteps_to_threshold is not None]
        group.reached = len(reached)
        group.timesteps_to_threshold = Spread.of([float(run.timesteps_to_threshold or 0) for run in reached])
        group.seconds_to_threshold = Spread.of([run.seconds_to_threshold or 0.0 for run in reached])
    return group


def _best(means: np.ndarray) -> float:
    """The highest of smoothed returns, windows spoiled by a NaN return left out (NaN when every one is)."""
    finite = means[~np.isnan(means)]
    return float(finite.max()) if len(finite) else math.nan


def _mean(values: list[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return float(np.mean(present)) if present else None
