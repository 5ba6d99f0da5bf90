"""Learning-curve plots (matplotlib, no display needed): return against timesteps and against wall time, with
evaluation results where there are some.

The logs are read while a worker may still be appending to them: a last line without its newline is being written
(or was cut off by a crash) and is left out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np


def read_episode_log(path: str | Path) -> list[dict]:
    """The JSON-lines episode log (episode, timesteps, return, length, wall_time). Lines that are no whole record
    (damaged, or the last one still being written) are left out (``tfcli`` counts and reports damaged ones)."""
    return _records(path, ("timesteps", "return"))


def read_evaluation_log(path: str | Path) -> list[dict]:
    """A worker's ``evaluations.jsonl`` (timesteps, episodes, mean_return, std_return, returns, wall_time); none
    when there is no such file. Lines that are no whole record are left out, as in ``read_episode_log``."""
    return _records(path, ("timesteps", "mean_return", "std_return")) if Path(path).is_file() else []


def _records(path: str | Path, numbers: tuple[str, ...]) -> list[dict]:
    """The objects of a JSON-lines file whose ``numbers`` fields are numbers, from its whole lines."""
    records = []
    with open(path, errors="replace") as handle:
        for line in handle:
            if not line.endswith("\n"):  # the last line, still being written
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and all(
                isinstance(record.get(key), (int, float)) and not isinstance(record.get(key), bool) for key in numbers
            ):
                records.append(record)
    return records


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    if len(values) == 0 or window <= 1:
        return values
    kernel = np.ones(min(window, len(values))) / min(window, len(values))
    padded = np.concatenate([np.full(len(kernel) - 1, values[0]), values])
    return np.convolve(padded, kernel, mode="valid")


def plot_learning_curves(
    logs: Mapping[str, str | Path],
    output: str | Path,
    *,
    evaluations: dict[str, list[dict]] | None = None,
    window: int = 20,
) -> Path:
    """One line per run: smoothed episode return against timesteps (left) and wall-clock seconds (right), and on
    the left the evaluations' mean returns as points, with bars of one standard deviation where the records have
    ``std_return``. ``evaluations`` gives them per run; without it, each run's are read from the
    ``evaluations.jsonl`` next to its episode log, where there is one (a worker's results folder)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (by_steps, by_time) = plt.subplots(1, 2, figsize=(12, 4.5))
    for label, path in logs.items():
        records = read_episode_log(path)
        if not records:
            continue
        steps = np.array([r["timesteps"] for r in records])
        seconds = np.array([r["wall_time"] for r in records])
        returns = smooth(np.array([r["return"] for r in records], dtype=float), window)
        (line,) = by_steps.plot(steps, returns, label=label)
        by_time.plot(seconds, returns, label=label, color=line.get_color())
        if evaluations is None:
            points = read_evaluation_log(Path(path).parent / "evaluations.jsonl")
        else:
            points = evaluations.get(label, [])
        if points:
            by_steps.errorbar(
                [point["timesteps"] for point in points],
                [point["mean_return"] for point in points],
                yerr=[point.get("std_return", 0.0) for point in points],
                fmt="o",
                color=line.get_color(),
                markersize=4,
                capsize=3,
                label=f"{label} (evaluation, mean ± std)",
            )
    by_steps.set_xlabel("environment steps")
    by_time.set_xlabel("wall-clock seconds")
    for axis in (by_steps, by_time):
        axis.set_ylabel(f"episode return (mean of {window})")
        axis.grid(alpha=0.3)
        axis.legend(loc="lower right")
    figure.tight_layout()
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=100)
    plt.close(figure)
    return output
