"""The sweep file: a hyperparameter search over one experiment, its fields, defaults, and the complete validation
that runs before ``tfcli sweep new`` writes anything.

A sweep file (JSON or YAML) says::

    name: lr-search                     # the trials' runs are experiments named lr-search-t003-s0, ...
    base: {file: cartpole_ppo, total_timesteps: 50000}   # or just "cartpole_ppo", or every field inline
    space:                              # the keys of 'tfcli experiment new --set' (torchforce/client/overrides.py)
      agent.step_optimizer.learning_rate: {low: 1.0e-5, high: 1.0e-2, log: true}
      agent.epochs: {low: 2, high: 10, type: int}
      agent.network: {choices: [[{type: dense, size: 32}], [{type: dense, size: 64}]]}
    metric: {name: mean_return, window: 100, direction: maximize}   # or name: evaluation
    budget: {trials: 20, parallel: 2}
    seeds_per_trial: 2
    sampler: tpe                        # or random; or {type: tpe, seed: 0, startup_trials: 10}
    pruner: median                      # or none; or {type: median, startup_trials: 5, warmup: 30}
    cluster: ray_local                  # optional: a Ray cluster of the project (not GKE); default this machine

``resolve_sweep`` turns one into a ``SweepSpec``, whose ``to_dict`` is the stored form: the same fields with every
default filled in and the base experiment resolved inline (configs loaded), so a sweep keeps running what it was
created with when config files change later. The stored form is itself a valid sweep file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchforce.client.experiment_file import LONGEST_NAME, NAME_PATTERN, check_name, resolve_experiment
from torchforce.client.overrides import Override
from torchforce.client.project import CONFIG_SUFFIXES, Project
from torchforce.client.sweep_space import CONTROLLED, Dimension, parse_space
from torchforce.configs import folder
from torchforce.spec import SpecError, did_you_mean, expect_choice, expect_dict, expect_int, load_file
from torchforce.spec.checks import expect_keys
from torchforce.spec.device import missing_gpu
from torchforce.spec.errors import describe
from torchforce.spec.options import MAX_SEED

FIELDS = ("name", "description", "base", "space", "metric", "budget", "seeds_per_trial", "sampler", "pruner", "cluster")
METRICS = ("mean_return", "evaluation")
DIRECTIONS = ("maximize", "minimize")
SAMPLERS = ("tpe", "random")
PRUNERS = ("median", "none")
MAX_TRIALS = 5000  # trial numbers stay within four digits, with room for trials run again after an interruption
MAX_SEEDS = 10
# A run is named <sweep>-t<trial>-s<seed>, and must pass check_name (at most 40 characters).
MAX_NAME = LONGEST_NAME - len("-t9999-s9")
DEFAULT_WINDOW = 100
DEFAULT_TPE_STARTUP = 10  # optuna's default: random trials before TPE models the results
DEFAULT_PRUNER_STARTUP = 5  # completed trials before any trial is pruned
DEFAULT_WARMUP = 30  # percent of a run's budget before it may be pruned (early returns say little)
REPORT_PERCENTS = tuple(range(10, 100, 10))  # intermediate values: every 10% of a run's budget
MAX_SAMPLER_SEED = 2**31 - 1  # far below numpy's 2**32 - 1, with room for the trials added to it (Sampler.build)


@dataclass(frozen=True)
class Metric:
    """What a trial is judged by: ``mean_return``, the mean return of a run's last ``window`` episodes at its end,
    or ``evaluation``, the mean return of its last periodic evaluation; averaged over the trial's seeds."""

    name: str = "mean_return"
    window: int = DEFAULT_WINDOW
    direction: str = "maximize"

    def to_dict(self) -> dict[str, Any]:
        values: dict[str, Any] = {"name": self.name, "direction": self.direction}
        return values | ({"window": self.window} if self.name == "mean_return" else {})


@dataclass(frozen=True)
class Sampler:
    kind: str = "tpe"
    seed: int = 0
    startup_trials: int = DEFAULT_TPE_STARTUP

    def build(self, trials_so_far: int = 0) -> Any:
        """The sampler of a study that holds ``trials_so_far`` trials: seeded with ``seed`` plus that count, so that
        a driver started again (after ``sweep stop``, a crash) draws on where the last one stopped, not the first
        trials' values again; an uninterrupted sweep draws as one seeded with ``seed``. The sum is taken modulo
        2**32, the seeds numpy takes (a sweep made before MAX_SAMPLER_SEED may have a seed near 2**32)."""
        import optuna

        seed = (self.seed + trials_so_far) % 2**32
        if self.kind == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=self.startup_trials)

    def to_dict(self) -> dict[str, Any]:
        values: dict[str, Any] = {"type": self.kind, "seed": self.seed}
        return values | ({"startup_trials": self.startup_trials} if self.kind == "tpe" else {})


@dataclass(frozen=True)
class Pruner:
    """``median``: a trial whose best intermediate value so far is worse than the median of the completed trials'
    at the same point of their runs ends early, once ``startup_trials`` trials have completed and its runs are
    ``warmup`` percent through their budget."""

    kind: str = "median"
    startup_trials: int = DEFAULT_PRUNER_STARTUP
    warmup: int = DEFAULT_WARMUP

    def build(self) -> Any:
        import optuna

        if self.kind == "none":
            return optuna.pruners.NopPruner()
        return optuna.pruners.MedianPruner(n_startup_trials=self.startup_trials, n_warmup_steps=self.warmup)

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "none":
            return {"type": self.kind}
        return {"type": self.kind, "startup_trials": self.startup_trials, "warmup": self.warmup}


@dataclass(frozen=True)
class SweepSpec:
    """A checked sweep: ``base`` is the resolved experiment every trial's runs start from (without name, group
    and seed's role: see CONTROLLED)."""

    name: str
    base: dict[str, Any]
    space: tuple[Dimension, ...]
    description: str = ""
    metric: Metric = field(default_factory=Metric)
    trials: int = 20
    parallel: int = 1
    seeds_per_trial: int = 1
    sampler: Sampler = field(default_factory=Sampler)
    pruner: Pruner = field(default_factory=Pruner)
    cluster: str | None = None

    @property
    def base_seed(self) -> int:
        return int(self.base.get("seed") or 0)

    def group(self, trial: int) -> str:
        """The group of trial number ``trial``'s runs: ``<sweep>-t003``."""
        return f"{self.name}-t{trial:03d}"

    def run_names(self, trial: int) -> list[str]:
        """The experiments of trial number ``trial``, one per seed: ``<sweep>-t003-s0``, ..."""
        return [f"{self.group(trial)}-s{index}" for index in range(self.seeds_per_trial)]

    def values(self, params: dict[str, Any]) -> dict[str, Any]:
        """A trial's parameters (as optuna holds them) as the values they put into its experiments."""
        dimensions = {dimension.key: dimension for dimension in self.space}
        return {key: dimensions[key].value(param) if key in dimensions else param for key, param in params.items()}

    def run_raw(self, trial: int, index: int, values: dict[str, Any]) -> tuple[dict[str, Any], list[Override]]:
        """The raw spec of trial ``trial``'s run of seed ``index`` and the overrides that set its ``values`` (to
        apply with ``overrides.apply_to_experiment``)."""
        raw = {
            **self.base,
            "name": self.run_names(trial)[index],
            "group": self.group(trial),
            "seed": self.base_seed + index,
        }
        dimensions = {dimension.key: dimension for dimension in self.space}
        return raw, [dimensions[key].override(value) for key, value in values.items()]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "base": self.base,
            "space": {dimension.key: dimension.to_dict() for dimension in self.space},
            "metric": self.metric.to_dict(),
            "budget": {"trials": self.trials, "parallel": self.parallel},
            "seeds_per_trial": self.seeds_per_trial,
            "sampler": self.sampler.to_dict(),
            "pruner": self.pruner.to_dict(),
            "cluster": self.cluster,
        }


def is_trial_name(sweep: str, name: str) -> bool:
    """Whether the driver of sweep ``sweep`` could give ``name`` to one of its trials' groups (``<sweep>-t003``)
    or runs (``<sweep>-t003-s0``): names that are the sweep's for as long as it exists."""
    return re.fullmatch(rf"{re.escape(sweep)}-t\d{{3,}}(-s\d+)?", name) is not None


# ---------------------------------------------------------------------------------------------- finding the file


def shipped_sweeps() -> Path:
    """The example sweep files torchforce ships (``torchforce/configs/sweeps/``)."""
    return folder("sweeps")


def find_sweep_file(project: Project, value: str) -> Path:
    """The sweep file ``value`` names: a path, else a name in the project's ``configs/sweeps/`` (``.json``,
    ``.yaml`` or ``.yml``), else one of the shipped examples."""
    path = "sweep.file"
    try:
        return project.find_config(value, "sweeps", path)
    except SpecError as error:
        if Path(value).suffix in CONFIG_SUFFIXES or len(Path(value).parts) != 1:
            raise  # a path: its own error says where it was looked for
        not_found = error
    for place in (project.root / "configs" / "sweeps", shipped_sweeps()):
        for suffix in CONFIG_SUFFIXES:
            if (place / f"{value}{suffix}").is_file():
                return place / f"{value}{suffix}"
    own = project.config_names("sweeps")
    shipped = sorted({p.stem for p in shipped_sweeps().glob("*") if p.suffix in CONFIG_SUFFIXES} - set(own))
    guess = did_you_mean(value, own + shipped)
    raise SpecError(
        path,
        f"no sweep file named '{value}'",
        expected=not_found.expected,
        hint=" ".join(
            [f"In configs/sweeps/: {', '.join(own)}." if own else "configs/sweeps/ has none."]
            + ([f"Shipped examples: {', '.join(shipped)}."] if shipped else [])
            + ([f"Did you mean '{guess}'?"] if guess else [])
        ),
    )


def load_sweep_file(project: Project, value: str) -> tuple[dict[str, Any], str]:
    """The sweep file's contents (an object) and its path as messages show it."""
    file = find_sweep_file(project, value)
    shown = str(file.relative_to(project.root)) if file.is_relative_to(project.root) else str(file)
    try:
        return dict(expect_dict(load_file(file), "sweep")), shown
    except SpecError as error:
        raise error.with_file(shown) from None


# ---------------------------------------------------------------------------------------------- validation


def resolve_sweep(
    project: Project, raw: Any, *, name: str | None = None, build: bool = True, file: str | None = None
) -> SweepSpec:
    """Check the sweep ``raw`` completely (``name`` replaces its name) and return it resolved; a SpecError names
    the place (``sweep.space.agent.epochs.low``) and ``file``. With ``build``, the experiment of the base and of
    every end of the space is built once (environment and agent), as ``tfcli experiment new`` does, so a trial
    does not fail later on a value its experiment refuses. A bad ``name`` (given with ``-n/--name``) is blamed
    on that flag, not on the file."""
    if name is not None:
        _sweep_name(name, "-n/--name")
    try:
        return _resolve(project, raw, name=name, build=build)
    except SpecError as error:
        raise error.with_file(file) if file else error from None


def _resolve(project: Project, raw: Any, *, name: str | None, build: bool) -> SweepSpec:
    raw = expect_keys(raw, "sweep", FIELDS)
    sweep_name = _sweep_name(name if name is not None else raw.get("name"))
    description = raw.get("description") or ""
    if not isinstance(description, str):
        raise SpecError("sweep.description", "not a string", got=description, expected="a line of text")
    base = _base(project, raw.get("base"), sweep_name)
    space = parse_space(raw.get("space"))
    trials, parallel = _budget(raw.get("budget"))
    spec = SweepSpec(
        name=sweep_name,
        base=base,
        space=space,
        description=description,
        metric=_metric(raw.get("metric")),
        trials=trials,
        parallel=parallel,
        seeds_per_trial=expect_int(
            raw.get("seeds_per_trial", 1), "sweep.seeds_per_trial", minimum=1, maximum=MAX_SEEDS
        ),
        sampler=_sampler(raw.get("sampler"), new=build),
        pruner=_pruner(raw.get("pruner")),
        cluster=_cluster(project, raw.get("cluster"), exists=build),
    )
    if spec.metric.name == "evaluation" and base.get("evaluation") is None:
        raise SpecError(
            "sweep.metric.name",
            "the base experiment has no periodic evaluation to take the metric from",
            got="evaluation",
            hint="Give the base an 'evaluation' ({frequency: 10000t, episodes: 10}), or use the metric mean_return.",
        )
    last_seed = spec.base_seed + spec.seeds_per_trial - 1
    if last_seed > MAX_SEED:  # the base's seed is checked, the others' only as each trial starts
        raise SpecError(
            "sweep.base.seed",
            f"too near the top of the seeds' range: a trial's runs are seeded {spec.base_seed} to {last_seed}, and "
            f"an experiment's seed is at most {MAX_SEED}",
            got=spec.base_seed,
            expected=f"at most {MAX_SEED - spec.seeds_per_trial + 1} with {spec.seeds_per_trial} seeds per trial",
        )
    if build and spec.cluster is None:
        _check_runs_here(spec)
    _check_trial_experiments(project, spec, build=build)
    return spec


def _check_runs_here(spec: SweepSpec) -> None:
    """Trials on this machine of an agent on "cuda" need CUDA here: each would be refused at its start."""
    agent = spec.base.get("agent")
    device = agent.get("device") if isinstance(agent, dict) else None
    if missing_gpu(device):
        raise SpecError(
            "sweep.base.agent.device",
            "the trials run on this machine (the sweep names no cluster), and it has no CUDA",
            got=device,
            hint='Name a cluster with GPUs (cluster), or use "auto": a GPU where there is one, else the CPU.',
        )


def _sweep_name(name: Any, path: str = "sweep.name") -> str:
    if name is None:
        raise SpecError(path, "a sweep needs a name", hint="Give 'name' in the file, or -n/--name NAME.")
    why = f"its runs are named {name}-t000-s0 and so on, and an experiment's name has at most {LONGEST_NAME} characters"
    return check_name(name, path, what="sweep name", longest=MAX_NAME, why=why)


def _base(project: Project, value: Any, sweep: str) -> dict[str, Any]:
    """The base experiment resolved inline: a file or a name in configs/experiments/, or an object of experiment
    fields with an optional ``file`` they are laid over (as ``tfcli experiment new -f FILE`` plus flags)."""
    from torchforce.client.experiment import Experiment

    path = "sweep.base"
    if value is None:
        raise SpecError(
            path, "a sweep needs a base experiment", expected="a file or a name in configs/experiments/, or an object"
        )
    fields = {"file": value} if isinstance(value, str) else dict(expect_dict(value, path))
    for key in fields:
        if not isinstance(key, str):
            raise SpecError(path, "an experiment field that is not a name", got=key, expected="a field name")
        if key in CONTROLLED and key != "seed":
            raise SpecError(f"{path}.{key}", "set by the sweep, not by its base", hint=f"Drop it. {CONTROLLED[key]}")
    try:
        experiment = Experiment(project, **fields)
    except SpecError as error:
        raise _rooted(error, path) from None
    written = set(fields) - {"file"}
    file = str(Path(experiment.file).relative_to(project.root)) if experiment.file else None
    dropped = ("name", "group", "created_at", "torchforce_version")
    raw = {key: v for key, v in experiment.raw.items() if key not in dropped}
    try:
        resolved = resolve_experiment(project, {**raw, "name": f"{sweep}-t000-s0"}, build=False)
    except SpecError as error:
        head = error.path.removeprefix("experiment.").split(".")[0].split("[")[0]
        raise _rooted(error, path, file=file if head not in written else None) from None
    return {key: v for key, v in resolved.items() if key not in ("name", "group")}


def _rooted(error: SpecError, prefix: str, *, file: str | None = None, hint: str | None = None) -> SpecError:
    """``error`` (about ``experiment...``) placed under ``prefix`` (``sweep.base.agent...``)."""
    path = error.path
    if path == "experiment" or path.startswith(("experiment.", "experiment[")):
        path = prefix + path.removeprefix("experiment")
    elif not path:
        path = prefix
    hint = " ".join(part for part in (error.hint, hint) if part) or None
    return SpecError(path, error.message, got=error.got, expected=error.expected, hint=hint, file=error.file or file)


def _metric(value: Any) -> Metric:
    path = "sweep.metric"
    if value is None:
        return Metric()
    metric = {"name": value} if isinstance(value, str) else expect_keys(value, path, ("name", "window", "direction"))
    name = expect_choice(metric.get("name", "mean_return"), f"{path}.name", METRICS)
    if name == "evaluation" and "window" in metric:
        raise SpecError(
            f"{path}.window",
            "the evaluation metric is the last evaluation's mean return: it has no window",
            hint="Drop window, or use the metric mean_return.",
        )
    window = expect_int(metric.get("window", DEFAULT_WINDOW), f"{path}.window", minimum=1)
    return Metric(name, window, expect_choice(metric.get("direction", "maximize"), f"{path}.direction", DIRECTIONS))


def _budget(value: Any) -> tuple[int, int]:
    path = "sweep.budget"
    if value is None:
        raise SpecError(path, "a sweep needs a budget", expected="{trials: N} (and parallel: P, default 1)")
    budget = expect_keys(value, path, ("trials", "parallel"))
    if "trials" not in budget:
        raise SpecError(f"{path}.trials", "the number of trials to run is missing", expected="a whole number >= 1")
    trials = expect_int(budget["trials"], f"{path}.trials", minimum=1, maximum=MAX_TRIALS)
    return trials, expect_int(budget.get("parallel", 1), f"{path}.parallel", minimum=1)


def _sampler(value: Any, *, new: bool) -> Sampler:
    """The sampler; with ``new``, a seed of at most MAX_SAMPLER_SEED (a stored sweep made before that cap keeps its
    seed: ``Sampler.build`` wraps it)."""
    path = "sweep.sampler"
    if value is None:
        return Sampler()
    sampler = (
        {"type": value} if isinstance(value, str) else expect_keys(value, path, ("type", "seed", "startup_trials"))
    )
    kind = expect_choice(sampler.get("type", "tpe"), f"{path}.type", SAMPLERS)
    if kind == "random" and "startup_trials" in sampler:
        raise SpecError(f"{path}.startup_trials", "the random sampler has no startup trials: every trial is random")
    return Sampler(
        kind,
        expect_int(sampler.get("seed", 0), f"{path}.seed", minimum=0, maximum=MAX_SAMPLER_SEED if new else None),
        expect_int(sampler.get("startup_trials", DEFAULT_TPE_STARTUP), f"{path}.startup_trials", minimum=0),
    )


def _pruner(value: Any) -> Pruner:
    path = "sweep.pruner"
    if value is None:
        return Pruner()
    keys = ("type", "startup_trials", "warmup")
    pruner = {"type": value} if isinstance(value, str) else expect_keys(value, path, keys)
    kind = expect_choice(pruner.get("type", "median"), f"{path}.type", PRUNERS)
    if kind == "none" and len(pruner) > 1:
        extra = next(key for key in pruner if key != "type")
        raise SpecError(f"{path}.{extra}", "the pruner 'none' takes no settings")
    return Pruner(
        kind,
        expect_int(pruner.get("startup_trials", DEFAULT_PRUNER_STARTUP), f"{path}.startup_trials", minimum=0),
        expect_int(pruner.get("warmup", DEFAULT_WARMUP), f"{path}.warmup", minimum=0, maximum=90),
    )


def _cluster(project: Project, value: Any, *, exists: bool) -> str | None:
    """A cluster of the project the trials run on (None, or "local": this machine); with ``exists``, one the
    project has, and not a GKE cluster (see ``check_not_gke``). A stored sweep whose cluster went keeps its name:
    its next trial's start says so."""
    from torchforce.client import ray_cluster
    from torchforce.client.errors import ClientError

    if value is None or value == "local":
        return None
    path = "sweep.cluster"
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
        raise SpecError(path, "not a cluster name", got=value, expected="the name of a cluster of the project")
    if exists:
        check_not_gke(project, value)  # (first: a GKE spec not created yet is refused as GKE, not as missing)
        try:
            ray_cluster.find(project, value)
        except ClientError as error:
            raise SpecError(path, error.message, got=value, hint=error.hint) from None
    return value


def check_not_gke(project: Project, cluster: str) -> None:
    """Refuse a GKE cluster for a sweep's trials (one the project made, or a GKE spec of configs/clusters/ not made
    yet): the driver reads their episode logs on this machine, and a run on GKE writes them to its bucket, so every
    trial would fail without a value and the pruner would never act. A Ray cluster's runs write where this machine
    reads them."""
    record = project.store.cluster(cluster)
    if record is not None:
        kind = record.spec.get("type")
    else:  # not created: the kind its spec in configs/clusters/ says, if it has one
        try:
            values = project.load_config(cluster, "clusters", "sweep.cluster")[0]
        except SpecError:
            values = None
        kind = values.get("type", "gke") if isinstance(values, dict) else None
    if kind == "gke":  # as Experiment._target tells the backends apart
        raise SpecError(
            "sweep.cluster",
            "a GKE cluster: a sweep reads its trials' episodes on this machine, so it runs here or on a Ray cluster, "
            "not on GKE (yet)",
            got=cluster,
            expected="a Ray cluster of the project, or none (this machine)",
            hint="Drop cluster to run the trials here, or name a Ray cluster ('tfcli cluster list' shows them).",
        )


def _check_trial_experiments(project: Project, spec: SweepSpec, *, build: bool) -> None:
    """Every end of the space in the base experiment, checked as ``tfcli experiment new`` checks an experiment
    (built once where ``build``): the first point sets every key to its low end or first choice, the second to its
    high end or last choice, then each other choice in turn."""
    from torchforce.client.overrides import apply_to_experiment

    first = {d.key: d.ends()[0] for d in spec.space}
    points = [first, {d.key: d.ends()[-1] for d in spec.space}]
    points += [{**first, d.key: end} for d in spec.space for end in d.ends()[1:-1]]
    points += [{**first, d.key: inside} for d in spec.space if (inside := d.inside()) is not None]
    if not build:
        points = points[:1]
    checked: set[str] = set()
    for point in points:
        text = json.dumps({key: value for key, (_, value) in point.items()}, sort_keys=True)
        if text in checked:
            continue
        checked.add(text)
        raw, overrides = spec.run_raw(0, 0, {key: value for key, (_, value) in point.items()})
        try:
            resolve_experiment(project, apply_to_experiment(project, raw, overrides), build=build)
        except SpecError as error:
            raise _blame_the_space(error, point) from None


def _blame_the_space(error: SpecError, point: dict[str, tuple[str, Any]]) -> SpecError:
    """An error of a trial's experiment, placed at the space's key it is about (``sweep.space.KEY.low``), else
    under ``sweep.base`` with the point it showed up at."""
    for key, (place, value) in point.items():
        inside = f"experiment.{key}"
        if (
            error.path == inside
            or error.path.startswith((f"{inside}.", f"{inside}["))
            or inside.startswith((f"{error.path}.", f"{error.path}["))
        ):
            where = error.path.removeprefix(inside)
            hint = error.hint or f"A trial's experiment refuses {key} = {describe(value)}."
            if place == "type":  # a value inside a float range
                hint = (
                    f"The range is of floats, and a trial's experiment refuses {key} = {describe(value)} from inside "
                    "it; add type: int for a range of integers."
                )
            return SpecError(
                f"sweep.space.{key}.{place}",
                (f"{where.lstrip('.')}: " if where else "") + error.message,
                got=error.got if error.got is not ... else value,
                expected=error.expected,
                hint=hint,
                file=error.file,
            )
    shown = ", ".join(f"{key}={describe(value)}" for key, (_, value) in point.items())
    return _rooted(error, "sweep.base", hint=f"It showed up with the space's values {shown}.")


__all__ = [
    "Dimension",
    "Metric",
    "Pruner",
    "REPORT_PERCENTS",
    "Sampler",
    "SweepSpec",
    "check_not_gke",
    "find_sweep_file",
    "load_sweep_file",
    "resolve_sweep",
]
