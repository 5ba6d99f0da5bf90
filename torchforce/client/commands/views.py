"""What the experiment commands show: the status row of an experiment, the list table, ``show``'s lines, the
progress bar of ``--follow``/``watch``, and the comparison table."""

from __future__ import annotations

import sys
import time
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
    record = experiment.record()
    spec, progress = experiment.spec, experiment.progress()
    return {
        "name": experiment.name,
        "agent": agent_name(spec),
        "environment": environment_name(spec),
        "run_mode": spec["run_mode"],
        "num_workers": spec["num_workers"],
        "num_environments": spec.get("num_environments", 1),
        "cluster": record.backend,  # where it runs; the spec's cluster is ignored by the local backend
        "spec_cluster": (spec.get("cluster") or {}).get("name"),
        "status": record.status,
        "pid": record.pid,
        "timesteps": progress.get("timesteps", 0),
        "episodes": progress.get("episodes", 0),
        "total_timesteps": spec.get("total_timesteps"),
        "total_episodes": spec.get("episodes"),
        "progress": progress_fraction(spec, progress, record.status),
        "mean_return_100": progress.get("mean_return_100"),
        "steps_per_second": progress.get("steps_per_second"),
        "message": record.message,
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
        "message": f"{spec_file} is {problem}",
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
            None if r["progress"] is None else f"{100 * r['progress']:.0f}%",
            None if r["mean_return_100"] is None else f"{r['mean_return_100']:.1f}",
        ]
        for r in rows
    ]
    return format_table([*headers, "Mean return (100)"], table)


def show_lines(experiment: Experiment, row: dict[str, Any], recent: list[float]) -> list[str]:
    spec, progress = experiment.spec, experiment.progress()
    runs_on = row["cluster"] + (
        f" (the cluster '{row['spec_cluster']}' of its spec is ignored by the {row['cluster']} backend)"
        if row["spec_cluster"]
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
        f"Progress     {row['timesteps']:,} timesteps, {row['episodes']:,} episodes"
        + (f" ({100 * row['progress']:.0f}%)" if row["progress"] is not None else "")
        + (f", {elapsed(progress.get('elapsed_seconds'))}" if progress.get("elapsed_seconds") else ""),
        f"Speed        {row['steps_per_second'] or 0:,.0f} steps/s",
        "Mean return  " + ("-" if row["mean_return_100"] is None else f"{row['mean_return_100']:.2f} (last 100)"),
        "Recent       " + (", ".join(f"{value:g}" for value in recent) or "-"),
        f"Checkpoint   {'yes' if experiment.has_checkpoint() else 'none yet'}",
        f"Results      {relative(experiment.results)}",
    ]
    if row["message"]:
        lines.append("Message      " + row["message"].replace("\n", "\n             "))
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
    progress = experiment.progress()
    if record.status == "running" and progress.get("pid") != record.pid:
        return {}
    return progress


def follow(experiment: Experiment, since: int | None = None) -> int:
    """A progress bar until the experiment stops running; exit code 0 if it finished or was paused/stopped.

    The bar counts timesteps from ``since`` (a resumed run's checkpoint; default: where the run is now), so its
    steps/s is this run's. Its length is the timestep budget, or an estimate from the episode fraction when the
    episode limit will end the run first, so its percentage is the one ``list`` shows.
    """
    from tqdm import tqdm

    spec = experiment.spec
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
