"""A Gymnasium or Atari monitor in an experiment (the environment's ``monitor=DIR``: one record per episode or game
in ``DIR/episodes.jsonl``, see ``torchforce.environments.gym``): where its records go, and how a run that resumes
keeps them.

``experiment new`` builds the environment once to check it, its monitor in a scratch folder (``in_scratch``): no
records are touched before the run. The worker builds the experiment's environments from
``monitored(spec["environment"], results, resume=...)``:

- ``DIR`` is a folder of the run's results folder (``results/DIR``; an absolute path or ``..`` is refused: a spec
  from someone else may not have a run clear and write records elsewhere), which is downloaded with the rest and kept
  across pauses and restarts. (The worker's current folder would not keep it: the local backend empties it at every
  start, and a Ray job's or a pod's goes with the job.) The results folder itself is refused: its ``episodes.jsonl``
  is the run's own episode log.
- A new run starts the records afresh, once, as the environment would (``monitor_safe`` refuses a directory that
  holds records); ``--fresh`` removes the results folder anyway.
- Every environment then continues the records (``monitor_continue``): the copies of a vector, the environments of
  a run resumed after a pause or a crash, those of a Ray worker started again in the middle of a distributed run.
  A resumed run appends after what the run recorded before, its episodes numbered on from the last record. The
  records of episodes played after the checkpoint it resumes from are kept: they happened (the run's own
  ``episodes.jsonl`` drops them, as those episodes are played again, and counts the replayed ones anew), so the
  monitor may hold more episodes than the run counts.

Where the copies' appends to one file cannot be trusted, a run with a monitor is refused before it starts
(``refuse_monitors``): on GKE, where the results folder is a Cloud Storage bucket mounted in the pods (each record
would rewrite the bucket's object, which takes about one write a second, and the pods of a distributed run would
overwrite each other's), and in the distributed run mode on a Ray cluster of other machines (each worker's records
would stay on its own node).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath
from typing import Any

from torchforce.spec import SpecError, expect_bool

MONITORED_TYPES = ("gym", "atari")  # the environment types that take ``monitor`` (under their canonical names)


def gym_specs(environment: Any, change: Callable[[dict[str, Any], str], dict[str, Any]], path: str) -> Any:
    """``environment`` (a spec at ``path``) with every Gymnasium or Atari environment spec in it replaced by
    ``change(spec, its path)``: the spec itself, or one that a wrapper's spec holds (``repeat_actions``'
    ``environment``)."""
    from torchforce.environments import ENVIRONMENTS

    if not isinstance(environment, dict):
        return environment
    if ENVIRONMENTS.canonical(str(environment.get("type"))) in MONITORED_TYPES:
        return change(environment, path)
    if isinstance(environment.get("environment"), dict):
        return {**environment, "environment": gym_specs(environment["environment"], change, f"{path}.environment")}
    return environment


def monitored(environment: Any, results: Path, *, resume: bool, path: str = "experiment.environment") -> Any:
    """The experiment's ``environment`` spec as the worker of a run with the results folder ``results`` builds it
    (see the module doc): each monitor's directory absolute, its records started afresh unless the run ``resume``s
    (or the spec says ``monitor_continue``), and continued by every environment built."""

    def place(spec: dict[str, Any], where: str) -> dict[str, Any]:
        monitor = spec.get("monitor")
        if not isinstance(monitor, str) or not monitor:
            return spec  # none, or not a directory: the environment says so when it is built
        directory = results.absolute() / inside_results(monitor, f"{where}.monitor")
        if directory.resolve() == results.resolve():
            raise SpecError(
                f"{where}.monitor",
                "the run's results folder itself is no monitor directory: its episodes.jsonl is the run's own log",
                got=monitor,
                expected="a folder of its own, like 'monitor' (results/monitor)",
            )
        if not resume and not expect_bool(spec.get("monitor_continue", False), f"{where}.monitor_continue"):
            from torchforce.environments.records import records_file

            safe = expect_bool(spec.get("monitor_safe", False), f"{where}.monitor_safe")
            records_file(directory, keep=False, safe=safe, path=f"{where}.monitor")
        return {**spec, "monitor": str(directory), "monitor_continue": True}

    return gym_specs(environment, place, path)


def in_scratch(environment: Any, scratch: Path) -> Any:
    """``environment`` with each monitor's directory replaced by ``scratch``: built so, it checks every monitor
    option (``monitor_video`` needs moviepy) and leaves the records of the run's directory alone."""

    def scratched(spec: dict[str, Any], _: str) -> dict[str, Any]:
        monitor = spec.get("monitor")
        return {**spec, "monitor": str(scratch)} if isinstance(monitor, str) and monitor else spec

    return gym_specs(environment, scratched, "environment")


def check_monitors(environment: Any, path: str = "experiment.environment") -> None:
    """Each monitor directory of the experiment's ``environment`` (at the spec ``path``) is a folder of the run's
    results (``inside_results``): checked when the experiment is made and again at every start, its stored spec
    read anew. (An evaluation environment's monitor is dropped by the worker: it records nothing.)"""

    def check(spec: dict[str, Any], where: str) -> dict[str, Any]:
        monitor = spec.get("monitor")
        if isinstance(monitor, str) and monitor:
            inside_results(monitor, f"{where}.monitor")
        return spec

    gym_specs(environment, check, path)


def inside_results(monitor: str, path: str) -> PurePath:
    """The monitor directory ``monitor`` (at the spec ``path``) as a folder of the run's results: a relative path
    that stays inside (no ``..``). An absolute one, or one that climbs out, is refused: a spec from someone else
    would otherwise have the run clear and write records in any folder of this machine."""
    relative = PurePosixPath(monitor.replace("\\", "/"))
    if relative.is_absolute() or PureWindowsPath(monitor).drive or ".." in relative.parts:
        raise SpecError(
            path,
            "a monitor's directory is a folder of the run's results, where its records are kept with the run's",
            got=monitor,
            expected="a relative path without '..', like 'monitor' (results/monitor)",
            hint="Give a folder name such as 'monitor' (an experiment made earlier: in its experiment.json).",
        )
    return relative


def monitor_paths(environment: Any, path: str = "experiment.environment") -> list[str]:
    """The spec paths of the monitors in ``environment`` (``experiment.environment.monitor``, ...)."""
    found: list[str] = []

    def note(spec: dict[str, Any], where: str) -> dict[str, Any]:
        if spec.get("monitor") is not None:
            found.append(f"{where}.monitor")
        return spec

    gym_specs(environment, note, path)
    return found


def refuse_monitors(spec: dict[str, Any], where: str, why: str) -> None:
    """A SpecError at the first monitor of the experiment ``spec``'s environment: it cannot record ``where``, for the
    reason ``why`` (see the module doc)."""
    paths = monitor_paths(spec["environment"])
    if paths:
        raise SpecError(
            paths[0],
            f"a monitor cannot record {where}: {why}",
            hint="Leave it out: the run's results/episodes.jsonl has every episode (its return, length and time).",
        )
