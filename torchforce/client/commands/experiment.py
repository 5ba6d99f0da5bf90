"""``tfcli experiment ...``: create, run and inspect experiments (thin wrappers over ``Experiment``)."""

from __future__ import annotations

import argparse
import re
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from torchforce.client import queue, warm_start
from torchforce.client.aggregate import WINDOW
from torchforce.client.commands import add_command, command, evaluate, finite_float, positive_int, views
from torchforce.client.commands.output import print_json, relative
from torchforce.client.errors import ClientError, ClientWarning
from torchforce.client.experiment import Experiment, delete_runs
from torchforce.client.groups import Group, format_seeds, memberships, new_group, parse_seeds, resolve
from torchforce.client.overrides import Override, apply_to_experiment, blame, parse_overrides
from torchforce.client.project import Project, check_output
from torchforce.client.report import GroupSummary, Summary, read_episodes, summarize, summarize_group
from torchforce.spec import SpecError, load_file


def add_parser(groups: argparse._SubParsersAction) -> None:
    group = add_command(
        groups,
        "experiment",
        help="create, run and inspect experiments",
        description="Experiments: an agent on an environment with a budget, validated completely when created,\n"
        "run by a background worker (on this machine, or as a Ray job on a cluster of the project), paused,\n"
        "resumed and compared.",
        examples=[
            "tfcli experiment new -n cp -A ppo_cartpole -E cartpole -t 50000",
            "tfcli experiment start -e cp --follow",
            "tfcli experiment list",
        ],
    )
    experiments = group.add_subparsers(dest="command", metavar="COMMAND", help="one of:")
    _add_new(experiments)
    _add_running(experiments)
    _add_inspecting(experiments)
    _add_results(experiments)
    evaluate.add_parsers(experiments)


def _add_new(experiments: argparse._SubParsersAction) -> None:
    new = add_command(
        experiments,
        "new",
        help="create an experiment",
        description="Create experiments/NAME/experiment.json from a spec file and/or flags (flags override the "
        "file).\nBare names resolve to configs/<kind>/NAME.json. --set KEY=VALUE changes any value of the result, "
        "also\ninside the agent, network, environment and cluster configs (a named config is loaded, then changed): "
        "KEY\nis a dotted path (agent.network[0].size), VALUE is JSON (8, 3e-4, true, [64, 64]) or else plain text. "
        "The\nwhole experiment is validated (the environment and the agent are built once) before anything is "
        "written,\nand experiment.json shows every value as set. --seeds makes a group: one run per seed, named "
        "NAME-s<seed>,\nall validated before any is written; 'show', 'compare' and 'plot' take the group's name "
        "for its runs.",
        examples=[
            "tfcli experiment new -n cp -A ppo_cartpole -E cartpole -t 50000 --start",
            "tfcli experiment new -n cp -A ppo_cartpole -E cartpole -t 50000 --seeds 0-4 --start",
            "tfcli experiment new -f cartpole_ppo -n cp-seed3 --seed 3",
            "tfcli experiment new -n dqn-acro -A dqn_cartpole -E cartpole --episodes 500 \\\n"
            "      --set agent.optimizer.learning_rate=3e-4 --set environment.gym_id=Acrobot-v1 "
            "--set num_environments=8",
            "tfcli experiment new -n cp4 -A ppo_cartpole -E cartpole --run-mode multi-threaded --num-workers 4",
            "tfcli experiment new -f cartpole_ppo -n cp-tuned --warm-start cp --seed 1",
        ],
    )
    new.add_argument("-f", "--file", help="an experiment spec file, or a name in configs/experiments/")
    new.add_argument("-n", "--name", help="the experiment's name (lower-case letters, digits, '-', '_')")
    new.add_argument("-A", "--agent", help="agent config (file or name in configs/agents/)")
    new.add_argument("-M", "--network", help="network config (file or name in configs/networks/)")
    new.add_argument(
        "-E",
        "--environment",
        help="environment: a config (file or name in configs/environments/), a Gymnasium id such as "
        "HalfCheetah-v5, or module:Class",
    )
    new.add_argument(
        "--cluster", help="cluster config (file or name in configs/clusters/); -c at 'start' picks one to run on"
    )
    new.add_argument("--episodes", type=int, help="stop after this many episodes in all")
    new.add_argument("-t", "--total-timesteps", type=int, help="stop after this many timesteps in all")
    new.add_argument("--max-timesteps-per-episode", type=int, help="cut episodes at this many timesteps")
    new.add_argument("--deterministic", action="store_true", default=None, help="act without exploration")
    new.add_argument("--num-workers", type=int, help="workers (multi-threaded and distributed run modes)")
    new.add_argument("--num-parameter-servers", type=int, help="parameter servers (distributed run mode)")
    new.add_argument("--run-mode", choices=("single", "multi-threaded", "distributed"), help="how the workers run")
    new.add_argument(
        "-N",
        "--num-environments",
        type=int,
        help="vectorized environment copies (default 1; single and distributed run modes)",
    )
    new.add_argument(
        "--torch-threads",
        type=int,
        help="torch threads of whatever runs the agent (default 1, fastest for small networks; CNN agents "
        "gain from more where cores are free)",
    )
    new.add_argument("--seed", type=int, help="random seed (default 0)")
    new.add_argument(
        "--seeds",
        type=seeds_argument,
        metavar="SEEDS",
        help="make a group of runs NAME-s<seed>, one per seed: 0-4, 0,3,7 or 0-2,5",
    )
    new.add_argument("--description", help="a line saying what the experiment is for")
    new.add_argument(
        "--warm-start",
        metavar="EXP[:CHECKPOINT]",
        help="begin from the networks (and preprocessing statistics) of experiment EXP's checkpoint here: latest "
        "(default), best or a timestep; copied into the new experiment",
    )
    new.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="set one value of the spec, after the file and the flags (repeatable; see above); not a whole field "
        "that a flag gives another value",
    )
    new.add_argument("--start", action="store_true", help="start it (or each run of the group) right away")


def seeds_argument(text: str) -> list[int]:
    """An argparse type: the seeds of ``--seeds`` (``groups.parse_seeds``)."""
    try:
        return parse_seeds(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _window_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--window",
        type=positive_int,
        default=WINDOW,
        metavar="N",
        help=f"average returns over the last N episodes (default {WINDOW}, in every table and plot)",
    )


def _add_running(experiments: argparse._SubParsersAction) -> None:
    listing = add_command(
        experiments,
        "list",
        help="a table of the project's experiments and groups",
        description="A table of the project's experiments: agent, environment, where it runs, status, progress and "
        "the\nmean return of the last 100 episodes (--window). A group of runs (--seeds) is one row: its runs' "
        "statuses\ncounted, their mean progress, and the mean return across seeds with a 95% confidence interval; "
        "--runs\nlists every run instead. --json gives every run's row, then every group's.",
        examples=["tfcli experiment list", "tfcli experiment list --runs --window 20", "tfcli experiment list --json"],
    )
    listing.add_argument("--runs", action="store_true", help="a row for every run, also those of groups")
    _window_argument(listing)
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    start = add_command(
        experiments,
        "start",
        help="start (or resume) an experiment",
        description="Start the experiment's worker in the background: on this machine, or with -c CLUSTER as a "
        "Ray job\non a Ray cluster or a RayJob on a GKE cluster made with 'tfcli cluster create'. Without -c, the "
        "spec's\ncluster is used when it names one: a GKE cluster it names that does not exist yet is created for "
        "it\n(its cost shown, confirmed or --yes) and deleted when the experiment ends, as tensorforce-client did."
        "\n--resume continues a paused, stopped or crashed run from its latest checkpoint (where it ran last,\n"
        "unless -c says otherwise; its own GKE cluster, deleted as the run ended, is created again, in the same\n"
        "zone); with -t N (or --episodes N) it continues to that new total, a finished run too (-t sets the\n"
        "budget of any start: it is written to experiments/NAME/experiment.json when the run takes its slot;\n"
        "the agent's own schedules keep theirs). -e may name a group: each of its runs.\n"
        "--fresh discards earlier results and starts over. --max-restarts N resumes from the last checkpoint\n"
        "by itself after a crash or a killed worker process, up to N times.\n"
        "On this machine, a start beyond the runs it takes at once ('tfcli project config') is queued: it starts\n"
        "by itself, first come first served, when a run ends (--follow waits for it).",
        examples=[
            "tfcli experiment start -e cp --follow",
            "tfcli experiment start -e cp --resume",
            "tfcli experiment start -e cp --resume -t 200000",
            "tfcli experiment start -e a3c -c ray_local --max-restarts 3",
            "tfcli experiment start -e a3c -c gke-small --max-restarts 3",
        ],
    )
    _experiment_argument(start, group=True)
    start.add_argument("--resume", action="store_true", help="continue from the latest checkpoint")
    start.add_argument("--fresh", action="store_true", help="discard earlier results and start over")
    start.add_argument("-c", "--cluster", help="a Ray or GKE cluster of the project, or 'local' (this machine)")
    start.add_argument(
        "-y", "--yes", action="store_true", help="create the spec's GKE cluster without asking (its cost is shown)"
    )
    start.add_argument(
        "--dry-run", action="store_true", help="GKE: print the gcloud/kubectl calls and the RayJob, change nothing"
    )
    start.add_argument(
        "--max-restarts", type=int, default=0, metavar="N", help="resume by itself after a crash, up to N times"
    )
    start.add_argument(
        "--trust-pickle",
        action="store_true",
        help="resuming results from someone else: unpickle their environments' state anyway (it runs their code; "
        "without it such a run goes on in fresh environments)",
    )
    start.add_argument(
        "-t",
        "--total-timesteps",
        type=int,
        metavar="N",
        help="the run's budget in timesteps, all told: with --resume, train longer (a finished run too)",
    )
    start.add_argument("--episodes", type=int, metavar="N", help="the run's budget in episodes, all told")
    start.add_argument("-F", "--follow", action="store_true", help="show progress until the experiment ends")
    pause = add_command(
        experiments,
        "pause",
        help="checkpoint a running experiment and stop its worker",
        description="Ask the worker to checkpoint and end; 'start --resume' continues exactly where it paused.\n"
        "On GKE the RayJob is then suspended (its pods go; the cluster's nodes stay until it is deleted).",
        examples=["tfcli experiment pause -e cp"],
    )
    _experiment_argument(pause, group=True)
    stop = add_command(
        experiments,
        "stop",
        help="end an experiment for good (checkpointing first)",
        description="End the experiment: a running worker checkpoints first. Its results stay in "
        "experiments/NAME/results/.\nA queued experiment leaves the queue instead, back to the status it had.",
        examples=["tfcli experiment stop -e cp"],
    )
    _experiment_argument(stop, group=True)
    stop.add_argument("--no-download", action="store_true", help="do not fetch the results first")


def _add_inspecting(experiments: argparse._SubParsersAction) -> None:
    show = add_command(
        experiments,
        "show",
        help="an experiment's (or a group's) spec, status, counters and recent returns",
        description="Everything about one experiment: status, agent, environment, budget, progress, speed, recent "
        "returns,\ncheckpoint and where its results are. For a group: what its runs share, their statuses, the "
        "mean return\nacross seeds (95% confidence interval, IQM), and a row per run.",
        examples=["tfcli experiment show -e cp", "tfcli experiment show -e cp --json"],
    )
    show.add_argument("-e", "--experiment", required=True, metavar="NAME", help="the experiment's or group's name")
    _window_argument(show)
    show.add_argument("--json", action="store_true", help="machine-readable output (with the whole spec)")
    logs = add_command(
        experiments,
        "logs",
        help="print an experiment's worker log",
        description="Print the worker's log (progress lines, checkpoints, errors); on a Ray cluster, the job's log; "
        "on GKE,\nthe RayJob's (kubectl logs, streamed with --follow).",
        examples=["tfcli experiment logs -e cp", "tfcli experiment logs -e cp --follow"],
    )
    _experiment_argument(logs)
    logs.add_argument("-F", "--follow", action="store_true", help="keep printing until the worker ends")
    watch = add_command(
        experiments,
        "watch",
        help="show a progress bar until the experiment ends",
        description="A progress bar (timesteps, steps/s, episodes, mean return) until the experiment stops running.",
        examples=["tfcli experiment watch -e cp"],
    )
    _experiment_argument(watch)


def _add_results(experiments: argparse._SubParsersAction) -> None:
    plot = add_command(
        experiments,
        "plot",
        help="learning curves of one or more experiments (PNG)",
        description="Plot the episode return, smoothed over the last --window episodes, against timesteps and "
        "against\nwall-clock time: one line per experiment; for a group, the mean across its seeds in a 95% "
        "bootstrap\nconfidence band.",
        examples=["tfcli experiment plot -e cp", "tfcli experiment plot -e cp cp-seed3 -o curves.png --window 50"],
    )
    plot.add_argument(
        "-e", "--experiment", nargs="+", required=True, metavar="NAME", help="the experiments and groups to plot"
    )
    plot.add_argument(
        "-o",
        "--output",
        help="the PNG to write (default: learning_curve.png in the first experiment's results folder, "
        "group_learning_curve.png for a group)",
    )
    _window_argument(plot)
    compare = add_command(
        experiments,
        "compare",
        help="a table comparing experiments",
        description="Compare experiments and groups: episodes, timesteps, time, best and final mean return (of "
        "the last\n--window episodes), speed; with --threshold also the steps and time each took to reach that mean "
        "return.\nA group shows its runs' figures together: the final mean return across seeds with a 95% "
        "bootstrap\nconfidence interval and the interquartile mean (IQM), and how many seeds reached the threshold, "
        "how\nfast (median, min-max).",
        examples=[
            "tfcli experiment compare -e cp cp-seed3 --threshold 475",
            "tfcli experiment compare cp-group other   # -e may be left out",
        ],
    )
    compare.add_argument(
        "-e", "--experiment", nargs="+", default=[], metavar="NAME", help="the experiments and groups to compare"
    )
    compare.add_argument("experiments", nargs="*", metavar="NAME", help="the same, without -e")
    compare.add_argument(
        "--threshold", type=finite_float, help="report steps and time until the mean return (last --window) reaches it"
    )
    _window_argument(compare)
    compare.add_argument("--json", action="store_true", help="machine-readable output")
    download = add_command(
        experiments,
        "download",
        help="fetch an experiment's results into experiments/NAME/results",
        description="Bring the results (checkpoints, TensorBoard summaries, episode log) to "
        "experiments/NAME/results/.\nOn this machine they are there already.",
        examples=["tfcli experiment download -e cp"],
    )
    _experiment_argument(download, group=True)
    delete = add_command(
        experiments,
        "delete",
        help="remove an experiment that is not running, with its results",
        description="Remove the experiment's folder (spec and results) and its row in the state database. It "
        "also\nremoves an experiment whose folder was deleted by hand or whose spec is damaged.",
        examples=["tfcli experiment delete -e cp"],
    )
    _experiment_argument(delete, group=True)


def _experiment_argument(parser: argparse.ArgumentParser, group: bool = False) -> None:
    """``-e NAME``; with ``group``, NAME may also be a group (``new --seeds``): the command acts on each of its
    runs for which it makes sense (``on_group``)."""
    parser.add_argument(
        "-e",
        "--experiment",
        required=True,
        metavar="NAME",
        help="the experiment's name, or a group's: each of its runs" if group else "the experiment's name",
    )


# ---------------------------------------------------------------------------------------------- creating


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
        "torch_threads": args.torch_threads,
        "seed": args.seed,
        "description": args.description,
        "warm_start": None if args.warm_start is None else warm_start.parse_flag(args.warm_start),
    }
    overrides = parse_overrides(args.set)
    _check_set_against_flags(fields, overrides)
    try:
        if args.seeds is not None:
            others = {key: value for key, value in fields.items() if key != "name"}
            group = new_group(project, args.name, args.seeds, file=args.file, overrides=overrides, **others)
        else:
            experiment = Experiment(project, file=args.file, **fields)
            experiment.raw = apply_to_experiment(project, experiment.raw, overrides)
            _check_not_a_group(project, experiment.raw.get("name"))
            experiment.generate_locally()
    except SpecError as error:
        flags = {key for key, value in fields.items() if value is not None}
        flags |= {str(override.steps[0]) for override in overrides}
        raise _in_file(blame(error, overrides), project, args.file, flags) from None
    if args.seeds is not None:
        _created_group(group, start=args.start)
    else:
        _created_experiment(experiment, start=args.start)


# the short flags of 'experiment new' by the field each sets (the others are --FIELD, with '-' for '_')
NEW_SHORT_FLAGS = {
    "name": "-n",
    "agent": "-A",
    "network": "-M",
    "environment": "-E",
    "total_timesteps": "-t",
    "num_environments": "-N",
}


def _check_set_against_flags(fields: dict[str, object], overrides: list[Override]) -> None:
    """A ``--set FIELD=VALUE`` of a whole field that a flag gives another value: one of them would be dropped
    without a word (``-n d1 --set name=other`` made 'other')."""
    for override in overrides:
        field = str(override.steps[0])
        if len(override.steps) == 1 and fields.get(field) not in (None, override.value):
            flag = NEW_SHORT_FLAGS.get(field, f"--{field.replace('_', '-')}")
            raise SpecError(
                f"experiment.{field}",
                f"given twice, by {flag} and by --set {override.text}",
                expected="one of them",
                hint=f"Give {flag} alone, or --set {override.text} alone.",
            )


def _created_experiment(experiment: Experiment, *, start: bool) -> None:
    """What ``new`` made, and with ``start``, the run started (or queued)."""
    spec = experiment.checked_spec
    print(
        f"Created experiment '{experiment.name}' in {relative(experiment.folder)}: {views.agent_name(spec)} on "
        f"{views.environment_name(spec)}, {spec['run_mode']} run mode"
    )
    if start:
        print(started_line(experiment, _start_created(experiment)))
        print(f"Follow it with: tfcli experiment watch -e {experiment.name}")
    elif _needs_a_gpu_elsewhere(spec):
        print(
            "Start it on a cluster with GPUs (this machine has no CUDA): tfcli experiment start -e "
            f"{experiment.name} -c CLUSTER"
        )
    else:
        print(f"Start it with: tfcli experiment start -e {experiment.name}")


def _start_created(experiment: Experiment) -> int | str | None:
    """``experiment.start()`` for ``new --start``; a start that fails says that the experiment was made and stays,
    and how to start it (its hint names 'experiment start' flags, which 'new' does not have)."""
    try:
        return experiment.start()
    except (ClientError, SpecError) as error:
        message, hint = str(error).splitlines()[0], error.hint
        command = f"tfcli experiment start -e {experiment.name}"
        if hint is None or command not in hint:
            hint = " ".join(filter(None, (hint, f"It is kept: start it with '{command}'.")))
        raise ClientError(
            f"experiment '{experiment.name}' was created and is kept, but it did not start: {message}", hint=hint
        ) from None


def _needs_a_gpu_elsewhere(spec: dict[str, object]) -> bool:
    """Whether the experiment's agent computes on "cuda", it names no cluster, and this machine has no CUDA: a
    start here is refused."""
    from torchforce.spec.device import missing_gpu

    agent = spec["agent"]
    return isinstance(agent, dict) and not spec.get("cluster") and missing_gpu(agent.get("device"))


def _check_not_a_group(project: Project, name: object) -> None:
    """A new experiment may not take a group's name: ``-e NAME`` would mean two things."""
    runs = memberships(project).get(name) if isinstance(name, str) else None
    if runs:
        raise ClientError(
            f"'{name}' is the name of a group ({', '.join(runs)})",
            hint="Pick another name for the experiment.",
        )


def _created_group(group: Group, *, start: bool) -> None:
    """What ``new --seeds`` made, and with ``start``, each run started (or queued)."""
    spec = group.runs[0].checked_spec
    names = [run.name for run in group.runs]
    shown = ", ".join(names) if len(names) <= 3 else f"{names[0]} ... {names[-1]}"
    print(
        f"Created group '{group.name}' of {len(names)} run{'s' * (len(names) != 1)} ({shown}; seeds "
        f"{format_seeds(group.seeds)}) in {relative(group.project.experiments_folder)}: {views.agent_name(spec)} on "
        f"{views.environment_name(spec)}, {spec['run_mode']} run mode"
    )
    if not start:
        print(f"Start them with 'tfcli experiment start -e {group.name}' (or one with -e {names[0]}).")
        return
    command = f"tfcli experiment start -e {group.name}"  # it starts the runs that are still new
    on_group(
        group.name,
        group.runs,
        ("new",),
        lambda run: started_line(run, run.start()),
        doing="start",
        hint=f"Start them with '{command}'.",
        failed=f"group '{group.name}' was created and is kept, but",
        failed_hint=lambda run, hint: _group_start_hint(run, hint, command),
    )
    print(f"Follow them with: tfcli experiment show -e {group.name}")


def _group_start_hint(run: str, hint: str | None, command: str) -> str:
    """The hint of a group's ``new --start`` whose run ``run`` failed first with ``hint``: its start command made
    the group's ``command`` (which starts each run that is still new), else ``command`` after it."""
    own = f"tfcli experiment start -e {run}"
    if hint and own in hint:
        return hint.replace(own, command)
    return " ".join(filter(None, (hint, f"Then start them with '{command}'.")))


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


# ---------------------------------------------------------------------------------------------- running


@command("experiment", "start")
def experiment_start(args: argparse.Namespace) -> int | None:
    project = Project.find()
    options = {key: getattr(args, key) for key in ("resume", "cluster", "fresh", "max_restarts", "trust_pickle")}
    options.update(yes=args.yes, dry_run=args.dry_run)
    options["budget"] = {k: getattr(args, k) for k in ("total_timesteps", "episodes") if getattr(args, k) is not None}
    runs = group_runs(project, args.experiment)
    if runs is not None:
        if args.follow or args.dry_run:
            raise ClientError(
                f"'{args.experiment}' is a group: {'--follow' if args.follow else '--dry-run'} is for one run",
                hint=f"Give one of its runs with -e ({', '.join(run.name for run in runs)}).",
            )
        _start_group(args.experiment, runs, options)
        return None
    experiment = Experiment.load(project, args.experiment)
    since = experiment.checkpoint_timesteps() if args.resume else 0
    handle = experiment.start(**options)
    if args.dry_run:
        print("Dry run: nothing was changed.")
        return None
    print(started_line(experiment, handle, resumed=args.resume))
    return views.follow(experiment, since=since) if args.follow else None


# what a start of a whole group does to a run in each status (the others are left as they are): a plain start
# starts the runs that have not run, --resume continues those that stopped short (finished ones too with a new
# budget), --fresh starts every run that is not running over
STARTS = {
    "plain": ("new",),
    "resume": ("paused", "stopped", "failed"),
    "fresh": ("new", "paused", "stopped", "failed", "finished"),
}


def _start_group(name: str, runs: list[Experiment], options: dict) -> None:
    kind = "fresh" if options["fresh"] else "resume" if options["resume"] else "plain"
    statuses = STARTS[kind] + (("finished",) if kind == "resume" and options["budget"] else ())

    def start(run: Experiment) -> str:
        return started_line(run, run.start(**options), resumed=options["resume"])

    on_group(
        name,
        runs,
        statuses,
        start,
        doing="start" if kind == "plain" else "resume" if kind == "resume" else "start afresh",
        hint={
            "plain": f"Continue runs that stopped short with 'tfcli experiment start -e {name} --resume', or start "
            f"them all over with --fresh.",
            "resume": f"A finished run goes on with a new budget: 'tfcli experiment start -e {name} --resume -t N'.",
            "fresh": "Pause or stop the running ones first.",
        }[kind],
    )


def group_runs(project: Project, name: str) -> list[Experiment] | None:
    """The runs of the group ``name`` when ``-e`` names a group (and no experiment of that name), a damaged one
    among them to fail on its own; else None."""
    if project.store.experiment(name) is not None or not memberships(project).get(name):
        return None
    return Group.load(project, name, damaged=True).runs


def on_group(
    name: str,
    runs: list[Experiment],
    statuses: tuple[str, ...],
    act: Callable[[Experiment], str],
    *,
    doing: str,
    hint: str | Callable[[set[str]], str],
    failed: str | None = None,
    failed_hint: Callable[[str, str | None], str] | None = None,
) -> None:
    """``act`` on each run of the group ``name`` whose status is one of ``statuses``, printing the line it
    returns; the others are named as left alone. Queued runs come first (a run paused or stopped before them
    would free its slot to one of them), then the rest in the order of their seeds. A run that fails does not
    stop the rest: the failures are one error at the end (exit 2), as is a group none of whose runs was in one
    of ``statuses`` (with ``hint``, or ``hint`` of the statuses its runs are in). The failures' error begins with
    ``failed`` (default "group 'NAME':"), and ``failed_hint``, given the first run that failed and its error's
    hint, makes its hint."""
    now = {run.name: run.record().status for run in runs}
    if not any(status in statuses for status in now.values()):
        raise ClientError(
            f"group '{name}': no run to {doing} (its runs are {', '.join(sorted(set(now.values())))})",
            hint=hint if isinstance(hint, str) else hint(set(now.values())),
        )
    failures: list[str] = []
    first: tuple[str, str | None] | None = None
    for run in sorted(runs, key=lambda run: now[run.name] != "queued"):  # queued ones first: before a slot frees
        if now[run.name] not in statuses:
            print(f"'{run.name}' is {now[run.name]}: left alone")
            continue
        try:
            print(act(run))
        except (ClientError, SpecError) as error:
            failures.append(f"{run.name} ({str(error).splitlines()[0]})")
            first = first or (run.name, error.hint)
    if failures:
        lead = failed or f"group '{name}':"
        example = f"Each run's own command names it with -e, e.g. 'tfcli experiment show -e {failures[0].split()[0]}'."
        raise ClientError(
            f"{lead} {len(failures)} of {len(runs)} runs did not {doing}: " + "; ".join(failures),
            hint=failed_hint(*first) if failed_hint and first else example,
        )


def started_line(experiment: Experiment, handle: int | str | None, *, resumed: bool = False) -> str:
    """What a start did: the workload it started and where its results go, or the run's place in the queue
    (``handle`` None)."""
    if handle is None:
        place = experiment.place()
        if place is not None:
            return (
                f"'{experiment.name}' is queued ({place.describe()}): it starts by itself when a run ends; "
                f"'tfcli experiment stop -e {experiment.name}' takes it out of the queue"
            )
        record = experiment.record()  # it has left the queue already
        return f"'{experiment.name}' is {record.status}" + (f" (worker PID {record.pid})" if record.pid else "")
    record = experiment.record()
    kind = "RayJob" if record.backend == "gke" else "Ray job"
    where = f"worker PID {handle}" if isinstance(handle, int) else f"{kind} {handle} on '{record.cluster}'"
    results = experiment.storage()
    location = relative(experiment.results) if results.local == experiment.results else results.location
    return f"{'Resumed' if resumed else 'Started'} '{experiment.name}' ({where}); results in {location}"


@command("experiment", "watch")
def experiment_watch(args: argparse.Namespace) -> int:
    experiment = Experiment.load(Project.find(), args.experiment)
    if experiment.record().status == "new":
        raise ClientError(
            f"experiment '{experiment.name}' has not been started, so there is nothing to watch",
            hint=f"Start it and watch it: tfcli experiment start -e {experiment.name} --follow",
        )
    return views.follow(experiment)


@command("experiment", "pause")
def experiment_pause(args: argparse.Namespace) -> None:
    _on_one_or_each(
        args.experiment,
        ("queued", "running"),
        _paused,
        doing="pause",
        hint=lambda statuses: (
            f"Continue the paused ones with 'tfcli experiment start -e {args.experiment} --resume'."
            if "paused" in statuses
            else "Runs that are new, finished, failed or stopped have nothing to pause."
        ),
        in_group=_paused_in_group,
    )


def _paused_in_group(experiment: Experiment) -> str:
    """A run of a group being paused: a queued one leaves the queue (nothing of the group may start), a running
    one pauses."""
    if experiment.project.store.experiment(experiment.name).status == "queued":  # type: ignore[union-attr]
        left = queue.leave(experiment.project, experiment.name)
        if left is not None:
            return f"'{experiment.name}' left the queue; it is {left.status} again"
    return _paused(experiment)  # (it has started meanwhile)


def _on_one_or_each(
    name: str,
    statuses: tuple[str, ...],
    act: Callable[[Experiment], str],
    *,
    doing: str,
    hint: str | Callable[[set[str]], str],
    in_group: Callable[[Experiment], str] | None = None,
) -> None:
    """``act`` on the experiment ``name`` and print its line, or where ``name`` is a group, ``in_group`` (default:
    ``act``) on each of its runs whose status is one of ``statuses`` (``on_group``)."""
    project = Project.find()
    runs = group_runs(project, name)
    if runs is None:
        print(act(Experiment.load(project, name)))
    else:
        on_group(name, runs, statuses, in_group or act, doing=doing, hint=hint)


def _paused(experiment: Experiment) -> str:
    record = experiment.pause()
    return (
        f"'{experiment.name}' is {record.status} at timestep {experiment.checkpoint_timesteps():,}; "
        f"continue with: tfcli experiment start -e {experiment.name} --resume"
    )


@command("experiment", "stop")
def experiment_stop(args: argparse.Namespace) -> None:
    _on_one_or_each(
        args.experiment,
        ("queued", "running", "paused"),
        lambda run: _stopped(run, args.no_download),
        doing="stop",
        hint="Runs that are new, finished, failed or stopped already have nothing to stop (a failed run stays "
        "failed in a group's stop; 'tfcli experiment stop -e RUN' ends one for good).",
    )


def _stopped(experiment: Experiment, no_download: bool) -> str:
    before = experiment.project.store.experiment(experiment.name)
    record = experiment.stop(no_download=no_download)
    if before is not None and before.status == "queued" and record.status != "stopped":
        return f"'{experiment.name}' left the queue; it is {record.status} again"
    results = f"; results in {relative(experiment.results)}" if experiment.results.is_dir() else ""
    return f"'{experiment.name}' is {record.status}{results}"


@command("experiment", "download")
def experiment_download(args: argparse.Namespace) -> None:
    _on_one_or_each(
        args.experiment,
        ("running", "paused", "stopped", "failed", "finished"),
        _downloaded,
        doing="download",
        hint="Runs that have not started have no results yet.",
    )


def _downloaded(experiment: Experiment) -> str:
    folder = experiment.download()
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    size = sum(p.stat().st_size for p in files)
    return f"Results of '{experiment.name}' are in {relative(folder)} ({len(files)} files, {size / 1e6:.1f} MB)"


@command("experiment", "delete")
def experiment_delete(args: argparse.Namespace) -> None:
    project = Project.find()
    runs = group_runs(project, args.experiment)
    if runs is None:
        print(_deleted(Experiment.load(project, args.experiment, damaged=True)))
        return
    delete_runs(
        runs,
        whole=f"group '{args.experiment}'",
        stop_first=f"Stop them first with 'tfcli experiment stop -e {args.experiment}'.",
        again=f"Delete the rest again with 'tfcli experiment delete -e {args.experiment}'.",
        delete=lambda run: print(_deleted(run)),
    )


def _deleted(experiment: Experiment) -> str:
    before = experiment.project.store.experiment(experiment.name)
    experiment.delete()
    queued = before is not None and before.status == "queued"
    return f"Deleted experiment '{experiment.name}'" + (" (it left the queue)" if queued else "")


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
