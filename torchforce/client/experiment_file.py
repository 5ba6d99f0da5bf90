"""The experiment file: its fields, defaults, and the complete validation that runs before anything is written.

An experiment file is the 2018 format (docs/tensorforce-0.4.md, Experiment files; the 2018 example is
``configs/experiments/simple_a3c.json``) plus a few fields of ours (``seed``, ``num_environments``,
``vectorization``, ``torch_threads``, ``worker_timeout``, ...). ``resolve_experiment`` turns one (from a file, flags,
or both) into the fully resolved form stored as ``experiments/<name>/experiment.json``: configs inline, defaults
filled in, frequencies normalised, and ``sources`` saying which config file each part came from.
"""

from __future__ import annotations

import math
import numbers
import re
import tempfile
from pathlib import Path
from typing import Any

from torchforce.client import warm_start
from torchforce.client.experiment_build import CONFIG_KINDS, check_buildable, prefixed
from torchforce.client.experiment_warnings import warn_of_the_unlikely
from torchforce.client.monitor import in_scratch
from torchforce.client.project import Project, current_folder
from torchforce.spec import (
    SpecError,
    did_you_mean,
    expect_bool,
    expect_choice,
    expect_dict,
    expect_int,
    load_file,
    parse_frequency,
    warn_spec,
)
from torchforce.spec.checks import expect_keys
from torchforce.spec.errors import describe
from torchforce.spec.options import SEED

# A name is a folder name and, with "_" as "-", the start of Kubernetes names (Jobs and Services "NAME-worker-0"):
# Services need a DNS-1035 label, so a letter first; 40 characters leave room for the suffixes within 63.
NAME_PATTERN = re.compile(r"[a-z]([a-z0-9_-]{0,38}[a-z0-9])?")
LONGEST_NAME = 40


def name_rule(longest: int = LONGEST_NAME) -> str:
    """What a name may be, for an error's "expected": a sweep's or a group's name is shorter than an experiment's,
    since its runs' names add to it."""
    return (
        f"1-{longest} lower-case letters, digits, '-' or '_', starting with a letter and ending with a letter or digit"
    )


NAME_RULE = name_rule()
# Device names that Windows will not accept as folder names.
RESERVED_NAMES = frozenset({"con", "prn", "aux", "nul", *(f"{port}{i}" for port in ("com", "lpt") for i in range(10))})
RUN_MODES = ("single", "multi-threaded", "distributed")
VECTORIZATION = ("sync", "subprocess")
LEGACY_RUN_MODES = {"multi_threaded": "multi-threaded", "threaded": "multi-threaded"}
MAX_THREADS = 256  # torch_threads at most: more than any machine a run gets has cores

# Field -> default. ``None`` for episodes means "no episode limit" (2018's 10000 stopped long runs early).
DEFAULTS: dict[str, Any] = {
    "description": "",
    "environment": None,
    "agent": None,
    "network": None,
    "cluster": None,
    "episodes": None,
    "total_timesteps": 1_000_000,
    "max_timesteps_per_episode": None,
    "deterministic": False,
    "repeat_actions": 1,
    "debug_logging": False,
    "run_mode": "single",
    "num_workers": 1,
    "num_parameter_servers": 0,
    "num_environments": 1,
    "vectorization": "sync",
    # intra-op torch threads of whatever runs the agent: the worker process, each worker thread, each Ray worker
    "torch_threads": 1,
    # seconds a distributed run's Ray worker may take over a chunk of steps before it counts as hung and is killed and
    # restarted (DistributedRunner's WORKER_TIMEOUT); null waits for ever
    "worker_timeout": 600.0,
    "saver_frequency": None,  # "600s" distributed, "100e" otherwise (2018)
    "summary_frequency": None,  # "120s" distributed, "1000t" otherwise
    "seed": 0,
    "evaluation": None,  # {"frequency": "10000t", "episodes": 10, "environment": null}: evaluation during training
    "mlflow": None,  # {"tracking_uri": "file:///.../mlruns", "experiment": NAME}: the run mirrored into MLflow
    "group": None,  # the group this run belongs to (seeds of one setup, trials of a sweep): a name as check_name says
    # {"experiment": NAME, "checkpoint": "latest"|"best"|STEP, "timesteps": N}: a new run begins from that checkpoint's
    # networks and statistics (torchforce/client/warm_start.py)
    "warm_start": None,
}
NULL_MEANS_SOMETHING = {"worker_timeout"}  # fields whose null says something (no timeout), not "the default"
EVALUATION_KEYS = ("frequency", "episodes", "environment")
MLFLOW_KEYS = ("tracking_uri", "experiment")
ACCEPTED = {"type", "name", "timesteps", "sources", "created_at", "torchforce_version", *DEFAULTS}


def check_name(
    name: Any,
    path: str = "experiment.name",
    *,
    what: str = "experiment name",
    longest: int = LONGEST_NAME,
    why: str | None = None,
) -> str:
    """Experiment names become folder names and (with ``_`` as ``-``) Kubernetes resource names; a group's or a
    sweep's name (``what``) follows the same rule, at most ``longest`` characters since its runs are named after it
    (``why`` says how, in the error for a name that is longer)."""
    if isinstance(name, str) and name in RESERVED_NAMES:
        raise SpecError(
            path, f"not a valid {what}: Windows reserves it for a device", got=name, hint=f"Try '{name}-1'."
        )
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        suggestion = re.sub(r"[^a-z0-9_-]+", "-", str(name).lower()).strip("-_")[:longest].strip("-_")
        if suggestion and not suggestion[0].isalpha():
            suggestion = f"exp-{suggestion}"[:longest].strip("-_")
        hint = f"Try '{suggestion}'." if NAME_PATTERN.fullmatch(suggestion) and suggestion != name else None
        raise SpecError(path, f"not a valid {what}", got=name, expected=name_rule(longest), hint=hint)
    if len(name) > longest:
        reason = f"too long for a {what.removesuffix(' name')}" + (f": {why}" if why else "")
        raise SpecError(path, reason, got=name, expected=f"at most {longest} characters")
    return name


def _check_keys(raw: dict[str, Any]) -> None:
    for key in raw:
        if key not in ACCEPTED:
            guess = did_you_mean(key, sorted(ACCEPTED - {"sources", "created_at", "torchforce_version"}))
            raise SpecError(
                f"experiment.{key}",
                "unknown experiment field",
                hint=f"Did you mean '{guess}'?" if guess else "Known: " + ", ".join(sorted({"name", *DEFAULTS})) + ".",
            )
    if raw.get("type", "experiment") != "experiment":
        raise SpecError("experiment.type", "not an experiment spec", got=raw.get("type"), expected='"experiment"')
    for key in ("description", "created_at", "torchforce_version"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise SpecError(f"experiment.{key}", "not a string", got=raw[key], expected="a line of text")
    sources = raw.get("sources")
    if sources is not None and not (
        isinstance(sources, dict)
        and all(key in CONFIG_KINDS and (value is None or isinstance(value, str)) for key, value in sources.items())
    ):
        raise SpecError(
            "experiment.sources",
            "not the files the configs came from",
            got=sources,
            expected="an object of " + ", ".join(CONFIG_KINDS) + " to a file name or null",
        )


def _positive_or_none(value: Any, path: str) -> int | None:
    if value is None:
        return None
    return expect_int(value, path, minimum=1)


def _seconds_or_none(value: Any, path: str) -> float | None:
    """A number of seconds > 0, or None for no limit."""
    expected = "a number of seconds > 0, or null to wait for ever"
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
        raise SpecError(path, "not a number of seconds", got=value, expected=expected)
    if not 0 < float(value) < math.inf:
        raise SpecError(path, "out of range", got=value, expected=expected)
    return float(value)


def resolve_experiment(project: Project, raw: dict[str, Any], *, build: bool = True) -> dict[str, Any]:
    """Validate ``raw`` completely and return the resolved experiment; raises SpecError naming the field.

    With ``build`` the environment and the agent (with its network) are really constructed once, so a spec that
    would fail in the worker fails here instead.
    """
    raw = _renamed_timesteps(dict(expect_dict(raw, "experiment")))
    spec: dict[str, Any] = {"type": "experiment", "name": check_name(raw.get("name"))}
    for key, default in DEFAULTS.items():
        given = raw.get(key)
        spec[key] = given if given is not None or (key in raw and key in NULL_MEANS_SOMETHING) else default
    spec["description"] = spec["description"] or ""
    sources = _load_configs(project, spec)
    _run_mode_from_execution(spec, explicit=raw.get("run_mode") is not None)
    _check_budget(spec)
    _check_run(spec)
    warm_start.check_form(spec)
    _check_frequencies(spec)
    _check_evaluation(project, spec)
    _check_mlflow(project, spec, build=build)
    if spec["cluster"] is not None:
        from torchforce.client.cluster import cluster_from_spec

        cluster = expect_dict(spec["cluster"], "experiment.cluster")
        spec["cluster"] = prefixed("cluster", sources, lambda: cluster_from_spec(cluster).spec())
    spec["sources"] = sources
    if build:
        from torchforce.client.modules import modules_folder, use_modules

        use_modules(modules_folder(project.root))  # the one place user classes come from (as in the worker)
        _check_run_mode_uses(spec)
        check_buildable(spec, project)
        _check_evaluation_environment(spec)
        warn_of_the_unlikely(spec)
    return spec


def _renamed_timesteps(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` with its keys checked and the 2018 ``timesteps`` (which the example files say, while the 2018
    class read ``total_timesteps``) as ``total_timesteps``."""
    _check_keys(raw)
    if "timesteps" not in raw:
        return raw
    if raw.get("total_timesteps") is not None and raw["total_timesteps"] != raw["timesteps"]:
        raise SpecError(
            "experiment.timesteps",
            f"the 2018 name of total_timesteps, given together with a different total_timesteps "
            f"({describe(raw['total_timesteps'])})",
            got=raw["timesteps"],
            hint="Give one of them.",
        )
    raw["total_timesteps"] = raw.pop("timesteps")
    if raw["total_timesteps"] is not None:  # an error in it names the field as written
        expect_int(raw["total_timesteps"], "experiment.timesteps", minimum=1)
    return raw


def _load_configs(project: Project, spec: dict[str, Any]) -> dict[str, str | None]:
    """Replace config names in ``spec`` by their contents; returns which file each came from (None: inline)."""
    sources: dict[str, str | None] = {}
    for key, kind in CONFIG_KINDS.items():
        if key == "environment" and isinstance(spec[key], str):
            spec[key], sources[key] = load_environment(project, spec[key])
        elif spec[key] is not None:
            spec[key], sources[key] = project.load_config(spec[key], kind, f"experiment.{key}")
    if spec["environment"] is None:
        raise SpecError(
            "experiment.environment",
            "an experiment needs an environment",
            hint="Give -E/--environment NAME (a config in configs/environments/, or a Gymnasium id such as "
            "CartPole-v1) or a file.",
        )
    if spec["agent"] is None:
        raise SpecError(
            "experiment.agent",
            "an experiment needs an agent",
            hint="Give -A/--agent NAME (a config in configs/agents/) or a file.",
        )
    checks = {"environment": _environment_spec, "agent": lambda value: expect_dict(value, "experiment.agent")}
    for key, check in checks.items():
        source = sources.get(key)
        try:
            spec[key] = check(spec[key])
        except SpecError as error:  # a config file that holds no object: the error names that file
            raise (error.with_file(source) if source else error) from None
    return sources


def _run_mode_from_execution(spec: dict[str, Any], *, explicit: bool) -> None:
    """A 2018 agent config's ``execution`` says how it runs: ``distributed`` (with a ``distributed_spec`` whose
    ``cluster_spec`` lists ``ps`` and ``worker`` hosts) or ``multi-threaded``. Unless the experiment says its own run
    mode, that one drives it (workers and parameter servers counted from the cluster spec); a contradicting run mode
    is an error. The host addresses themselves mean nothing here: Ray places the processes."""
    execution = spec["agent"].get("execution")
    if execution is None:
        return
    execution = expect_dict(execution, "experiment.agent.execution")
    kind = execution.get("type", "single")
    kind = LEGACY_RUN_MODES.get(kind, kind) if isinstance(kind, str) else kind
    kind = expect_choice(kind, "experiment.agent.execution.type", RUN_MODES)
    if explicit and kind != "single" and spec["run_mode"] != kind:
        raise SpecError(
            "experiment.run_mode",
            f"contradicts the agent config's execution type '{kind}'",
            got=spec["run_mode"],
            hint=f"Drop one of them (the agent's 'execution', or the experiment's run_mode '{spec['run_mode']}').",
        )
    if explicit or kind == "single":
        return
    spec["run_mode"] = kind
    hosts = (execution.get("distributed_spec") or {}).get("cluster_spec") or {}
    if kind == "distributed" and isinstance(hosts, dict):
        if isinstance(hosts.get("ps"), list) and hosts["ps"] and not spec["num_parameter_servers"]:
            spec["num_parameter_servers"] = len(hosts["ps"])
        if isinstance(hosts.get("worker"), list) and hosts["worker"] and spec["num_workers"] == 1:
            spec["num_workers"] = len(hosts["worker"])


def _check_budget(spec: dict[str, Any]) -> None:
    spec["episodes"] = _positive_or_none(spec["episodes"], "experiment.episodes")
    spec["total_timesteps"] = _positive_or_none(spec["total_timesteps"], "experiment.total_timesteps")
    if spec["episodes"] is None and spec["total_timesteps"] is None:
        raise SpecError(
            "experiment.total_timesteps",
            "an experiment needs an end",
            hint="Give total_timesteps (-t) or episodes (--episodes).",
        )
    spec["max_timesteps_per_episode"] = _positive_or_none(
        spec["max_timesteps_per_episode"], "experiment.max_timesteps_per_episode"
    )


def _check_run(spec: dict[str, Any]) -> None:
    spec["deterministic"] = expect_bool(spec["deterministic"], "experiment.deterministic")
    spec["debug_logging"] = expect_bool(spec["debug_logging"], "experiment.debug_logging")
    spec["repeat_actions"] = expect_int(spec["repeat_actions"], "experiment.repeat_actions", minimum=1)
    spec["run_mode"] = expect_choice(
        LEGACY_RUN_MODES.get(spec["run_mode"], spec["run_mode"])
        if isinstance(spec["run_mode"], str)
        else spec["run_mode"],
        "experiment.run_mode",
        RUN_MODES,
    )
    spec["num_workers"] = expect_int(spec["num_workers"], "experiment.num_workers", minimum=1)
    spec["num_parameter_servers"] = expect_int(
        spec["num_parameter_servers"], "experiment.num_parameter_servers", minimum=0
    )
    if spec["run_mode"] == "distributed" and spec["num_parameter_servers"] == 0:
        spec["num_parameter_servers"] = 1  # 2018's default: one parameter server
    spec["num_environments"] = expect_int(spec["num_environments"], "experiment.num_environments", minimum=1)
    spec["vectorization"] = expect_choice(spec["vectorization"], "experiment.vectorization", VECTORIZATION)
    spec["torch_threads"] = expect_int(
        spec["torch_threads"], "experiment.torch_threads", minimum=1, maximum=MAX_THREADS
    )
    spec["worker_timeout"] = _seconds_or_none(spec["worker_timeout"], "experiment.worker_timeout")
    spec["seed"] = SEED(spec["seed"], "experiment.seed")  # the agent's range: its seed is this one
    spec["group"] = None if spec["group"] is None else check_name(spec["group"], "experiment.group", what="group name")


def _check_run_mode_uses(spec: dict[str, Any]) -> None:
    """Refuse a count that the run mode does not use, which the run would ignore: workers beyond one in the single
    mode, parameter servers outside the distributed mode, vectorized environments in the multi-threaded mode (one
    environment per worker thread), and subprocess vectorization outside the single mode (the threads and the Ray
    workers step their environments themselves). Checked where an experiment is made (not where a stored one is
    read again, so one made before this check stays readable)."""
    mode, workers = spec["run_mode"], spec["num_workers"]
    if mode == "single" and workers != 1:
        raise SpecError(
            "experiment.num_workers",
            "workers are for the multi-threaded and distributed run modes, and this one is single",
            got=workers,
            expected="1",
            hint=f"Give --run-mode multi-threaded (or distributed) to run {workers} workers, or leave out "
            "--num-workers.",
        )
    if mode != "distributed" and spec["num_parameter_servers"] != 0:
        raise SpecError(
            "experiment.num_parameter_servers",
            f"parameter servers are for the distributed run mode, and this one is {mode}",
            got=spec["num_parameter_servers"],
            expected="0",
            hint="Give --run-mode distributed (with --num-workers), or leave out --num-parameter-servers.",
        )
    if mode == "multi-threaded" and spec["num_environments"] != 1:
        count = spec["num_environments"]
        raise SpecError(
            "experiment.num_environments",
            "the multi-threaded run mode steps one environment per worker thread",
            got=count,
            expected="1",
            hint=f"Give --num-workers {count} instead of -N {count} for {count} environments in threads, or "
            "--run-mode distributed for -N environments in each worker.",
        )
    if mode != "single" and spec["vectorization"] != "sync":  # the worker and the Ray workers never read it
        steps = "one environment per worker thread" if mode == "multi-threaded" else "each Ray worker's in turn"
        raise SpecError(
            "experiment.vectorization",
            f"only the single run mode steps environments in subprocesses, and this one is {mode} ({steps})",
            got=spec["vectorization"],
            expected="sync",
            hint="Give --run-mode single (with -N) for environments stepped in subprocesses, or leave out "
            "vectorization.",
        )


def _check_frequencies(spec: dict[str, Any]) -> None:
    """Saver and summary frequencies, normalised (``600`` -> ``"600s"``); the defaults follow the run mode."""
    distributed = spec["run_mode"] == "distributed"
    saver = spec["saver_frequency"] or ("600s" if distributed else "100e")
    summary = spec["summary_frequency"] or ("120s" if distributed else "1000t")
    spec["saver_frequency"] = str(parse_frequency(saver, "experiment.saver_frequency"))
    summary_frequency = parse_frequency(summary, "experiment.summary_frequency")
    if summary_frequency.unit == "episodes":
        raise SpecError(
            "experiment.summary_frequency",
            "summaries are written by time or by timesteps",
            got=summary,
            expected="a frequency in s or t, like '120s' or '1000t'",
        )
    spec["summary_frequency"] = str(summary_frequency)


def _check_evaluation(project: Project, spec: dict[str, Any]) -> None:
    """``evaluation``: every ``frequency`` (as ``saver_frequency``: ``"10000t"``, ``"50e"``, ``"600s"``) the worker
    plays ``episodes`` (default 10) deterministic episodes on ``environment`` (null: the experiment's; named as
    ``environment`` is), a separate instance with its own seed. Resolved: the frequency normalised, the
    environment inline."""
    if spec["evaluation"] is None:
        return
    path = "experiment.evaluation"
    evaluation = expect_keys(spec["evaluation"], path, EVALUATION_KEYS)
    if evaluation.get("frequency") is None:
        raise SpecError(
            f"{path}.frequency",
            "evaluation needs a frequency",
            expected="a frequency like '10000t' (timesteps), '50e' (episodes) or '600s' (seconds)",
        )
    frequency = str(parse_frequency(evaluation["frequency"], f"{path}.frequency"))
    episodes = expect_int(evaluation.get("episodes", 10), f"{path}.episodes", minimum=1)
    environment = evaluation.get("environment")
    if isinstance(environment, str):
        try:
            environment, _ = load_environment(project, environment)
        except SpecError as error:  # said of experiment.environment: it is about this one
            rest = error.path.removeprefix("experiment.environment")
            raise SpecError(
                f"{path}.environment{rest}", error.message, got=error.got, expected=error.expected, hint=error.hint
            ) from None
    if environment is not None:
        environment = dict(expect_dict(environment, f"{path}.environment"))
    spec["evaluation"] = {"frequency": frequency, "episodes": episodes, "environment": environment}


def _check_evaluation_environment(spec: dict[str, Any]) -> None:
    """An evaluation environment of its own is built once, and must have the states and actions of the
    experiment's (the agent acts in both)."""
    from torchforce.environments import make

    evaluation = spec["evaluation"]
    if evaluation is None or evaluation["environment"] is None:
        return
    path = "experiment.evaluation.environment"
    try:
        with tempfile.TemporaryDirectory(prefix="tfcli-monitor-") as scratch:  # no records touched
            own = make(in_scratch(evaluation["environment"], Path(scratch)))
    except SpecError as error:  # said of "environment...": placed under this one's path
        rest = error.path.removeprefix("environment")
        raise SpecError(
            path + (rest if not rest or rest[0] in ".[" else f".{rest}"),
            error.message,
            got=error.got,
            expected=error.expected,
            hint=error.hint,
        ) from None
    try:
        with tempfile.TemporaryDirectory(prefix="tfcli-monitor-") as scratch:  # (as check_buildable builds it)
            training = make(in_scratch(spec["environment"], Path(scratch)))
            expected: dict[str, Any] = {"states": training.states, "actions": training.actions}
            training.close()
        for what in ("states", "actions"):
            if getattr(own, what) != expected[what]:
                raise SpecError(
                    path,
                    f"its {what} differ from those of experiment.environment, in which the agent learns",
                    got=getattr(own, what),
                    expected=expected[what],
                )
    finally:
        own.close()


def _check_mlflow(project: Project, spec: dict[str, Any], *, build: bool) -> None:
    """``mlflow``: the run mirrored into MLflow (``torchforce.client.tracking``): ``tracking_uri``, an absolute
    local store (``file:///...``, ``sqlite:////...``, a folder) or a server's address, and ``experiment``, the
    MLflow experiment (default: the project's name). ``build`` (``experiment new``): mlflow must be installed."""
    if spec["mlflow"] is None:
        return
    path = "experiment.mlflow"
    settings = expect_keys(spec["mlflow"], path, MLFLOW_KEYS)
    uri = settings.get("tracking_uri")
    expected = "an absolute store like 'file:///home/me/mlruns' or 'sqlite:////home/me/mlflow.db', or a server URL"
    if not isinstance(uri, str) or not uri.strip():
        raise SpecError(f"{path}.tracking_uri", "MLflow needs a tracking URI", got=uri, expected=expected)
    scheme, _, rest = uri.partition(":")  # the local path: file:///abs, sqlite:////abs (sqlite:///rel), /abs
    local = {"file": rest.removeprefix("//"), "sqlite": rest.removeprefix("///")}.get(scheme)
    local = local if local is not None else uri if "://" not in uri else None
    if local is not None and not Path(local).is_absolute():
        raise SpecError(
            f"{path}.tracking_uri",
            "a relative store would be found from wherever the worker runs",
            got=uri,
            expected=expected,
        )
    experiment = settings.get("experiment") or project.name
    if not isinstance(experiment, str):
        raise SpecError(f"{path}.experiment", "not an MLflow experiment name", got=experiment, expected="a name")
    if build:
        from torchforce.client.tracking import check_installed, shown_uri

        check_installed(path)
        if local is None:  # (said when the experiment is made: a file from someone else may name any server)
            warn_spec(
                f"{path}.tracking_uri: the run sends its parameters (its whole spec) and its metrics to the MLflow "
                f"server at {shown_uri(uri)}"
            )
    spec["mlflow"] = {"tracking_uri": uri, "experiment": experiment}


def check_stored(project: Project, path: Path, name: str) -> dict[str, Any]:
    """Read an experiment's stored ``experiment.json`` (which a person may have edited) and check it as cheaply as
    possible: its structure and every field, without building anything. Errors name the file as the project
    knows it (``experiments/NAME/experiment.json``). Returns the spec resolved again (so an edited file that left
    out a field or named a config reads as its resolved form), with the stored sources and creation stamps."""
    file = str(path.relative_to(project.root) if path.is_relative_to(project.root) else path)
    try:
        stored = dict(expect_dict(load_file(path), "experiment"))
        spec = resolve_experiment(project, stored, build=False)
        kept = stored.get("sources") or {}
        spec["sources"] = {key: spec["sources"].get(key) or kept.get(key) for key in {**kept, **spec["sources"]}}
        spec.update({key: stored[key] for key in ("created_at", "torchforce_version") if key in stored})
        if spec["name"] != name:
            raise SpecError(
                "experiment.name",
                f"the stored spec names another experiment than its folder '{name}'",
                got=spec["name"],
                expected=f'"{name}"',
            )
    except SpecError as error:
        raise _in_stored(error, file, name) from None
    return spec


def _in_stored(error: SpecError, file: str, name: str) -> SpecError:
    """``error`` about the stored spec of the experiment ``name``: it names that ``file``, and says how to get past
    it unless it says so itself."""
    error.hint = error.hint or f"Fix the file, or remove the experiment with 'tfcli experiment delete -e {name}'."
    error.file = file
    error.args = (error.render(),)
    return error


def check_environment_id(project: Project, spec: dict[str, Any], name: str) -> None:
    """The Gymnasium id of a stored experiment's environment is one this machine knows (a registry lookup, nothing
    built): an id edited into experiment.json, or one whose package was uninstalled since ``new``, is an error at
    start, naming the file, and not a traceback in the worker's log."""
    from torchforce.client.modules import modules_folder, use_modules
    from torchforce.environments import ENVIRONMENTS
    from torchforce.environments.gym import resolve_gym_id

    environment = spec["environment"]
    if not isinstance(environment, dict) or ENVIRONMENTS.canonical(str(environment.get("type"))) != "gym":
        return
    try:
        use_modules(modules_folder(project.root))  # a 'module:Name' of the project's own, as new found it
        resolve_gym_id(environment.get("gym_id"), "experiment.environment.gym_id")
    except SpecError as error:
        raise _in_stored(error, str(Path("experiments") / name / "experiment.json"), name) from None


def load_environment(project: Project, value: str) -> tuple[Any, str | None]:
    """The environment an experiment names by a string, and the file it came from: a file or a config in
    configs/environments/ first, else an environment name (a Gymnasium id, ``module:Class`` or an environment type:
    ``torchforce.environments.names``), stored as the spec it stands for (``{"type": "gym", "gym_id":
    "HalfCheetah-v5"}``) so that the worker builds the same environment. A name known as neither is an error that
    suggests among the configs and the registered ids."""
    from torchforce.client.modules import modules_folder, use_modules
    from torchforce.environments.names import spec_for_name

    path = "experiment.environment"
    try:
        project.find_config(value, "environments", path)
    except SpecError:
        if Path(value).suffix.lower() in (".json", ".yaml", ".yml") or _names_a_folder(project, value):
            raise  # a file, or a folder: not a name
        use_modules(modules_folder(project.root))  # a 'module:Class' of the project's own
        return spec_for_name(value, path, configs=project.config_names("environments")), None
    return project.load_config(value, "environments", path)


def _names_a_folder(project: Project, value: str) -> bool:
    for base in (current_folder(), project.root):
        try:
            if (base / value).is_dir():
                return True
        except OSError:  # a name the system cannot look up (too long)
            pass
    return False


def _environment_spec(value: Any) -> dict[str, Any]:
    if isinstance(value, str):  # a config file holding just a name
        from torchforce.environments.names import spec_for_name

        return spec_for_name(value, "experiment.environment")
    return dict(expect_dict(value, "experiment.environment"))


def worker_timeout_of(spec: dict[str, Any]) -> float | None:
    """The ``worker_timeout`` of a resolved experiment (None: no timeout); the default for a run resolved before
    the field."""
    return spec.get("worker_timeout", DEFAULTS["worker_timeout"])
