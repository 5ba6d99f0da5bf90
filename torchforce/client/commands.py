"""The handlers behind each ``tfcli`` command: thin wrappers over Project, Experiment and Cluster."""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torchforce.client.cli import elapsed, format_table, print_json, relative
from torchforce.client.errors import ClientError
from torchforce.client.experiment import Experiment
from torchforce.client.project import Project
from torchforce.client.report import read_episodes, summarize
from torchforce.client.store import ExperimentRecord
from torchforce.spec import SpecError, load_file

Handler = Callable[[argparse.Namespace], int | None]
HANDLERS: dict[tuple[str, str | None], Handler] = {}


def command(group: str, name: str | None = None) -> Callable[[Handler], Handler]:
    def register(function: Handler) -> Handler:
        HANDLERS[(group, name)] = function
        return function

    return register


# ---------------------------------------------------------------------------------------------- init, clusters


@command("init")
def init(args: argparse.Namespace) -> None:
    project, written = Project.init(
        Path.cwd(), name=args.name, remote_project_id=args.remote_project_id, force=args.force
    )
    print(f"Project '{project.name}' in {project.root}")
    print(f"  {len(written)} default config files written" + (" (existing ones kept)" if not args.force else ""))
    print("Next: tfcli experiment new -n NAME -A ppo_cartpole -E cartpole -t 50000 --start")


@command("cluster", "create")
def cluster_create(args: argparse.Namespace) -> None:
    from torchforce.client.cluster import Cluster

    project = Project.find()
    values: dict[str, Any] = {}
    if args.file:
        values, _ = project.load_config(args.file, "clusters", "cluster")
    overrides = {
        "name": args.name,
        "num_nodes": args.size,
        "machine_type": args.machine_type,
        "disk_size": args.disk_size,
    }
    cluster = Cluster(**{**values, **{k: v for k, v in overrides.items() if v is not None}})
    if args.dry_run:
        print(" ".join(cluster.create_command()))
        return
    cluster.create()


@command("cluster", "delete")
def cluster_delete(args: argparse.Namespace) -> None:
    raise ClientError("deleting GKE clusters is not available yet (the GKE backend is still to come)")


@command("cluster", "list")
def cluster_list(args: argparse.Namespace) -> None:
    from torchforce.client.cluster import Cluster

    project = Project.find()
    rows = []
    for name in project.config_names("clusters"):
        values, _ = project.load_config(name, "clusters", "cluster")
        cluster = Cluster(**values)
        rows.append(
            [
                cluster.name,
                cluster.location or "(default)",
                cluster.machine_type,
                cluster.num_nodes,
                cluster.gpus_per_node,
                "spec only",
            ]
        )
    print(format_table(["Cluster", "Location", "Machine-Type", "Nodes", "GPUs/Node", "Status"], rows))
    print("\nExperiments run on this machine by default; creating GKE clusters comes with the GKE backend.")


# ---------------------------------------------------------------------------------------------- experiments


@command("experiment", "new")
def experiment_new(args: argparse.Namespace) -> None:
    project = Project.find()
    fields = {
        "name": args.name,
        "agent": args.agent,
        "network": args.network,
        "environment": args.environment,
        "cluster": args.cluster,
        "episodes": args.episodes,
        "total_timesteps": args.total_timesteps,
        "max_timesteps_per_episode": args.max_timesteps_per_episode,
        "deterministic": args.deterministic,
        "num_workers": args.num_workers,
        "num_parameter_servers": args.num_parameter_servers,
        "run_mode": args.run_mode,
        "num_environments": args.num_environments,
        "seed": args.seed,
        "description": args.description,
    }
    try:
        experiment = Experiment(project, file=args.file, **fields)
        folder = experiment.generate_locally()
    except SpecError as error:
        flags = {key for key, value in fields.items() if value is not None}
        raise _in_file(error, project, args.file, flags) from None
    spec = experiment.spec
    print(
        f"Created experiment '{experiment.name}' in {relative(folder)}: {_agent_name(spec)} on "
        f"{_environment_name(spec)}, {spec['run_mode']} run mode"
    )
    if args.start:
        pid = experiment.start()
        print(f"Started it (worker PID {pid}). Follow it with: tfcli experiment watch -e {experiment.name}")
    else:
        print(f"Start it with: tfcli experiment start -e {experiment.name}")


def _in_file(error: SpecError, project: Project, file: str | None, flags: set[str]) -> SpecError:
    """``error`` naming the experiment file when the field it is about came from that file (not from a flag, nor
    from a config the file names: such errors name that config's file already)."""
    if file is None or error.file or not error.path.startswith("experiment."):
        return error
    field = re.split(r"[.\[]", error.path.removeprefix("experiment."), maxsplit=1)[0]
    try:
        path = project.find_config(file, "experiments", "experiment.file")
        written = load_file(path)
    except SpecError:
        return error
    if isinstance(written, dict) and field in written and field not in flags:
        return error.with_file(relative(path))
    return error


def _agent_name(spec: dict) -> str:
    return str(spec["agent"].get("type", "?"))


def _environment_name(spec: dict) -> str:
    environment = spec["environment"]
    return str(environment.get("gym_id") or environment.get("type", "?"))


def _status_row(experiment: Experiment) -> dict[str, Any]:
    record = experiment.record()
    spec, progress = experiment.spec, experiment.progress()
    total = spec.get("total_timesteps")
    steps = progress.get("timesteps", 0)
    episodes_total = spec.get("episodes")
    fraction = steps / total if total else (progress.get("episodes", 0) / episodes_total if episodes_total else None)
    return {
        "name": experiment.name,
        "agent": _agent_name(spec),
        "environment": _environment_name(spec),
        "run_mode": spec["run_mode"],
        "num_workers": spec["num_workers"],
        "num_environments": spec.get("num_environments", 1),
        "cluster": (spec.get("cluster") or {}).get("name") or "local",
        "status": record.status,
        "pid": record.pid,
        "timesteps": steps,
        "episodes": progress.get("episodes", 0),
        "total_timesteps": total,
        "progress": None if fraction is None else min(fraction, 1.0),
        "mean_return_100": progress.get("mean_return_100"),
        "steps_per_second": progress.get("steps_per_second"),
        "message": record.message,
    }


def _broken_row(record: ExperimentRecord, project: Project, error: Exception) -> dict[str, Any]:
    """A list row for an experiment whose folder or spec file is missing or damaged."""
    spec_file = relative(project.experiment_folder(record.name) / "experiment.json")
    problem = "missing" if isinstance(error, ClientError) else f"unreadable ({type(error).__name__}: {error})"
    return {
        "name": record.name,
        "agent": None,
        "environment": None,
        "run_mode": None,
        "num_workers": None,
        "num_environments": None,
        "cluster": record.cluster or "local",
        "status": record.status,
        "pid": record.pid,
        "timesteps": 0,
        "episodes": 0,
        "total_timesteps": None,
        "progress": None,
        "mean_return_100": None,
        "steps_per_second": None,
        "message": f"{spec_file} is {problem}",
    }


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
            rows.append(_broken_row(record, project, error))
            continue
        rows.append(_status_row(experiment))
    if args.json:
        print_json(rows)
        return
    if not rows:
        print("No experiments yet. Create one with: tfcli experiment new -n NAME -A AGENT -E ENVIRONMENT")
        return
    table = [
        [
            r["name"],
            r["agent"],
            r["environment"],
            r["run_mode"],
            r["num_workers"],
            r["cluster"],
            r["status"],
            "-" if r["progress"] is None else f"{100 * r['progress']:.0f}%",
            "-" if r["mean_return_100"] is None else f"{r['mean_return_100']:.1f}",
        ]
        for r in rows
    ]
    print(
        format_table(
            [
                "Experiment",
                "Agent",
                "Environment",
                "Run-Mode",
                "Workers",
                "Cluster",
                "Status",
                "Progress",
                "Mean return (100)",
            ],
            table,
        )
    )


@command("experiment", "start")
def experiment_start(args: argparse.Namespace) -> None:
    experiment = Experiment.load(Project.find(), args.experiment)
    pid = experiment.start(resume=args.resume, cluster=args.cluster, fresh=args.fresh)
    print(
        f"{'Resumed' if args.resume else 'Started'} '{experiment.name}' (worker PID {pid}); "
        f"results in {relative(experiment.results)}"
    )
    if args.follow:
        return follow(experiment)
    return None


@command("experiment", "watch")
def experiment_watch(args: argparse.Namespace) -> int:
    return follow(Experiment.load(Project.find(), args.experiment))


def follow(experiment: Experiment) -> int:
    """A progress bar until the experiment stops running; exit code 0 if it finished or was paused/stopped."""
    from tqdm import tqdm

    spec = experiment.spec
    total = spec.get("total_timesteps") or None
    bar = tqdm(
        total=total,
        unit="step",
        desc=experiment.name,
        dynamic_ncols=True,
        file=sys.stdout,
        mininterval=1.0 if sys.stdout.isatty() else 10.0,
    )
    try:
        while True:
            record = experiment.record()
            progress = experiment.progress()
            steps = min(progress.get("timesteps", 0), total or progress.get("timesteps", 0))
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


@command("experiment", "pause")
def experiment_pause(args: argparse.Namespace) -> None:
    experiment = Experiment.load(Project.find(), args.experiment)
    record = experiment.pause()
    progress = experiment.progress()
    print(
        f"'{experiment.name}' is {record.status} at timestep {progress.get('timesteps', 0):,}; "
        f"continue with: tfcli experiment start -e {experiment.name} --resume"
    )


@command("experiment", "stop")
def experiment_stop(args: argparse.Namespace) -> None:
    experiment = Experiment.load(Project.find(), args.experiment)
    record = experiment.stop(no_download=args.no_download)
    print(f"'{experiment.name}' is {record.status}; results in {relative(experiment.results)}")


@command("experiment", "download")
def experiment_download(args: argparse.Namespace) -> None:
    experiment = Experiment.load(Project.find(), args.experiment)
    folder = experiment.download()
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    size = sum(p.stat().st_size for p in files)
    print(f"Results of '{experiment.name}' are in {relative(folder)} ({len(files)} files, {size / 1e6:.1f} MB)")


@command("experiment", "delete")
def experiment_delete(args: argparse.Namespace) -> None:
    experiment = Experiment.load(Project.find(), args.experiment)
    experiment.delete()
    print(f"Deleted experiment '{experiment.name}'")


@command("experiment", "show")
def experiment_show(args: argparse.Namespace) -> None:
    experiment = Experiment.load(Project.find(), args.experiment)
    row = _status_row(experiment)
    records = read_episodes(experiment.results / "episodes.jsonl")
    recent = [r["return"] for r in records[-10:]]
    if args.json:
        print_json(
            {**row, "spec": experiment.spec, "recent_returns": recent, "has_checkpoint": experiment.has_checkpoint()}
        )
        return
    spec, progress = experiment.spec, experiment.progress()
    lines = [
        f"Experiment   {experiment.name}" + (f" - {spec['description']}" if spec.get("description") else ""),
        f"Status       {row['status']}" + (f" (PID {row['pid']})" if row["pid"] else ""),
        f"Agent        {row['agent']}" + (f" ({spec['sources']['agent']})" if spec["sources"].get("agent") else ""),
        f"Environment  {row['environment']} x {row['num_environments']}",
        f"Run mode     {row['run_mode']}, seed {spec.get('seed')}",
        f"Budget       {_budget(spec)}",
        f"Progress     {row['timesteps']:,} timesteps, {row['episodes']:,} episodes"
        + (f", {elapsed(progress.get('elapsed_seconds'))}" if progress.get("elapsed_seconds") else ""),
        f"Speed        {row['steps_per_second'] or 0:,.0f} steps/s",
        "Mean return  " + ("-" if row["mean_return_100"] is None else f"{row['mean_return_100']:.2f} (last 100)"),
        "Recent       " + (", ".join(f"{value:g}" for value in recent) or "-"),
        f"Checkpoint   {'yes' if experiment.has_checkpoint() else 'none yet'}",
        f"Results      {relative(experiment.results)}",
    ]
    if row["message"]:
        lines.append("Message      " + row["message"].replace("\n", "\n             "))
    print("\n".join(lines))


def _budget(spec: dict) -> str:
    parts = []
    if spec.get("total_timesteps"):
        parts.append(f"{spec['total_timesteps']:,} timesteps")
    if spec.get("episodes"):
        parts.append(f"{spec['episodes']:,} episodes")
    if spec.get("max_timesteps_per_episode"):
        parts.append(f"episodes cut at {spec['max_timesteps_per_episode']:,} steps")
    return ", ".join(parts)


@command("experiment", "logs")
def experiment_logs(args: argparse.Namespace) -> None:
    experiment = Experiment.load(Project.find(), args.experiment)
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


@command("experiment", "plot")
def experiment_plot(args: argparse.Namespace) -> None:
    from torchforce.plots import plot_learning_curves

    project = Project.find()
    experiments = [Experiment.load(project, name) for name in args.experiment]
    logs = {e.name: e.results / "episodes.jsonl" for e in experiments}
    empty = [name for name, path in logs.items() if not read_episodes(path)]
    if empty:
        raise ClientError(f"no finished episodes yet in {', '.join(empty)}", hint="Start it and let it run a little.")
    output = Path(args.output) if args.output else experiments[0].results / "learning_curve.png"
    if output.suffix.lower() != ".png":
        raise ClientError(f"the plot is written as PNG; got '{output}'", hint="Name the output file '....png'.")
    path = plot_learning_curves(logs, output, window=args.window)
    print(f"Learning curves of {', '.join(logs)}: {relative(path)}")


@command("experiment", "compare")
def experiment_compare(args: argparse.Namespace) -> None:
    project = Project.find()
    summaries = [
        summarize(name, read_episodes(Experiment.load(project, name).results / "episodes.jsonl"), args.threshold)
        for name in args.experiments
    ]
    if args.json:
        print_json([s.to_dict() for s in summaries])
        return

    def number(value: float | None, digits: int = 1) -> str | None:
        return None if value is None else f"{value:,.{digits}f}"

    headers = ["Experiment", "Episodes", "Timesteps", "Time", "Best mean(100)", "Final mean(100)", "Steps/s"]
    if args.threshold is not None:
        headers += [f"Steps to {args.threshold:g}", f"Time to {args.threshold:g}"]
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
        if args.threshold is not None:
            row += [
                None if s.timesteps_to_threshold is None else f"{s.timesteps_to_threshold:,}",
                elapsed(s.seconds_to_threshold),
            ]
        rows.append(row)
    print(format_table(headers, rows))
