"""Groups of runs: the seeds of one setup (``tfcli experiment new -n cp ... --seeds 0-4`` makes ``cp-s0`` ...
``cp-s4``), or the trials of a sweep. A run belongs to a group by its spec's ``group`` field; a group has no file
or database row of its own: it is the runs that name it, and it ends when the last of them is deleted.

Wherever a command takes experiments (``show``, ``compare``, ``plot``), a group's name stands for its runs taken
together (``report.summarize_group``, ``plots.plot_learning_curves``). An experiment and a group never share a
name: ``new_group`` refuses a name an experiment has; if one is made anyway (a sweep sets ``group`` itself), the
experiment is what the name means.

Scripts use the same API as the commands::

    group = new_group(project, "cp", [0, 1, 2], agent="ppo_cartpole", environment="cartpole", total_timesteps=50_000)
    group.start()
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from torchforce.client.backends import Handle
from torchforce.client.errors import ClientError
from torchforce.client.experiment import Experiment
from torchforce.client.experiment_file import LONGEST_NAME, check_name, resolve_experiment
from torchforce.client.overrides import Override, apply_to_experiment
from torchforce.client.project import Project
from torchforce.spec import SpecError, did_you_mean
from torchforce.spec.options import MAX_SEED

SEEDS_RULE = "seeds like 0-4, 0,3,7 or 0-2,5 (whole numbers >= 0)"
# More runs than this in one command is taken for a typo (0-1000 for 0-100): each is a folder and a worker.
MAX_SEEDS = 1000
# Fields a group sets on each of its runs: a --set or a flag for them would be overruled, so it is refused.
PER_RUN = ("name", "seed", "group")


def parse_seeds(text: str) -> list[int]:
    """The seeds ``text`` lists: ``0-4`` (a range, both ends included), ``0,3,7``, or both (``0-2,5``), in the
    order written. A ValueError saying what is wrong for anything else, for a seed given twice, for a seed past
    MAX_SEED (the agent's range), or for more than MAX_SEEDS seeds."""
    seeds: list[int] = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if match is None:
            raise ValueError(f"expected {SEEDS_RULE}, got '{text}'")
        first, last = int(match[1]), int(match[2] if match[2] is not None else match[1])
        if max(first, last) > MAX_SEED:
            raise ValueError(f"seed {max(first, last)} is out of range; expected seeds in [0, 2^64 - 1]")
        if last < first:
            raise ValueError(f"the range '{part.strip()}' runs backwards; write it as '{last}-{first}'")
        if len(seeds) + last - first + 1 > MAX_SEEDS:
            raise ValueError(f"more than {MAX_SEEDS} seeds in '{text}'; give fewer")
        seeds += range(first, last + 1)
    repeated = sorted({seed for seed in seeds if seeds.count(seed) > 1})
    if repeated:
        raise ValueError(f"seed {repeated[0]} is given twice in '{text}'")
    return seeds


def format_seeds(seeds: Sequence[int | None]) -> str:
    """``seeds`` as ``parse_seeds`` reads them, consecutive ones as ranges: ``[0, 1, 2, 5]`` -> ``"0-2,5"``."""
    known = sorted(seed for seed in seeds if seed is not None)
    parts: list[str] = []
    start = previous = None
    for seed in [*known, None]:
        if previous is not None and seed == previous + 1:
            previous = seed
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = seed
    return ",".join(parts)


def run_name(group: str, seed: int) -> str:
    return f"{group}-s{seed}"


class Group:
    """The runs of the group ``name`` of ``project``, in the order of their seeds."""

    def __init__(self, project: Project, name: str, runs: list[Experiment]) -> None:
        self.project, self.name, self.runs = project, name, runs

    @classmethod
    def load(cls, project: Project, name: str, *, damaged: bool = False) -> Group:
        """The group ``name``: a ClientError when no experiment names it (see ``memberships``). With ``damaged``,
        a run whose spec is broken is still one of it (``Experiment.load``'s ``damaged``), first in the order."""
        names = memberships(project).get(name)
        if not names:
            raise ClientError(
                f"no group named '{name}' in project '{project.name}'",
                hint=_known_groups(project, name) or "Create one with 'tfcli experiment new -n NAME ... --seeds 0-4'.",
            )
        return cls(project, name, _by_seed([Experiment.load(project, run, damaged=damaged) for run in names]))

    @property
    def seeds(self) -> list[int | None]:
        return [run.checked_spec.get("seed") for run in self.runs]

    def start(self, **options: Any) -> list[Handle | None]:
        """``Experiment.start(**options)`` for each run, in order (runs beyond what the machine takes at once are
        queued by it); the handles. A run that cannot start stops the rest, with an error naming those started."""
        handles: list[Handle | None] = []
        for run in self.runs:
            try:
                handles.append(run.start(**options))
            except (ClientError, SpecError) as error:
                started = [r.name for r in self.runs[: len(handles)]]
                raise ClientError(
                    f"run '{run.name}' of group '{self.name}' did not start: {error}",
                    hint=("Started before it: " + ", ".join(started) + ". " if started else "")
                    + f"Start it and the rest with 'tfcli experiment start -e {self.name}' (it starts the runs "
                    "that are new).",
                ) from None
        return handles


def memberships(project: Project) -> dict[str, list[str]]:
    """Each group of the project and its runs' names, in the state database's order. Read from the runs'
    ``experiment.json`` (just the ``group`` field, for speed); a run whose file is unreadable belongs to no group
    here (``experiment list`` shows it on its own, as damaged)."""
    groups: dict[str, list[str]] = {}
    for record in project.store.experiments():
        try:
            spec = json.loads((project.experiment_folder(record.name) / "experiment.json").read_bytes())
        except (OSError, ValueError, RecursionError, SpecError):
            continue
        group = spec.get("group") if isinstance(spec, dict) else None
        if isinstance(group, str):
            groups.setdefault(group, []).append(record.name)
    return groups


def resolve(project: Project, names: Sequence[str]) -> list[Experiment | Group]:
    """What each of ``names`` stands for: an experiment, else a group. An unknown name is the error
    ``Experiment.load`` gives, with the project's groups added to its hint."""
    groups = memberships(project)
    found: list[Experiment | Group] = []
    for name in names:
        if project.store.experiment(name) is not None or name not in groups:
            try:
                found.append(Experiment.load(project, name))
            except ClientError as error:
                known = _known_groups(project, name, groups) if project.store.experiment(name) is None else ""
                raise ClientError(error.message, hint=" ".join(filter(None, (error.hint, known)))) from None
        else:
            found.append(Group(project, name, _by_seed([Experiment.load(project, run) for run in groups[name]])))
    return found


def new_group(
    project: Project,
    name: str | None,
    seeds: Sequence[int],
    *,
    file: str | None = None,
    overrides: Sequence[Override] = (),
    **fields: Any,
) -> Group:
    """Create the group ``name``: one run per seed, ``NAME-s<seed>``, each with that ``seed`` and ``group: NAME``,
    from an experiment file and/or fields (as ``Experiment``) and ``--set`` overrides (applied to each). Every run
    is validated and its name checked before the first is written, and a failure while writing removes those
    written: all the runs or none."""
    base = Experiment(project, file=file, **{key: value for key, value in fields.items() if key != "name"})
    name = _check_request(name if name is not None else base.raw.get("name"), seeds, fields, overrides)
    raw = apply_to_experiment(project, base.raw, overrides) if overrides else dict(base.raw)
    runs = [Experiment(project, **{**raw, "name": run_name(name, seed), "seed": seed, "group": name}) for seed in seeds]
    runs[0].validate()  # the environment and the agent are built once: the runs differ only in their seeds
    for run in runs[1:]:
        run.spec = resolve_experiment(project, run.raw, build=False)
    _check_names_are_free(project, name, runs)
    created: list[Experiment] = []
    try:
        for run in runs:
            run.generate_locally()
            created.append(run)
    except BaseException:
        for run in reversed(created):
            run.delete()
        raise
    return Group(project, name, runs)


def _check_request(name: Any, seeds: Sequence[int], fields: dict[str, Any], overrides: Sequence[Override]) -> str:
    """The group's name, once it, the seeds and the fields it is asked with are known to make a group."""
    if name is None:
        raise SpecError(
            "experiment.name", "a group needs a name", hint="Give -n/--name NAME: its runs are NAME-s0, NAME-s1, ..."
        )
    if not seeds:
        raise SpecError("experiment.seed", "a group needs seeds", expected=SEEDS_RULE)
    for seed in seeds:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise SpecError("experiment.seed", "not a seed", got=seed, expected="a whole number >= 0")
    longest = LONGEST_NAME - len(run_name("", max(seeds)))
    why = f"its runs are named NAME-s<seed>, and '{run_name(str(name), max(seeds))}' is over {LONGEST_NAME} characters"
    check_name(name, what="group name", longest=longest, why=why)
    for field in PER_RUN:
        if fields.get(field) is not None and field != "name":
            raise SpecError(
                f"experiment.{field}",
                f"each run of a group gets its {field} from --seeds",
                got=fields[field],
                hint=f"Drop --{field}.",
            )
    for override in overrides:
        if override.steps[0] in PER_RUN:
            raise SpecError(
                f"experiment.{override.steps[0]}",
                f"each run of a group gets its {override.steps[0]} from --seeds and --name",
                hint=f"Drop --set {override.text}.",
            )
    return name


def _check_names_are_free(project: Project, name: str, runs: list[Experiment]) -> None:
    """No experiment of the group's name (``-e NAME`` would be ambiguous), no group of it already, and none of its
    runs' names taken."""
    store = project.store
    if store.experiment(name) is not None or project.experiment_folder(name).exists():
        raise ClientError(
            f"'{name}' is an experiment's name already; a group of that name would be ambiguous",
            hint="Pick another name for the group.",
        )
    existing = memberships(project).get(name)
    if existing:
        raise ClientError(
            f"group '{name}' already exists ({', '.join(existing)})",
            hint=f"Pick another name, or delete its runs first ('tfcli experiment delete -e {existing[0]}', ...).",
        )
    for run in runs:
        if store.experiment(run.name) is not None or run.folder.exists():
            raise ClientError(
                f"experiment '{run.name}' already exists; group '{name}' needs that name for its seed "
                f"{run.raw['seed']}",
                hint="Pick another name for the group, or other seeds.",
            )


def _by_seed(runs: list[Experiment]) -> list[Experiment]:
    """``runs`` in the order of their seeds (those without one last; those whose spec is damaged first)."""

    def seed(run: Experiment) -> tuple[bool, int]:
        if run.spec is None:
            return False, -1
        return run.spec.get("seed") is None, run.spec.get("seed") or 0

    return sorted(runs, key=seed)


def _known_groups(project: Project, name: str, groups: dict[str, list[str]] | None = None) -> str:
    """A hint naming the project's groups (the closest first), or "" when it has none."""
    names = sorted(groups if groups is not None else memberships(project))
    if not names:
        return ""
    guess = did_you_mean(name, names)
    return (f"Did you mean the group '{guess}'? " if guess else "") + "Groups: " + ", ".join(names) + "."
