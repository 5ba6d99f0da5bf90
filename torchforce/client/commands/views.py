"""What the experiment commands show: the status row of an experiment, the list table, ``show``'s lines, the
progress bar of ``--follow``/``watch``, and the comparison table."""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torchforce.client.commands.output import elapsed, format_table, relative
from torchforce.client.experiment import Experiment
from torchforce.client.project import Project
from torchforce.client.report import Summary
from torchforce.client.store import ExperimentRecord


def agent_name(spec: dict) -> str:
    return str(spec["agent"].get("type", "?"))


def environment_name(spec: dict) -> str:
    environment = spec["environment"]
    return str(environment.get("gym_id") or environment.get("type", "?"))


# The fields of results/progress.json that views show, and their types. The worker writes the file whole (through a
# rename), but a person, a full disk or another program may leave anything there: a field of another type is
# dropped and reported as damaged, and shows as "?" (a missing one as 0 or "-").
PROGRESS_FIELDS: dict[str, type | tuple[type, ...]] = {
    "state": str,
    "pid": int,
    "timesteps": int,
    "episodes": int,
    "elapsed_seconds": (int, float),
    "steps_per_second": (int, float),
    "mean_return_100": (int, float),
    "last_return": (int, float),
    "updated_at": (int, float),
}
DAMAGED = "?"


def read_progress(experiment: Experiment) -> tuple[dict[str, Any], list[str]]:
    """The experiment's progress file, keeping only the fields of the right type (counters >= 0, finite numbers),
    and the names of the fields that are damaged (every field when the file is not a JSON object at all)."""
    raw = experiment.progress()  # wherever the worker writes it; {} when there is none or it is unreadable
    if not isinstance(raw, dict) or not raw:
        return {}, list(PROGRESS_FIELDS) if _unreadable(experiment.results / "progress.json") else []
    progress, damaged = {}, []
    for key, kind in PROGRESS_FIELDS.items():
        value = raw.get(key)
        if value is None:
            continue
        if _fits(value, kind):
            progress[key] = value
        else:
            damaged.append(key)
    return progress, damaged


def _unreadable(path: Path) -> bool:
    """Whether ``path`` is there but holds no JSON object."""
    try:
        return not isinstance(json.loads(path.read_bytes()), dict)
    except FileNotFoundError:
        return False
    except (OSError, ValueError, RecursionError):
        return True


def _fits(value: Any, kind: type | tuple[type, ...]) -> bool:
    if isinstance(value, bool) or not isinstance(value, kind):
        return False
    if isinstance(value, (int, float)):
        return math.isfinite(value) and (kind is not int or value >= 0)
    return True


def progress_fraction(spec: dict, progress: dict, status: str) -> float | None:
    """How far the run is, 0..1: the larger of the timestep and episode fractions (whichever limit ends the run
    first), and 1 once it has finished. None when the spec sets no limit."""
    if status == "finished":
        return 1.0
    fractions = []
    if spec.get("total_timesteps"):
        fractions.append(progress.get("timesteps", 0) / spec["total_timesteps"])
    if spec.get("episodes"):
        fractions.append(progress.get("episodes", 0) / spec["episodes"])
    return min(max(fractions), 1.0) if fractions else None


def status_row(experiment: Experiment) -> dict[str, Any]:
    """The experiment's row for ``list`` and ``show``: fields of a damaged progress file are None, and the row's
    ``progress_damaged`` names them."""
    record = experiment.record()
    spec = experiment.checked_spec
    progress, damaged = read_progress(experiment)
    counters_damaged = bool({"timesteps", "episodes"} & set(damaged)) and record.status != "finished"
    return {
        "name": experiment.name,
        "agent": agent_name(spec),
        "environment": environment_name(spec),
        "run_mode": spec["run_mode"],
        "num_workers": spec["num_workers"],
        "num_environments": spec.get("num_environments", 1),
        "cluster": record.cluster or record.backend,  # where it runs: "local", or the name of a Ray cluster
        "spec_cluster": (spec.get("cluster") or {}).get("name"),
        "status": record.status,
        "pid": record.pid,
        "timesteps": None if "timesteps" in damaged else progress.get("timesteps", 0),
        "episodes": None if "episodes" in damaged else progress.get("episodes", 0),
        "total_timesteps": spec.get("total_timesteps"),
        "total_episodes": spec.get("episodes"),
        "progress": None if counters_damaged else progress_fraction(spec, progress, record.status),
        "mean_return_100": progress.get("mean_return_100"),
        "steps_per_second": progress.get("steps_per_second"),
        "elapsed_seconds": progress.get("elapsed_seconds"),
        "message": record.message,
        "progress_damaged": damaged,
    }


def broken_row(record: ExperimentRecord, project: Project, error: Exception) -> dict[str, Any]:
    """A list row for an experiment whose folder or spec file is missing or damaged."""
    spec_file = relative(project.experiment_folder(record.name) / "experiment.json")
    missing = not (project.experiment_folder(record.name) / "experiment.json").is_file()
    problem = "missing" if missing else f"unreadable ({type(error).__name__}: {error})"
    return {
        "name": record.name,
        "agent": None,
        "environment": None,
        "run_mode": None,
        "num_workers": None,
        "num_environments": None,
        "cluster": record.backend,
        "spec_cluster": record.cluster,
        "status": record.status,
        "pid": record.pid,
        "timesteps": 0,
        "episodes": 0,
        "total_timesteps": None,
        "total_episodes": None,
        "progress": None,
        "mean_return_100": None,
        "steps_per_second": None,
        "elapsed_seconds": None,
        "message": f"{spec_file} is {problem}",
        "progress_damaged": [],
    }


def list_table(rows: list[dict[str, Any]]) -> str:
    headers = ["Experiment", "Agent", "Environment", "Run-Mode", "Workers", "Cluster", "Status", "Progress"]
    table = [
        [
            r["name"],
            r["agent"],
            r["environment"],
            r["run_mode"],
            r["num_workers"],
            r["cluster"],
            r["status"],
            _shown(r, "progress", lambda value: f"{100 * value:.0f}%", also="timesteps"),
            _shown(r, "mean_return_100", lambda value: f"{value:.1f}"),
        ]
        for r in rows
    ]
    return format_table([*headers, "Mean return (100)"], table)


def _shown(row: dict[str, Any], key: str, form: Callable[[Any], str], *, also: str | None = None) -> str | None:
    """``row[key]`` formatted; "?" when it (or the field ``also``, which it is computed from) is damaged, None
    (shown as "-") when it is missing."""
    damaged = row["progress_damaged"]
    if row[key] is None and (key in damaged or also in damaged):
        return DAMAGED
    return None if row[key] is None else form(row[key])


def show_lines(experiment: Experiment, row: dict[str, Any], recent: list[float]) -> list[str]:
    spec = experiment.checked_spec
    record = experiment.project.store.experiment(experiment.name)
    backend = record.backend if record is not None else "local"
    kind = {"ray": "Ray", "gke": "GKE"}.get(backend, "")
    place = "this machine" if backend == "local" else f"the {kind} cluster '{row['cluster']}'"
    runs_on = row["cluster"] + (
        f" (its spec names the cluster '{row['spec_cluster']}'; this run is on {place})"
        if row["spec_cluster"] and row["spec_cluster"] != row["cluster"]
        else ""
    )
    lines = [
        f"Experiment   {experiment.name}" + (f" - {spec['description']}" if spec.get("description") else ""),
        f"Status       {row['status']}" + (f" (PID {row['pid']})" if row["pid"] else ""),
        f"Agent        {row['agent']}" + (f" ({spec['sources']['agent']})" if spec["sources"].get("agent") else ""),
        f"Environment  {row['environment']} x {row['num_environments']}",
        f"Run mode     {row['run_mode']}, seed {spec.get('seed')}",
        f"Runs on      {runs_on}",
        f"Budget       {budget(spec)}",
        f"Progress     {_shown(row, 'timesteps', '{:,}'.format)} timesteps, "
        f"{_shown(row, 'episodes', '{:,}'.format)} episodes"
        + (f" ({100 * row['progress']:.0f}%)" if row["progress"] is not None else "")
        + (f", {elapsed(row['elapsed_seconds'])}" if row["elapsed_seconds"] else ""),
        f"Speed        {_shown(row, 'steps_per_second', '{:,.0f}'.format) or 0} steps/s",
        "Mean return  " + (_shown(row, "mean_return_100", "{:.2f} (last 100)".format) or "-"),
        "Recent       " + (", ".join(f"{value:g}" for value in recent) or "-"),
        f"Checkpoint   {'yes' if experiment.has_checkpoint() else 'none yet'}",
        f"Results      {relative(experiment.results)}"
        + ("" if experiment.storage().local == experiment.results else f" (running: {experiment.storage().location})"),
    ]
    if row["message"]:
        lines.append("Message      " + row["message"].replace("\n", "\n             "))
    if row["progress_damaged"]:
        damaged = row["progress_damaged"]
        problem = "is unreadable" if len(damaged) == len(PROGRESS_FIELDS) else "has wrong values: " + ", ".join(damaged)
        lines.append(f"Damaged      {relative(experiment.results / 'progress.json')} {problem} (shown as '?')")
    return lines


def budget(spec: dict) -> str:
    parts = []
    if spec.get("total_timesteps"):
        parts.append(f"{spec['total_timesteps']:,} timesteps")
    if spec.get("episodes"):
        parts.append(f"{spec['episodes']:,} episodes")
    if spec.get("max_timesteps_per_episode"):
        parts.append(f"episodes cut at {spec['max_timesteps_per_episode']:,} steps")
    return ", ".join(parts)


def _this_run(experiment: Experiment, record: ExperimentRecord) -> dict[str, Any]:
    """The progress file if this run's worker wrote it: while a (re)started worker has not written its own yet,
    the file still holds the previous run's counters, which are not shown."""
    progress, _ = read_progress(experiment)  # written by this run once it is newer than the run's start
    if record.status == "running" and progress.get("updated_at", 0.0) < (record.started_at or 0.0):
        return {}
    return progress


def follow(experiment: Experiment, since: int | None = None) -> int:
    """A progress bar until the experiment stops running; exit code 0 if it finished or was paused/stopped.

    The bar counts timesteps from ``since`` (a resumed run's checkpoint; default: where the run is now), so its
    steps/s is this run's. Its length is the timestep budget, or an estimate from the episode fraction when the
    episode limit will end the run first, so its percentage is the one ``list`` shows.
    """
    from tqdm import tqdm

    spec = experiment.checked_spec
    record = experiment.record()
    start = since if since is not None else _this_run(experiment, record).get("timesteps", 0)
    bar = tqdm(
        total=spec.get("total_timesteps") or None,
        initial=start,
        unit="step",
        desc=experiment.name,
        dynamic_ncols=True,
        file=sys.stdout,
        mininterval=1.0 if sys.stdout.isatty() else 10.0,
    )
    try:
        while True:
            record = experiment.record()
            progress = _this_run(experiment, record)
            steps = max(progress.get("timesteps", bar.n), bar.n)
            fraction = progress_fraction(spec, progress, record.status) if progress else None
            if fraction and steps:
                bar.total = max(round(steps / fraction), steps)
            bar.update(steps - bar.n)
            mean = progress.get("mean_return_100")
            bar.set_postfix(
                episodes=progress.get("episodes", 0), mean_return="-" if mean is None else f"{mean:.1f}", refresh=False
            )
            if record.status != "running":
                break
            time.sleep(0.5)
    finally:
        bar.close()
    print(f"'{experiment.name}' is {record.status}" + (f": {record.message}" if record.message else ""))
    return 0 if record.status in ("finished", "paused", "stopped") else 1


def compare_table(summaries: list[Summary], threshold: float | None) -> str:
    def number(value: float | None, digits: int = 1) -> str | None:
        return None if value is None else f"{value:,.{digits}f}"

    headers = ["Experiment", "Episodes", "Timesteps", "Time", "Best mean(100)", "Final mean(100)", "Steps/s"]
    if threshold is not None:
        headers += [f"Steps to {threshold:g}", f"Time to {threshold:g}"]
    rows = []
    for s in summaries:
        row = [
            s.name,
            f"{s.episodes:,}",
            f"{s.timesteps:,}",
            elapsed(s.seconds),
            number(s.best_mean_return),
            number(s.final_mean_return),
            number(s.steps_per_second, 0),
        ]
        if threshold is not None:
            row += [
                None if s.timesteps_to_threshold is None else f"{s.timesteps_to_threshold:,}",
                elapsed(s.seconds_to_threshold),
            ]
        rows.append(row)
    return format_table(headers, rows)
