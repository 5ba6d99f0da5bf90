"""Learning-curve plots (matplotlib, no display needed): return against timesteps and against wall time."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np


def read_episode_log(path: str | Path) -> list[dict]:
    """The JSON-lines episode log (episode, timesteps, return, length, wall_time). Lines that are no whole record
    (cut off by a crash, damaged) are left out (``tfcli`` counts and reports them)."""
    records = []
    with open(path, errors="replace") as handle:
        for line in handle:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and all(
                isinstance(record.get(key), (int, float)) and not isinstance(record.get(key), bool)
                for key in ("timesteps", "return")
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
    """One line per run: smoothed episode return against timesteps (left) and wall-clock seconds (right);
    evaluation means are drawn as markers where given."""
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
        for point in (evaluations or {}).get(label, []):
            by_steps.plot(point["timesteps"], point["mean_return"], "o", color=line.get_color(), markersize=4)
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
