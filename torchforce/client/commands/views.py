"""What the experiment commands show: the status row of an experiment and of a group of runs, the list table,
``show``'s lines, the progress bar of ``--follow``/``watch``, and the comparison table.

Every mean return shown is the mean of the last ``window`` episodes (``--window``, default 100), read from the
episode log, and every header says so; a group's comes with its 95% bootstrap interval over seeds."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torchforce.client.aggregate import WINDOW, bootstrap_interval, interquartile_mean
from torchforce.client.commands.output import elapsed, format_table, relative
from torchforce.client.experiment import Experiment
from torchforce.client.experiment_build import torch_threads_of
from torchforce.client.groups import format_seeds
from torchforce.client.project import Project
from torchforce.client.report import GroupSummary, Summary, read_episodes, recent_mean
from torchforce.client.store import ExperimentRecord
from torchforce.client.warm_start import describe as describe_warm_start


def agent_name(spec: dict) -> str:
    """The agent's type, and where it computes when that is not the CPU: ``ppo (cuda)``, ``ppo (auto)``. 2018's
    long names read as the short ones (``ppo_agent`` as ``ppo``: the agents' aliases), so one agent has one name."""
    agent = spec["agent"]
    device = agent.get("device")
    return str(agent.get("type", "?")).removesuffix("_agent") + (f" ({device})" if device not in (None, "cpu") else "")


def environment_name(spec: dict) -> str:
    """What the experiment plays: the Gymnasium id, an Atari game as ``Atari(Breakout)``, else the type."""
    environment = spec["environment"]
    if environment.get("type") == "atari" and environment.get("game"):
        return f"Atari({environment['game']})"
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
# Returns, which a diverged run makes NaN or infinite: the worker writes such a return as null (JSON has no NaN), and
# a null one after the first episode reads as NaN; a bare NaN or Infinity (Python's json writes them) is read as is.
RETURN_FIELDS = ("mean_return_100", "last_return")


def read_progress(experiment: Experiment) -> tuple[dict[str, Any], list[str]]:
    """The experiment's progress file, keeping only the fields of the right type (counters >= 0, finite numbers but
    for the returns, which may be NaN: see RETURN_FIELDS), and the names of the fields that are damaged (every field
    when the file is not a JSON object at all)."""
    raw = experiment.progress()  # wherever the worker writes it; {} when there is none or it is unreadable
    if not isinstance(raw, dict) or not raw:
        return {}, list(PROGRESS_FIELDS) if _unreadable(experiment.results / "progress.json") else []
    progress: dict[str, Any] = {}
    damaged: list[str] = []
    for key, kind in PROGRESS_FIELDS.items():
        value = raw.get(key)
        if value is None and key in RETURN_FIELDS and key in raw and progress.get("episodes", 0) > 0:
            progress[key] = math.nan  # the worker's null for a NaN or infinite return
            continue
        if value is None:
            continue
        if _fits(value, kind, finite=key not in RETURN_FIELDS):
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


def _fits(value: Any, kind: type | tuple[type, ...], *, finite: bool = True) -> bool:
    if isinstance(value, bool) or not isinstance(value, kind):
        return False
    if isinstance(value, (int, float)):
        return (math.isfinite(value) or not finite) and (kind is not int or value >= 0)
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


def status_row(experiment: Experiment, window: int = WINDOW, records: list[dict] | None = None) -> dict[str, Any]:
    """The experiment's row for ``list`` and ``show``: fields of a damaged progress file are None, and the row's
    ``progress_damaged`` names them. ``mean_return`` is that of the last ``window`` episodes (see
    ``recent_return``; ``records``: the episode log's, when the caller has read them already)."""
    record = experiment.record()
    spec = experiment.checked_spec
    progress, damaged = read_progress(experiment)
    if records is None:
        records = read_episodes(experiment.episode_log())
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
        "status": "pending" if experiment.waiting_for_cluster(record) else record.status,
        "queue": queue_place(experiment, record),
        "pid": record.pid,
        "timesteps": None if "timesteps" in damaged else progress.get("timesteps", 0),
        "episodes": None if "episodes" in damaged else progress.get("episodes", 0),
        "total_timesteps": spec.get("total_timesteps"),
        "total_episodes": spec.get("episodes"),
        "progress": None if counters_damaged else progress_fraction(spec, progress, record.status),
        "mean_return_100": progress.get("mean_return_100"),
        "mean_return": recent_return(records, progress, window),
        "window": window,
        "steps_per_second": progress.get("steps_per_second"),
        "elapsed_seconds": progress.get("elapsed_seconds"),
        "message": record.message,
        "progress_damaged": damaged,
        "group": spec.get("group"),
        "seed": spec.get("seed"),
        "kind": "experiment",
    }


def recent_return(records: list[dict], progress: dict[str, Any], window: int) -> float | None:
    """The mean return of the last ``window`` episodes, from the episode log. Where that log lags behind the run
    (a cluster's run, whose log here is the one downloaded last) the worker's own mean of the last 100 in its
    progress file is fresher, and taken for a window of 100."""
    lagging = progress.get("episodes", 0) > len(records)
    if window == WINDOW and progress.get("mean_return_100") is not None and (lagging or not records):
        return float(progress["mean_return_100"])
    return recent_mean(records, window)


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
        "mean_return": None,
        "window": None,
        "steps_per_second": None,
        "elapsed_seconds": None,
        "message": f"{spec_file} is {problem}",
        "progress_damaged": [],
        "group": None,
        "seed": None,
        "kind": "experiment",
    }


def group_row(name: str, rows: list[dict[str, Any]], window: int = WINDOW) -> dict[str, Any]:
    """The row of the group ``name`` for ``list`` and ``show``, from its runs' rows (in the order of their seeds):
    what the runs share (or each value they have), their statuses counted, the mean of their progress, and the mean
    across seeds of each run's mean return with its 95% bootstrap interval (none for one seed) and interquartile
    mean (runs without episodes yet left out; ``mean_return_seeds`` says how many counted)."""
    finals = [row["mean_return"] for row in rows if row["mean_return"] is not None]
    fractions = [row["progress"] for row in rows if row["progress"] is not None]
    low, high = bootstrap_interval(finals) if len(finals) > 1 else (None, None)  # one seed gives no interval
    statuses: dict[str, int] = {}
    for row in rows:
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
    counters = {key: [row[key] for row in rows] for key in ("timesteps", "episodes")}
    return {
        "kind": "group",
        "name": name,
        "runs": [row["name"] for row in rows],
        "seeds": [row["seed"] for row in rows],
        **{key: _shared([row[key] for row in rows]) for key in SHARED},
        "status": status_summary(statuses),
        "statuses": statuses,
        **{key: None if None in values else sum(values) for key, values in counters.items()},
        "progress": sum(fractions) / len(fractions) if fractions else None,
        "mean_return": sum(finals) / len(finals) if finals else None,
        "mean_return_low": low,
        "mean_return_high": high,
        "mean_return_iqm": interquartile_mean(finals) if finals else None,
        "mean_return_seeds": len(finals),
        "window": window,
        "progress_damaged": [],
    }


# What a group's row shows of its runs' values: the one they share, or each they have.
SHARED = ("agent", "environment", "run_mode", "num_workers", "num_environments", "cluster")
# The order a group's statuses are counted in: what needs attention first.
STATUS_ORDER = ("running", "pending", "queued", "paused", "new", "failed", "stopped", "finished")


def status_summary(statuses: dict[str, int]) -> str:
    """``{"running": 3, "queued": 2}`` as ``"3 running, 2 queued"``."""
    order = sorted(statuses, key=lambda status: (STATUS_ORDER + (status,)).index(status))
    return ", ".join(f"{statuses[status]} {status}" for status in order)


def _shared(values: list[Any]) -> Any:
    distinct = list(dict.fromkeys(value for value in values if value is not None))
    return distinct[0] if len(distinct) == 1 else ", ".join(map(str, distinct)) if distinct else None


def list_table(rows: list[dict[str, Any]], window: int = WINDOW) -> str:
    """The experiments and groups of ``rows`` as a table; a group's mean return with its 95% interval. A
    ``Runs`` column counts a group's runs, a ``Group`` column names a run's group, where there are such rows."""
    headers = ["Experiment", "Agent", "Environment", "Run-Mode", "Workers", "Cluster", "Status", "Progress"]
    headers.append(f"Mean return (last {window})")
    groups = any(r["kind"] == "group" for r in rows)
    grouped = any(r["kind"] == "experiment" and r["group"] for r in rows)
    table = []
    for r in rows:
        cells = [
            r["name"],
            r["agent"],
            r["environment"],
            r["run_mode"],
            r["num_workers"],
            r["cluster"],
            status_cell(r),
            _shown(r, "progress", lambda value: f"{100 * value:.0f}%", also="timesteps"),
            _group_return(r) if r["kind"] == "group" else _shown(r, "mean_return", "{:.1f}".format, also=MEAN_100),
        ]
        if groups:
            cells.append(len(r["runs"]) if r["kind"] == "group" else None)
        if grouped:
            cells.append(r.get("group"))
        table.append(cells)
    text = format_table([*headers, *(["Runs"] if groups else []), *(["Group"] if grouped else [])], table)
    if groups:
        text += "\n" + textwrap.fill(
            f"A group's mean return is the mean across its seeds of each run's mean of the last {window} episodes, "
            "with a 95% bootstrap confidence interval [low, high] ([-] for one seed, which gives none).",
            NOTE_WIDTH,
        )
    return text


NOTE_WIDTH = 110  # the notes under a table, wrapped
MEAN_100 = "mean_return_100"  # the progress file's field a mean of the last 100 falls back on


def queue_place(experiment: Experiment, record: ExperimentRecord) -> dict[str, int] | None:
    """Where a queued run stands (``position`` of ``length``, ``running``, ``at_once``); None when not queued."""
    place = experiment.place() if record.status == "queued" else None
    return None if place is None else dataclasses.asdict(place)


def status_cell(row: dict[str, Any]) -> str:
    """The status in a table: a queued run's with its place in the queue (``queued 2/3``)."""
    place = row.get("queue")
    return f"{row['status']} {place['position']}/{place['length']}" if place else str(row["status"])


def status_line(row: dict[str, Any]) -> str:
    """The status in a sentence: a queued run's with its place and the slots, a pending one's with what it waits
    for."""
    place = row.get("queue")
    if place:
        return (
            f"queued (position {place['position']} of {place['length']}; {place['running']} running, at most "
            f"{place['at_once']} at once)"
        )
    if row["status"] == "pending":
        return "pending (its Ray job waits for the CPUs it asked for)"
    return str(row["status"])


def _group_return(row: dict[str, Any]) -> str | None:
    if row["mean_return"] is None:
        return None
    return f"{row['mean_return']:.1f} {_interval(row, 1)}"


def _interval(row: dict[str, Any], digits: int) -> str:
    """A group's 95% interval as ``[low, high]``; ``[-]`` for one seed, which gives none."""
    low, high = row["mean_return_low"], row["mean_return_high"]
    return "[-]" if low is None else f"[{low:.{digits}f}, {high:.{digits}f}]"


def _shown(row: dict[str, Any], key: str, form: Callable[[Any], str], *, also: str | None = None) -> str | None:
    """``row[key]`` formatted; "?" when it (or the field ``also``, which it is computed from) is damaged, None
    (shown as "-") when it is missing."""
    damaged = row["progress_damaged"]
    if row[key] is None and (key in damaged or also in damaged):
        return DAMAGED
    return None if row[key] is None else form(row[key])


def _workers(spec: dict[str, Any]) -> str:
    """The workers of a multi-threaded or distributed run, and a distributed run's parameter servers, for ``show``."""
    if spec["run_mode"] not in ("multi-threaded", "distributed"):
        return ""
    workers = _counted(spec["num_workers"], "worker")
    if spec["run_mode"] == "multi-threaded":
        return workers
    return workers + _counted(spec.get("num_parameter_servers") or 1, "parameter server")


def _counted(number: int, what: str) -> str:
    return f"{number} {what}{'s' * (number != 1)}, "


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
    threads = torch_threads_of(spec)
    lines = [
        f"Experiment   {experiment.name}" + (f" - {spec['description']}" if spec.get("description") else ""),
        f"Status       {status_line(row)}" + (f" (PID {row['pid']})" if row["pid"] else ""),
        f"Agent        {row['agent']}" + (f" ({spec['sources']['agent']})" if spec["sources"].get("agent") else ""),
        f"Environment  {row['environment']} x {row['num_environments']}",
        f"Run mode     {row['run_mode']}, "
        + _workers(spec)
        + (f"{threads} torch threads, " if threads > 1 else "")
        + f"seed {spec.get('seed')}",
        f"Runs on      {runs_on}",
        f"Budget       {budget(spec)}",
        *([f"Warm start   {describe_warm_start(spec['warm_start'])}"] if spec.get("warm_start") else []),
        f"Progress     {_shown(row, 'timesteps', '{:,}'.format)} timesteps, "
        f"{_shown(row, 'episodes', '{:,}'.format)} episodes"
        + (f" ({100 * row['progress']:.0f}%)" if row["progress"] is not None else "")
        + (f", {elapsed(row['elapsed_seconds'])}" if row["elapsed_seconds"] else ""),
        f"Speed        {_shown(row, 'steps_per_second', '{:,.0f}'.format) or 0} steps/s (since it last started)",
        "Mean return  " + (_shown(row, "mean_return", f"{{:.2f}} (last {row['window']})".format, also=MEAN_100) or "-"),
        "Recent       " + (", ".join(short_return(value) for value in recent) or "-"),
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


def wait_in_queue(experiment: Experiment) -> ExperimentRecord:
    """While the run is queued, a line whenever its place in the queue changes; the row once it has left it."""
    shown = None
    while (record := experiment.record()).status == "queued":
        place = experiment.place()
        line = None if place is None else f"'{experiment.name}' is queued ({place.describe()})"
        if line is not None and line != shown:
            print(line, flush=True)
            shown = line
        time.sleep(0.5)
    return record


def short_return(value: float) -> str:
    """A return to two decimals at most, as the mean beside it: ``-23.8908`` -> ``-23.89``, ``22.5``, ``500``."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def follow(experiment: Experiment, since: int | None = None) -> int:
    """A progress bar until the experiment stops running; exit code 0 if it finished or was paused/stopped.

    The bar counts timesteps from ``since`` (a resumed run's checkpoint; default: where the run is now), so its
    steps/s is this run's. Its length is the timestep budget, or an estimate from the episode fraction when the
    episode limit will end the run first, so its percentage is the one ``list`` shows. A queued run is waited
    for first (``wait_in_queue``).
    """
    from tqdm import tqdm

    spec = experiment.checked_spec
    record = wait_in_queue(experiment)
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


def compare_table(summaries: list[Summary | GroupSummary], threshold: float | None, window: int = WINDOW) -> str:
    """Experiments and groups side by side, their returns the mean of the last ``window`` episodes. With a group
    among them the table gains its runs, the 95% interval and the IQM of the final returns and, for a threshold,
    how many runs reached it, and a note under it says how a group's figures are made."""
    groups = any(isinstance(s, GroupSummary) for s in summaries)
    best, final = f"Best mean (last {window})", f"Final mean (last {window})"
    if not groups:
        headers = ["Experiment", "Episodes", "Timesteps", "Time", best, final, "Steps/s"]
        if threshold is not None:
            headers += [f"Steps to {threshold:g}", f"Time to {threshold:g}"]
        return format_table(headers, [_experiment_cells(s, threshold) for s in summaries if isinstance(s, Summary)])
    headers = ["Name", "Runs", "Episodes", "Timesteps", "Time", best, final, "95% CI", "IQM", "Steps/s"]
    if threshold is not None:
        headers += ["Reached", f"Steps to {threshold:g} (median, min-max)", f"Time to {threshold:g} (median, min-max)"]
    rows = [
        _group_cells(s, threshold) if isinstance(s, GroupSummary) else _single_cells(s, threshold) for s in summaries
    ]
    note = (
        f"Returns are means of the last {window} episodes. A group's episodes, timesteps, time and steps/s are means "
        "per run; its best is the peak of the mean curve across seeds, each seed held at its final return past its "
        "last episode (so never below the final mean); its final mean comes with a 95% bootstrap confidence interval "
        "over seeds (none for one seed), and IQM is the interquartile mean of the seeds' final returns"
    )
    if threshold is not None:
        note += f"; steps and time to {threshold:g} are the median (min-max) over the seeds that reached it"
    return format_table(headers, rows) + "\n" + textwrap.fill(note + ".", NOTE_WIDTH)


def _number(value: float | None, digits: int = 1) -> str | None:
    return None if value is None else f"{value:,.{digits}f}"


def _experiment_cells(s: Summary, threshold: float | None) -> list[Any]:
    cells = [
        s.name,
        f"{s.episodes:,}",
        f"{s.timesteps:,}",
        elapsed(s.seconds),
        _number(s.best_mean_return),
        _number(s.final_mean_return),
        _number(s.steps_per_second, 0),
    ]
    if threshold is not None:
        cells += [
            None if s.timesteps_to_threshold is None else f"{s.timesteps_to_threshold:,}",
            elapsed(s.seconds_to_threshold),
        ]
    return cells


def _single_cells(s: Summary, threshold: float | None) -> list[Any]:
    """An experiment's row in a table with groups: a group of one."""
    cells = _experiment_cells(s, None)
    cells[1:1] = ["1"]
    cells[7:7] = [None, _number(s.final_mean_return)]
    if threshold is not None:
        cells += [
            f"{int(s.timesteps_to_threshold is not None)}/1",
            None if s.timesteps_to_threshold is None else f"{s.timesteps_to_threshold:,}",
            elapsed(s.seconds_to_threshold),
        ]
    return cells


def _group_cells(g: GroupSummary, threshold: float | None) -> list[Any]:
    interval = None if g.final_low is None else f"[{g.final_low:,.1f}, {g.final_high:,.1f}]"
    cells = [
        g.name,
        str(len(g.runs)),
        _number(g.episodes, 0),
        _number(g.timesteps, 0),
        elapsed(g.seconds),
        _number(g.best_mean_return),
        _number(g.final_mean_return),
        interval,
        _number(g.final_iqm),
        _number(g.steps_per_second, 0),
    ]
    if threshold is not None:
        steps, seconds = g.timesteps_to_threshold, g.seconds_to_threshold
        cells += [
            f"{g.reached}/{len(g.runs)}",
            None if steps is None else f"{steps.median:,.0f} ({steps.low:,.0f}-{steps.high:,.0f})",
            None if seconds is None else f"{elapsed(seconds.median)} ({elapsed(seconds.low)}-{elapsed(seconds.high)})",
        ]
    return cells


def group_lines(row: dict[str, Any], runs: list[Experiment], run_rows: list[dict[str, Any]]) -> list[str]:
    """``show`` of a group: what its runs share, their statuses and progress, the aggregate mean return, then a
    row per run."""
    spec = runs[0].checked_spec
    seeds = format_seeds(row["seeds"])
    window = row["window"]
    steps = "-" if row["timesteps"] is None else f"{row['timesteps']:,}"
    episodes = "-" if row["episodes"] is None else f"{row['episodes']:,}"
    progress = "-" if row["progress"] is None else f"{100 * row['progress']:.0f}% (mean of the runs)"
    mean = "-"
    if row["mean_return"] is not None:
        seeds_counted = row["mean_return_seeds"]
        mean = (
            f"{row['mean_return']:.2f} (last {window}; mean of {seeds_counted} seed{'s' * (seeds_counted != 1)}), "
            f"95% CI {_interval(row, 2)}, IQM {row['mean_return_iqm']:.2f}"
        )
    lines = [
        f"Group        {row['name']}: {len(runs)} run{'s' * (len(runs) != 1)}" + (f", seeds {seeds}" if seeds else ""),
        f"Status       {row['status']}",
        f"Agent        {row['agent']}" + (f" ({spec['sources']['agent']})" if spec["sources"].get("agent") else ""),
        f"Environment  {row['environment']} x {row['num_environments']}",
        f"Run mode     {row['run_mode']}",
        f"Budget       {budget(spec)} per run",
        f"Progress     {progress}, {steps} timesteps and {episodes} episodes in all",
        f"Mean return  {mean}",
        "",
        list_table(run_rows, window),
    ]
    return lines
