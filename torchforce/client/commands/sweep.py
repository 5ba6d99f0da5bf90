"""``tfcli sweep ...``: hyperparameter searches over an experiment (thin wrappers over ``torchforce.client.sweep``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from torchforce.client.commands import add_command, command
from torchforce.client.commands.output import elapsed, format_table, print_json, relative
from torchforce.client.errors import ClientError
from torchforce.client.project import Project, check_output_folder
from torchforce.client.sweep import Sweep, TrialRow
from torchforce.client.sweep_file import SweepSpec


def add_parser(groups: argparse._SubParsersAction) -> None:
    group = add_command(
        groups,
        "sweep",
        help="hyperparameter searches (Optuna) over an experiment",
        description="Sweeps: search the values of an experiment's spec (learning rates, sizes, choices) with "
        "Optuna's TPE or\nrandom sampler, each trial run as experiments (one per seed) by a background driver, "
        "hopeless trials\npruned early by the median rule. The study is kept in .tfcli/sweeps/NAME.db; the best "
        "trial's\nexperiment is written to configs/experiments/NAME-best.json. The trials' runs are named "
        "NAME-t003-s0, ...\n(group NAME-t003): names 'experiment new' refuses to other experiments\nuntil "
        "'sweep delete' removes the sweep.",
        examples=[
            "tfcli sweep new -f ppo_cartpole --start",
            "tfcli sweep show --sweep ppo-cartpole-lr",
            "tfcli sweep plot --sweep ppo-cartpole-lr",
            "tfcli sweep delete --sweep ppo-cartpole-lr",
        ],
    )
    sweeps = group.add_subparsers(dest="command", metavar="COMMAND", help="one of:")
    new = add_command(
        sweeps,
        "new",
        help="create a sweep from a sweep file",
        description="Create a sweep from a sweep file (JSON or YAML): name, base (an experiment file or fields), "
        "space\n(dotted keys as 'experiment new --set' takes them, each a range {low, high, log, type} or "
        "{choices}),\nmetric, budget {trials, parallel}, seeds_per_trial, sampler, pruner and cluster. The whole "
        "sweep is\nvalidated first: the experiment of the base, and of every end of the space, is built once. A "
        "bare\nname is looked up in configs/sweeps/, then among the shipped examples.",
        examples=["tfcli sweep new -f ppo_cartpole", "tfcli sweep new -f sweeps/lr.yaml -n lr-2 --start"],
    )
    new.add_argument("-f", "--file", required=True, help="a sweep file, or a name in configs/sweeps/")
    new.add_argument("-n", "--name", help="the sweep's name, instead of the file's")
    new.add_argument("--start", action="store_true", help="start its driver right away")
    start = add_command(
        sweeps,
        "start",
        help="start (or continue) a sweep's driver in the background",
        description="Start the sweep's driver, a background process that runs trials until the budget is spent "
        "(log:\n.tfcli/sweeps/NAME.log). After a stop or a crash it continues the study: trials whose runs "
        "survived\ngo on; interrupted ones start over, as new trials with the same parameters whose runs start "
        "from\nthe first timestep (the interrupted runs are not resumed; the budget counts each trial once).",
        examples=["tfcli sweep start --sweep lr"],
    )
    _sweep_argument(start)
    listing = add_command(
        sweeps,
        "list",
        help="a table of the project's sweeps",
        description="Each sweep's status, trials done of its budget, and best value so far.",
        examples=["tfcli sweep list", "tfcli sweep list --json"],
    )
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    show = add_command(
        sweeps,
        "show",
        help="a sweep's trials, ranked by value",
        description="The trials ranked by value (mean over seeds ± their standard deviation): state, parameters, "
        "steps,\ntime; the best marked. Also writes the best trial's experiment to "
        "configs/experiments/NAME-best.json,\nready for 'tfcli experiment new -f NAME-best -n RUN'.",
        examples=["tfcli sweep show --sweep lr", "tfcli sweep show --sweep lr --json"],
    )
    _sweep_argument(show)
    show.add_argument("--json", action="store_true", help="machine-readable output")
    plot = add_command(
        sweeps,
        "plot",
        help="hyperparameter importance and history plots (PNG)",
        description="Write importance.png (Optuna's fANOVA importance of each key of the space; needs two "
        "completed\ntrials) and history.png (each trial's value and the best so far) to .tfcli/sweeps/NAME/ or "
        "-o FOLDER.",
        examples=["tfcli sweep plot --sweep lr", "tfcli sweep plot --sweep lr -o plots"],
    )
    _sweep_argument(plot)
    plot.add_argument("-o", "--output", help="the folder to write the PNG files to (it must exist)")
    stop = add_command(
        sweeps,
        "stop",
        help="stop a sweep's driver and its running trials",
        description="Stop the driver and the runs of the trials in flight. Those trials start over: 'tfcli sweep "
        "start'\nruns their parameters again as new trials, from the first timestep (the stopped runs are not "
        "resumed),\nand the budget counts each once. A trial whose runs have all ended keeps its result.",
        examples=["tfcli sweep stop --sweep lr"],
    )
    _sweep_argument(stop)
    delete = add_command(
        sweeps,
        "delete",
        help="remove a sweep and its trials' experiments",
        description="Remove the sweep: its trials' experiments (their folders and rows in the state database), "
        "its study,\nlog and plots. Its name and its trials' names are free again. Refused while its driver runs "
        "or a run\nof its trials runs or is queued: stop it first. With --keep-trials its trials' experiments "
        "stay, as\nordinary experiments (a new sweep of the same name is refused until they are deleted). "
        "The best\ntrial's experiment, configs/experiments/NAME-best.json, stays either way.",
        examples=["tfcli sweep delete --sweep lr", "tfcli sweep delete --sweep lr --keep-trials"],
    )
    _sweep_argument(delete)
    delete.add_argument(
        "--keep-trials", action="store_true", help="keep the trials' experiments, as ordinary experiments"
    )


def _sweep_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sweep", required=True, metavar="NAME", help="the sweep's name")


@command("sweep", "new")
def sweep_new(args: argparse.Namespace) -> None:
    project = Project.find()
    sweep = Sweep.create(project, args.file, name=args.name)
    spec = sweep.spec
    print(f"Created sweep '{sweep.name}' ({relative(sweep.state_file)}): {_summary(spec)}")
    if args.start:
        pid = sweep.start()
        print(f"Started its driver (PID {pid}). Follow it with: tfcli sweep show --sweep {sweep.name}")
    else:
        print(f"Start it with: tfcli sweep start --sweep {sweep.name}")


@command("sweep", "start")
def sweep_start(args: argparse.Namespace) -> None:
    sweep = Sweep.load(Project.find(), args.sweep)
    pid = sweep.start()
    print(f"Started the driver of '{sweep.name}' (PID {pid}); its log is {relative(sweep.log_file)}")


@command("sweep", "stop")
def sweep_stop(args: argparse.Namespace) -> None:
    sweep = Sweep.load(Project.find(), args.sweep)
    status = sweep.stop()
    print(f"'{sweep.name}' is {status}; continue it with: tfcli sweep start --sweep {sweep.name}")


@command("sweep", "delete")
def sweep_delete(args: argparse.Namespace) -> None:
    sweep = Sweep.load(Project.find(), args.sweep)
    trials = sweep.delete(keep_trials=args.keep_trials)
    for name in [] if args.keep_trials else trials:
        print(f"Deleted experiment '{name}'")
    print(f"Deleted sweep '{sweep.name}'")
    if args.keep_trials and trials:
        print(f"Kept its trials' experiments, now ordinary ones: {', '.join(trials)}")
    if sweep.best_config.is_file():
        print(f"Kept {relative(sweep.best_config)}, its best trial's experiment")


@command("sweep", "list")
def sweep_list(args: argparse.Namespace) -> None:
    project = Project.find()
    rows = []
    for name in Sweep.names(project):
        try:
            rows.append(_list_row(Sweep.load(project, name)))
        except ClientError as error:
            rows.append({"name": name, "status": "damaged", "message": error.message})
    if args.json:
        print_json(rows)
    elif rows:
        headers = ["Sweep", "Status", "Trials", "Running", "Metric", "Best", "Best trial"]
        keys = ["name", "status", "trials", "running", "metric", "best_value", "best_trial"]
        print(format_table(headers, [[row.get(key) for key in keys] for row in rows]))
    else:
        print("No sweeps yet. Create one with: tfcli sweep new -f FILE (try -f ppo_cartpole)")


def _list_row(sweep: Sweep) -> dict[str, Any]:
    spec = sweep.spec
    status, message = sweep.status()
    rows = sweep.trials(spec)
    best = next((row for row in rows if row.best), None)
    done = sum(row.counted for row in rows)
    return {
        "name": sweep.name,
        "status": status,
        "message": message,
        "trials": f"{done}/{spec.trials}",
        "running": sum(row.state == "RUNNING" for row in rows),
        "metric": f"{spec.metric.name} ({spec.metric.direction})",
        "best_value": _value(best) if best else None,
        "best_trial": best.number if best else None,
    }


@command("sweep", "show")
def sweep_show(args: argparse.Namespace) -> None:
    sweep = Sweep.load(Project.find(), args.sweep)
    spec = sweep.spec
    status, message = sweep.status()
    rows = sweep.trials(spec)
    best_config = sweep.write_best_config(rows)
    if args.json:
        print_json(
            {
                "name": sweep.name,
                "status": status,
                "message": message,
                "spec": spec.to_dict(),
                "best_config": str(best_config) if best_config else None,
                "trials": [row.to_dict() for row in rows],
            }
        )
        return
    pid = (sweep.state().get("driver") or {}).get("pid") if status == "running" else None
    print(
        f"Sweep '{sweep.name}': {status}"
        + (f" (driver PID {pid})" if pid else "")
        + (f": {message}" if message else "")
    )
    for line in (spec.description, _summary(spec), f"Log: {relative(sweep.log_file)}"):
        if line:
            print(f"  {line}")
    if not rows:
        print("\nNo trials yet.")
        return
    print("\n" + trial_table(rows, spec))
    best = next((row for row in rows if row.best), None)
    if best is not None and best_config is not None:
        name = best_config.stem
        print(f"\n* best: trial {best.number}; its experiment is {relative(best_config)}:")
        print(f"  tfcli experiment new -f {name} -n NAME")


@command("sweep", "plot")
def sweep_plot(args: argparse.Namespace) -> None:
    sweep = Sweep.load(Project.find(), args.sweep)
    folder = Path(args.output) if args.output else None  # the default one, in .tfcli/, is made as needed
    if folder is not None:
        check_output_folder(folder, "the PNG files")
    written, skipped = sweep.plot(folder)
    if not written:
        raise ClientError(f"nothing to plot for sweep '{sweep.name}' yet: {'; '.join(skipped)}")
    for path in written:
        print(f"Wrote {relative(path.resolve())}")
    for reason in skipped:
        print(f"Not plotted: {reason}")


def trial_table(rows: list[TrialRow], spec: SweepSpec) -> str:
    """The trials, one row each: best mark, number, state, each key of the space, value, steps, time, note."""
    keys = [dimension.key for dimension in spec.space]
    headers = ["", "Trial", "State", *_short_keys(keys), f"Value ({spec.metric.name})", "Steps", "Time", "Note"]
    table = []
    for row in rows:
        table.append(
            [
                "*" if row.best else "",
                row.number,
                row.state,
                *(_param(row.params.get(key)) for key in keys),
                _value(row) if row.state == "COMPLETE" else None,
                f"{row.timesteps:,}" if row.timesteps else None,
                elapsed(row.seconds),
                row.note or "",
            ]
        )
    return format_table(headers, table)


def _short_keys(keys: list[str]) -> list[str]:
    """Column headers for the keys of the space: each key's last name where that is unique, else the whole key."""
    last = [key.rsplit(".", 1)[-1] for key in keys]
    return [short if last.count(short) == 1 else key for short, key in zip(last, keys, strict=True)]


def _param(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _value(row: TrialRow) -> str | None:
    if row.value is None:
        return None
    return f"{row.value:.4g}" + (f" ± {row.spread:.3g}" if row.spread is not None else "")


def _summary(spec: SweepSpec) -> str:
    base = spec.base
    agent = base["agent"].get("type", "?")
    environment = base["environment"].get("gym_id") or base["environment"].get("type", "?")
    budget = f"{base['total_timesteps']:,} timesteps" if base.get("total_timesteps") else f"{base['episodes']} episodes"
    seeds = f"{spec.seeds_per_trial} seed{'s' if spec.seeds_per_trial > 1 else ''}"
    where = f" on '{spec.cluster}'" if spec.cluster else ""
    return (
        f"{spec.trials} trials ({spec.parallel} at a time{where}, {seeds} each) of {agent} on {environment}, "
        f"{budget} per run, over {', '.join(d.key for d in spec.space)}; {spec.metric.direction} "
        f"{spec.metric.name}; {spec.sampler.kind} sampler, {spec.pruner.kind} pruner"
    )
