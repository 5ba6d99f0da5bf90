"""``tfcli experiment watch|list|show|logs|plot|compare``: what experiments and groups did, as tables, lines,
logs and plots (``views`` draws them); their arguments are in ``commands/experiment.py``."""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

from torchforce.client.commands import command, views
from torchforce.client.commands.output import print_json
from torchforce.client.errors import ClientError, ClientWarning
from torchforce.client.experiment import Experiment
from torchforce.client.groups import Group, resolve
from torchforce.client.project import Project, check_output
from torchforce.client.report import GroupSummary, Summary, read_episodes, summarize, summarize_group


@command("experiment", "watch")
def experiment_watch(args: argparse.Namespace) -> int:
    experiment = Experiment.load(Project.find(), args.experiment)
    if experiment.record().status == "new":
        raise ClientError(
            f"experiment '{experiment.name}' has not been started, so there is nothing to watch",
            hint=f"Start it and watch it: tfcli experiment start -e {experiment.name} --follow",
        )
    return views.follow(experiment)


# ---------------------------------------------------------------------------------------------- inspecting


@command("experiment", "list")
def experiment_list(args: argparse.Namespace) -> None:
    project = Project.find()
    rows = []
    for record in project.store.experiments():
        try:
            experiment = Experiment.load(project, record.name)
        except (ClientError, OSError, ValueError) as error:
            staging = list(project.experiments_folder.glob(f".{record.name}.*"))
            if staging and not project.experiment_folder(record.name).exists():
                continue  # a concurrent 'experiment new' is creating it right now
            rows.append(views.broken_row(record, project, error))
            said = "; ".join(line.strip() for line in str(error).splitlines())  # the error and its hint, one line
            warnings.warn(f"experiment '{record.name}' is listed without its spec: {said}", ClientWarning, stacklevel=1)
            continue
        rows.append(views.status_row(experiment, args.window))
    groups = _group_rows(rows, args.window)
    if args.json:
        print_json(rows + list(groups.values()))
    elif rows:
        print(views.list_table(rows if args.runs else _one_row_per_group(rows, groups), args.window))
    else:
        print("No experiments yet. Create one with: tfcli experiment new -n NAME -A AGENT -E ENVIRONMENT")


def _group_rows(rows: list[dict], window: int) -> dict[str, dict]:
    """The row of each group the runs of ``rows`` belong to, by name, its runs in the order of their seeds."""
    members: dict[str, list[dict]] = {}
    for row in rows:
        if row["group"]:
            members.setdefault(row["group"], []).append(row)
    return {
        name: views.group_row(name, sorted(runs, key=lambda r: (r["seed"] is None, r["seed"] or 0)), window)
        for name, runs in members.items()
    }


def _one_row_per_group(rows: list[dict], groups: dict[str, dict]) -> list[dict]:
    """``rows`` with each group's runs replaced by the group's row, where its first run was."""
    shown: list[dict] = []
    for row in rows:
        if not row["group"]:
            shown.append(row)
        elif groups[row["group"]] not in shown:
            shown.append(groups[row["group"]])
    return shown


@command("experiment", "show")
def experiment_show(args: argparse.Namespace) -> None:
    (experiment,) = resolve(Project.find(), [args.experiment])
    if isinstance(experiment, Group):
        _show_group(experiment, args)
        return
    records = read_episodes(experiment.episode_log())
    row = views.status_row(experiment, args.window, records)
    recent = [r["return"] for r in records[-10:]]
    workers = experiment.progress().get("workers") or []
    if args.json:
        print_json(
            {
                **row,
                "spec": experiment.spec,
                "recent_returns": recent,
                "has_checkpoint": experiment.has_checkpoint(),
                "workers": workers,
            }
        )
    else:
        print("\n".join(views.show_lines(experiment, row, recent)))
        if workers:
            print("\n" + worker_table(workers))


def _show_group(group: Group, args: argparse.Namespace) -> None:
    run_rows = [views.status_row(run, args.window) for run in group.runs]
    row = views.group_row(group.name, run_rows, args.window)
    if args.json:
        print_json({**row, "run_rows": run_rows})
    else:
        print("\n".join(views.group_lines(row, group.runs, run_rows)))


def worker_table(workers: list[dict]) -> str:
    """Per worker: where it runs, its steps and episodes, its speed and restarts."""
    from torchforce.client.commands.output import format_table

    def number(value: object) -> str | None:
        return f"{value:,.0f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    rows = [
        [
            row.get("worker"),
            row.get("node"),
            number(row.get("steps")),
            number(row.get("episodes")),
            number(row.get("steps_per_second")),
            number(row.get("restarts")),
        ]
        for row in workers
    ]
    return format_table(["Worker", "Node", "Steps", "Episodes", "Steps/s", "Restarts"], rows)


@command("experiment", "logs")
def experiment_logs(args: argparse.Namespace) -> None:
    experiment = Experiment.load(Project.find(), args.experiment)
    record = experiment.record()
    if record.backend != "local":
        if args.follow and record.status == "running" and experiment.stream_logs():
            return
        _follow_text(experiment, args.follow)
        return
    path = experiment.results / "worker.log"
    if not path.is_file():
        raise ClientError(f"experiment '{experiment.name}' has no log yet", hint="Start it first.")
    with open(path, errors="replace") as file:
        sys.stdout.write(file.read())
        sys.stdout.flush()
        while args.follow:
            line = file.readline()
            if line:
                sys.stdout.write(line)
                sys.stdout.flush()
            elif experiment.record().status != "running":
                sys.stdout.write(file.read())
                break
            else:
                time.sleep(0.3)


def _follow_text(experiment: Experiment, follow: bool) -> None:
    """A log read whole each time (a Ray job's): print it, then what it gains, until the run ends."""
    shown = 0
    while True:
        text = experiment.logs()
        sys.stdout.write(text[shown:])
        sys.stdout.flush()
        shown = len(text)
        if not follow or experiment.record().status != "running":
            if follow:
                sys.stdout.write(experiment.logs()[shown:])
            break
        time.sleep(1.0)


@command("experiment", "plot")
def experiment_plot(args: argparse.Namespace) -> None:
    found = resolve(Project.find(), args.experiment)
    logs: dict[str, Path | list[Path]] = {}
    started: dict[str, Experiment] = {}  # each name's first run with episodes
    for item in found:
        runs = item.runs if isinstance(item, Group) else [item]
        logs[item.name] = [run.episode_log() for run in runs] if isinstance(item, Group) else item.episode_log()
        with_episodes = [run for run in runs if read_episodes(run.episode_log())]
        if with_episodes:
            started[item.name] = with_episodes[0]
    empty = [name for name in logs if name not in started]
    if empty:
        raise ClientError(f"no finished episodes yet in {', '.join(empty)}", hint="Start it and let it run a little.")
    first = found[0]
    default = "group_learning_curve.png" if isinstance(first, Group) else "learning_curve.png"
    output = Path(args.output) if args.output else started[first.name].results / default
    if output.suffix.lower() != ".png":
        raise ClientError(f"the plot is written as PNG; got '{output}'", hint="Name the output file '....png'.")
    check_output(output, "the plot", example=default)
    from torchforce.plots import plot_learning_curves

    path = plot_learning_curves(logs, output, window=args.window)
    print(f"Learning curves of {', '.join(logs)} (smoothed over {args.window} episodes): {Path(path).resolve()}")


def progress_counts(experiment: Experiment) -> tuple[int | None, float | None]:
    """The timesteps the run has taken and the seconds it has run by its progress file, as list and show read them
    (None when damaged)."""
    progress = views.read_progress(experiment)[0]
    return progress.get("timesteps"), progress.get("elapsed_seconds")


@command("experiment", "compare")
def experiment_compare(args: argparse.Namespace) -> None:
    names = [*args.experiment, *args.experiments]
    if not names:
        raise ClientError(
            "compare needs the experiments or groups to compare",
            hint="Give their names: tfcli experiment compare -e NAME [NAME ...]",
        )
    summaries: list[Summary | GroupSummary] = []
    for item in resolve(Project.find(), names):
        if isinstance(item, Group):
            logs = {run.name: read_episodes(run.episode_log()) for run in item.runs}
            progress = {run.name: progress_counts(run) for run in item.runs}
            counts = {name: steps for name, (steps, _) in progress.items()}
            times = {name: seconds for name, (_, seconds) in progress.items()}
            summary = summarize_group(item.name, logs, item.seeds, args.threshold, args.window, counts, times)
            summaries.append(summary)
        else:
            records, (count, seconds) = read_episodes(item.episode_log()), progress_counts(item)
            summaries.append(summarize(item.name, records, args.threshold, args.window, count, seconds))
    if args.json:
        print_json([s.to_dict() for s in summaries])
    else:
        print(views.compare_table(summaries, args.threshold, args.window))
