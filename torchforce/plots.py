"""Learning-curve plots (matplotlib, no display needed): return against timesteps and against wall time, with
evaluation results where there are some; a group of runs (seeds) as its mean curve in a confidence band.

The logs are read while a worker may still be appending to them: a last line without its newline is being written
(or was cut off by a crash) and is left out.
"""

from __future__ import annotations

import math
import os
import secrets
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from torchforce.client.aggregate import (
    WINDOW,
    aligned,
    bootstrap_band,
    bootstrap_interval,
    overlapping,
    running_mean,
)
from torchforce.client.errors import ClientError, ClientWarning
from torchforce.client.report import episode_record, evaluation_record, whole_lines

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def step_label(value: float, _position: object = None) -> str:
    """A tick label for a count of steps: 250k, 1.5M (long counts run into each other on an axis)."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def label_steps(axis: Axes) -> None:
    """Label the x axis of ``axis`` (a matplotlib Axes) with ``step_label``."""
    from matplotlib.ticker import FuncFormatter

    axis.xaxis.set_major_formatter(FuncFormatter(step_label))


def read_episode_log(path: str | Path) -> list[dict]:
    """The JSON-lines episode log (episode, timesteps, return, length, wall_time); none when there is no such file
    (a run not started yet). Lines that are no whole record (damaged, or the last one still being written) are left
    out, as ``tfcli``'s tables leave them out (``report.episode_record``; the tables count and report them)."""
    return _records(Path(path), episode_record)


def read_evaluation_log(path: str | Path) -> list[dict]:
    """A worker's ``evaluations.jsonl`` (timesteps, episodes, mean_return, std_return, returns, wall_time); none
    when there is no such file. Lines that are no whole record are left out, as in ``read_episode_log``."""
    return _records(Path(path), evaluation_record)


def _records(path: Path, parse: Callable[[bytes], dict | None]) -> list[dict]:
    if not path.is_file():
        return []
    return [record for record in map(parse, whole_lines(path)) if record is not None]


Source = str | Path | Sequence[str | Path]  # a run's episode log, or the logs of a group's runs


def plot_learning_curves(
    logs: Mapping[str, Source],
    output: str | Path,
    *,
    evaluations: dict[str, list[dict]] | None = None,
    window: int = WINDOW,
) -> Path:
    """Learning curves: episode return smoothed over ``window`` episodes (the mean of the last ``window``, as
    every table of tfcli has it) against timesteps (left) and wall-clock seconds (right), in the order of ``logs``.

    A run (``logs`` maps its label to its episode log) is one line; on the left its evaluations' mean returns are
    points, with bars of one standard deviation where the records have ``std_return``. ``evaluations`` gives them
    per run; without it, each run's are read from the ``evaluations.jsonl`` next to its episode log, where there is
    one (a worker's results folder).

    A group (``logs`` maps its label to its runs' episode logs) is the mean curve across its runs with a 95%
    bootstrap band over seeds (``aggregate.bootstrap_band``), each run's smoothed curve interpolated onto a grid
    of the steps (or seconds) every run has reached. The band stops where the first run stops: past it the mean
    would hold that run at its last return, a flat line the run may yet leave (``compare``'s best mean does hold
    it, so as to end at the final mean). Its evaluation rounds, where all its runs have them, are the mean across
    runs with a 95% bootstrap interval. An evaluation whose mean return is no number (NaN, infinite) has no point,
    nor has a group's round that holds one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (by_steps, by_time) = plt.subplots(1, 2, figsize=(12, 4.5))
    for label, source in logs.items():
        if isinstance(source, (str, Path)):
            points = None if evaluations is None else evaluations.get(label, [])
            _draw_run(by_steps, by_time, label, Path(source), points, window)
        else:
            _draw_group(by_steps, by_time, label, [Path(path) for path in source], window)
    by_steps.set_xlabel("environment steps")
    label_steps(by_steps)
    by_time.set_xlabel("wall-clock seconds")
    for axis in (by_steps, by_time):
        axis.set_ylabel(f"episode return, smoothed over {window} episodes")
        axis.grid(alpha=0.3)
        if axis.get_legend_handles_labels()[0]:
            axis.legend(loc="best", fontsize="small")  # (lower right hid a falling run's last evaluation)
    figure.tight_layout()
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    save_figure(figure, output)
    plt.close(figure)
    return output


def save_figure(figure: Figure, output: Path) -> None:
    """``figure`` as a PNG at ``output``, whole or not at all: written beside it, then renamed over it, so a save
    that fails part way leaves the plot that was there. A file system that refuses it is a ClientError."""
    partial = output.with_name(f".{output.name}.{secrets.token_hex(4)}.partial")
    try:
        figure.savefig(partial, dpi=100, format="png")
        os.replace(partial, output)
    except OSError as error:
        raise ClientError(f"cannot write the plot '{output}': {error.strerror or error}") from error
    finally:
        partial.unlink(missing_ok=True)


def _curves(records: list[dict], window: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Steps, seconds and the smoothed returns of an episode log's records."""
    steps = np.array([r["timesteps"] for r in records], dtype=float)
    seconds = np.array([r.get("wall_time", 0.0) for r in records], dtype=float)
    return steps, seconds, running_mean(np.array([r["return"] for r in records], dtype=float), window)


def _draw_run(by_steps: Axes, by_time: Axes, label: str, path: Path, points: list[dict] | None, window: int) -> None:
    records = read_episode_log(path)
    if not records:
        return
    steps, seconds, returns = _curves(records, window)
    (line,) = by_steps.plot(steps, returns, label=label)
    by_time.plot(seconds, returns, label=label, color=line.get_color())
    if points is None:
        points = read_evaluation_log(path.parent / "evaluations.jsonl")
    points = [point for point in points if math.isfinite(point["mean_return"])]  # a NaN round has no point
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


def run_name(log: Path) -> str:
    """The run an episode log belongs to: its experiment's folder (``<experiment>/results/episodes.jsonl``), or
    the log's own name elsewhere."""
    return log.parent.parent.name if log.parent.name == "results" else log.name


def _draw_group(by_steps: Axes, by_time: Axes, label: str, paths: list[Path], window: int) -> None:
    found = [(path, _curves(read_episode_log(path), window)) for path in paths]
    found = [(path, curves) for path, curves in found if len(curves[0])]
    color = None
    for axis, index in ((by_steps, 0), (by_time, 1)):
        indices = overlapping([curves[index] for _, curves in found])
        if len(indices) < len(found) and index == 0:
            left = [run_name(path) for i, (path, _) in enumerate(found) if i not in indices]
            warnings.warn(
                f"{label}: {', '.join(left)} left out of the mean curve: too little in common yet with the steps of "
                "the other runs",
                ClientWarning,
                stacklevel=3,
            )
        kept = [(found[i][1][index], found[i][1][2]) for i in indices]
        grid, matrix = aligned(kept)
        if not grid.size:
            continue
        mean, low, high = bootstrap_band(matrix)
        marker = "o" if len(grid) == 1 else None  # a single point draws no line
        named = f"{label} (mean of {len(kept)} seeds, 95% CI)" if len(kept) > 1 else f"{label} (1 seed)"
        (line,) = axis.plot(grid, mean, label=named, color=color, marker=marker)
        color = line.get_color()
        if len(kept) > 1:  # one seed gives no interval
            axis.fill_between(grid, low, high, color=color, alpha=0.2, linewidth=0)
    rounds = [read_evaluation_log(path.parent / "evaluations.jsonl") for path, _ in found]
    rounds = [points for points in rounds if points]
    count = min((len(points) for points in rounds), default=0)
    if count == 0 or color is None:
        return
    steps, means, below, above = [], [], [], []
    for k in range(count):
        values = [points[k]["mean_return"] for points in rounds]
        if not all(math.isfinite(value) for value in values):
            continue  # a round in which a seed's result is no number has no mean: no point
        steps.append(float(np.mean([points[k]["timesteps"] for points in rounds])))
        bottom, top = bootstrap_interval(values)
        means.append(float(np.mean(values)))
        below.append(means[-1] - bottom)
        above.append(top - means[-1])
    if not means:
        return
    several = len(rounds) > 1  # one seed gives no interval
    by_steps.errorbar(
        steps,
        means,
        yerr=[below, above] if several else None,
        fmt="s",
        color=color,
        markersize=4,
        capsize=3,
        label=f"{label} (evaluation, mean of {len(rounds)} seeds, 95% CI)"
        if several
        else f"{label} (evaluation, 1 seed)",
    )
