"""Figures of an experiment's episode log: recent and best mean returns, steps and time to a threshold."""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from torchforce.client.commands.output import relative
from torchforce.client.errors import ClientWarning

WINDOW = 100


def read_episodes(path: Path) -> list[dict]:
    """The episode log's records. A line that is not a whole record (cut off by a crash, garbage, a wrong type) is
    skipped; skipped lines are counted and reported once, as a ClientWarning naming the file."""
    if not path.is_file():
        return []
    records, damaged = [], 0
    with open(path, "rb") as file:
        for line in file:
            record = _episode(line)
            if record is None:
                damaged += line.strip() != b""
            else:
                records.append(record)
    if damaged:
        lines = "line" if damaged == 1 else "lines"
        warnings.warn(f"{damaged} damaged {lines} skipped in {relative(path)}", ClientWarning, stacklevel=2)
    return records


def _episode(line: bytes) -> dict | None:
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


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def running_mean(values: np.ndarray, window: int = WINDOW) -> np.ndarray:
    """Mean of the last ``window`` values (fewer at the start), one per value."""
    if len(values) == 0:
        return values
    sums = np.cumsum(np.insert(values.astype(float), 0, 0.0))
    counts = np.minimum(np.arange(1, len(values) + 1), window)
    return (sums[1:] - sums[np.arange(1, len(values) + 1) - counts]) / counts


@dataclass
class Summary:
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

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(name: str, records: list[dict], threshold: float | None = None) -> Summary:
    if not records:
        return Summary(name, 0, 0, None, None, None, None, threshold)
    returns = np.array([r["return"] for r in records], dtype=float)
    means = running_mean(returns)
    steps = np.array([r["timesteps"] for r in records])
    seconds = np.array([r.get("wall_time", 0.0) for r in records], dtype=float)
    summary = Summary(
        name=name,
        episodes=len(records),
        timesteps=int(steps[-1]),
        seconds=float(seconds[-1]),
        final_mean_return=float(means[-1]),
        best_mean_return=float(means.max()),
        steps_per_second=float(steps[-1] / seconds[-1]) if seconds[-1] > 0 else None,
        threshold=threshold,
    )
    if threshold is not None:
        reached = np.flatnonzero(means >= threshold)
        if len(reached):
            summary.timesteps_to_threshold = int(steps[reached[0]])
            summary.seconds_to_threshold = float(seconds[reached[0]])
    return summary
