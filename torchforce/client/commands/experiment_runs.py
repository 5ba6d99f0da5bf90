"""``tfcli experiment new|start|pause|stop|download|delete``: creating and running experiments and groups of runs
(thin wrappers over ``Experiment`` and ``Group``); their arguments are in ``commands/experiment.py``."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

from torchforce.client import queue, warm_start
from torchforce.client.commands import command, views
from torchforce.client.commands.output import relative
from torchforce.client.errors import ClientError
from torchforce.client.experiment import Experiment, delete_runs
from torchforce.client.groups import Group, format_seeds, memberships, new_group
from torchforce.client.overrides import Override, apply_to_experiment, blame, parse_overrides
from torchforce.client.project import Project
from torchforce.spec import SpecError, load_file

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
        alone={"new": f"never started: 'tfcli experiment start -e {name}' starts it"} if kind == "resume" else None,
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
    alone: dict[str, str] | None = None,
) -> None:
    """``act`` on each run of the group ``name`` whose status is one of ``statuses``, printing the line it
    returns; the others are named as left alone. Queued runs come first (a run paused or stopped before them
    would free its slot to one of them), then the rest in the order of their seeds. A run that fails does not
    stop the rest: the failures are one error at the end (exit 2), as is a group none of whose runs was in one
    of ``statuses`` (with ``hint``, or ``hint`` of the statuses its runs are in). The failures' error begins with
    ``failed`` (default "group 'NAME':"), and ``failed_hint``, given the first run that failed and its error's
    hint, makes its hint. ``alone``: by status, what the line of a run left alone adds (how to act on it)."""
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
            said = (alone or {}).get(now[run.name])
            print(f"'{run.name}' is {now[run.name]}: left alone" + (f" ({said})" if said else ""))
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
