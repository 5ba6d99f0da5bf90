"""The Experiment of the 2018 client: create, start, pause, stop and download an experiment of a project
(docs/tensorforce-0.4.md, Client and experiment files).

The ``tfcli experiment ...`` commands are thin wrappers over this class, and scripts can use it directly::

    experiment = Experiment(name="cartpole", agent="ppo_cartpole", environment="cartpole", total_timesteps=50_000)
    experiment.generate_locally()
    experiment.start()

Every change of state goes through the project's state database with a compare-and-set on the status, so two
concurrent calls cannot both start (or both create) the same experiment. This module creates experiments and finds
them; what they are now is client/experiment_state.py, starting them client/experiment_start.py (where they run:
client/experiment_placement.py), and pausing, stopping and deleting them client/experiment_control.py.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from torchforce.client import warm_start
from torchforce.client.errors import ClientError
from torchforce.client.experiment_control import Controls
from torchforce.client.experiment_file import NULL_MEANS_SOMETHING, check_name, check_stored
from torchforce.client.experiment_start import Starting
from torchforce.client.project import Project, current_umask, write_json_atomically
from torchforce.spec import SpecError, did_you_mean, expect_dict, load_file


class Experiment(Starting, Controls):
    """An experiment of ``project`` (default: the project around the current folder).

    Keyword arguments are the 2018 experiment fields: ``file`` (a spec file holding any of them),
    ``name``, ``environment``, ``agent``, ``network``, ``cluster``, ``episodes``, ``total_timesteps``,
    ``max_timesteps_per_episode``, ``deterministic``, ``repeat_actions``, ``debug_logging``, ``run_mode``,
    ``num_workers``, ``num_parameter_servers``, ``saver_frequency``, ``summary_frequency``; and ours: ``seed``,
    ``num_environments``, ``vectorization``, ``torch_threads``, ``worker_timeout``, ``description``. Values given
    here override the file's.
    """

    def __init__(self, project: Project | None = None, **kwargs: Any) -> None:
        self.project = project or Project.find()
        file = kwargs.pop("file", None)
        raw: dict[str, Any] = {}
        self.file = None
        if file is not None:
            path = self.project.find_config(str(file), "experiments", "experiment.file")
            try:
                raw = dict(expect_dict(load_file(path), "experiment"))
            except SpecError as error:
                raise error.with_file(str(path)) from None
            self.file = str(path)
        if kwargs.get("total_timesteps") is not None:
            raw.pop("timesteps", None)  # a flag overrides the file's 2018 'timesteps' too
        # None is "not given", except where null says something (worker_timeout: no timeout)
        raw.update({key: value for key, value in kwargs.items() if value is not None or key in NULL_MEANS_SOMETHING})
        self.raw = raw
        self.spec: dict[str, Any] | None = None
        if raw.get("name") is not None:
            check_name(raw["name"])

    @classmethod
    def load(cls, project: Project, name: str, *, damaged: bool = False) -> Experiment:
        """The existing experiment ``name`` of ``project``. Its stored spec is checked again (a person may have
        edited it). With ``damaged``, an experiment whose folder is gone or whose spec is broken is still
        returned (with ``spec`` None), so that it can be deleted."""
        folder = project.experiment_folder(name)
        spec_file = folder / "experiment.json"
        shown = spec_file.relative_to(project.root)
        record = project.store.experiment(name)
        if record is None:
            from torchforce.client.groups import memberships  # (groups are made of experiments)

            runs = memberships(project).get(name)
            if runs:  # a command that takes a group found it before; this one takes one run
                raise ClientError(
                    f"'{name}' is a group of {len(runs)} run{'s' * (len(runs) != 1)}, and this takes one experiment",
                    hint=f"Give one of its runs: {', '.join(runs)}.",
                )
            known = [r.name for r in project.store.experiments()]
            guess = did_you_mean(name, known)
            unregistered = f"{folder.relative_to(project.root)} exists, but the project's state database lacks it. "
            raise ClientError(
                f"no experiment named '{name}' in project '{project.name}'",
                hint=(unregistered + "Move that folder away to reuse the name. " if spec_file.is_file() else "")
                + (f"Did you mean '{guess}'? " if guess else "")
                + ("Known: " + ", ".join(known) + "." if known else "Create one with 'tfcli experiment new'."),
            )
        experiment = cls.__new__(cls)
        experiment.project, experiment.file = project, str(spec_file)
        experiment.raw, experiment.spec = {"name": name}, None
        try:
            if not spec_file.is_file():
                raise ClientError(
                    f"the folder of experiment '{name}' is missing: no {shown}",
                    hint=f"Restore it, or remove the experiment with 'tfcli experiment delete -e {name}'.",
                )
            experiment.spec = check_stored(project, spec_file, name)
        except (ClientError, SpecError):
            if damaged:
                return experiment
            raise
        experiment.raw = dict(experiment.spec)
        return experiment

    def generate_locally(self, *, sweep: str | None = None) -> Path:
        """Validate, then create ``experiments/<name>/experiment.json`` and the state database row atomically:
        on any error nothing is left behind. A name that is taken is refused before the spec is built (seconds), and
        so is one of a sweep's trials' names (``<sweep>-t003-s0``), unless ``sweep`` names that sweep (its driver
        creates its trials' runs)."""
        if self.raw.get("name") is not None:
            check_name(self.raw["name"])
            self._check_name_is_free(sweep)
        spec = self.validate()
        from torchforce import __version__

        spec = {**spec, "created_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "torchforce_version": __version__}
        folder, store = self.folder, self.project.store
        self._check_name_is_free(sweep)
        staging = Path(tempfile.mkdtemp(dir=self.project.experiments_folder, prefix=f".{self.name}."))
        try:
            os.chmod(staging, 0o777 & ~current_umask())  # mkdtemp makes it private; an experiment folder is not
            if spec.get("warm_start") is not None:  # what it starts from travels with it (see warm_start.py)
                warm_start.copy_into(self.project, spec["warm_start"], staging)
            write_json_atomically(staging / "experiment.json", spec)
            try:  # the folder first: once the row exists, every reader finds the folder too
                os.rename(staging, folder)
            except OSError:
                raise ClientError(f"experiment '{self.name}' already exists ({folder})") from None
            try:
                store.add_experiment(self.name, cluster=(spec.get("cluster") or {}).get("name"))
            except BaseException as error:
                shutil.rmtree(folder, ignore_errors=True)
                if "UNIQUE" in str(error):
                    raise ClientError(f"experiment '{self.name}' already exists") from None
                raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        self.spec = spec
        return folder

    def _check_name_is_free(self, sweep: str | None = None) -> None:
        from torchforce.client.sweep import Sweep  # (sweep.py builds on this module)

        owner = Sweep.owner_of_name(self.project, self.name)
        if owner is not None and owner != sweep:
            raise ClientError(
                f"the name '{self.name}' is kept for sweep '{owner}': its driver names its trials' runs "
                f"{owner}-t000-s0, {owner}-t001-s0, ... (and their groups {owner}-t000, ...), and would meet this "
                "experiment there",
                hint="Pick another name.",
            )
        shown = self.folder.relative_to(self.project.root)
        registered = self.project.store.experiment(self.name) is not None
        if registered and not self.folder.exists():
            raise ClientError(
                f"experiment '{self.name}' already exists, though its folder {shown} is missing",
                hint=f"Remove it with 'tfcli experiment delete -e {self.name}', then create it again.",
            )
        if self.folder.exists():
            raise ClientError(
                f"experiment '{self.name}' already exists ({shown})",
                hint=f"Pick another name, or remove the old one with 'tfcli experiment delete -e {self.name}'."
                if registered
                else f"Pick another name, or move the folder {shown} away (the project does not know it).",
            )

    def write_json_file(self, file: str | Path | None = None) -> Path:
        """Write the resolved spec to ``file`` (default: the experiment's ``experiment.json``)."""
        spec = self.spec or self.validate()
        target = Path(file) if file is not None else self.folder / "experiment.json"
        write_json_atomically(target, spec)
        return target

    def setup_cluster(self, cluster: str | None = None, project_id: str | None = None, start: bool = False) -> Any:
        """The cluster spec this experiment would run on (``cluster``, else its spec's); with ``start``, a Ray
        cluster the project has not created yet is created."""
        from torchforce.client.cluster import cluster_from_spec, get_cluster_from_string

        spec = (self.spec or {}).get("cluster")
        found = get_cluster_from_string(cluster) if cluster else cluster_from_spec(spec) if spec else None
        if start and found is not None and self.project.store.cluster(found.name) is None:
            if getattr(found, "type", None) == "ray":
                found.create(self.project)
            else:
                found.create()
        return found


def refuse_busy(runs: Sequence[Experiment], *, whole: str, stop_first: str) -> None:
    """A ClientError naming the runs of ``whole`` that run or are queued, if any: nothing of it may go yet."""
    busy = [f"{run.name} ({status})" for run in runs if (status := run.record().status) in ("running", "queued")]
    if busy:
        message = f"{whole} has runs that are not over: {', '.join(busy)}; nothing was deleted"
        raise ClientError(message, hint=stop_first)


def delete_runs(
    runs: Sequence[Experiment],
    *,
    whole: str,
    stop_first: str,
    again: str,
    delete: Callable[[Experiment], object] = Experiment.delete,
) -> list[str]:
    """Delete the runs of ``whole`` (``group 'g'``, ``sweep 's'``) as one: none while one of them runs or is queued
    (``stop_first`` says how to stop them), else one after the other with ``delete``. A run that cannot be deleted
    stops there, and the error names the runs deleted before it and how to delete the rest (``again``). Returns the
    names of the runs deleted."""
    refuse_busy(runs, whole=whole, stop_first=stop_first)
    deleted: list[str] = []
    for run in runs:
        try:
            delete(run)
        except ClientError as error:  # (it changed state since the check above): say what went and what stays
            raise ClientError(
                f"{whole}: run '{run.name}' was not deleted: {error.message}",
                hint=("Deleted before it: " + ", ".join(deleted) + ". " if deleted else "") + again,
            ) from None
        deleted.append(run.name)
    return deleted


def get_experiment_from_string(experiment: str, running: bool = False, project: Project | None = None) -> Experiment:
    """An experiment by name (an existing one of the project), or a new one from a spec file."""
    project = project or Project.find()
    if project.store.experiment(experiment) is not None:
        found = Experiment.load(project, experiment)
        if running and found.record().status != "running":
            raise ClientError(f"experiment '{experiment}' is not running")
        return found
    if Path(experiment).suffix in (".json", ".yaml", ".yml") or Path(experiment).exists():
        return Experiment(project, file=experiment)
    return Experiment.load(project, experiment)  # raises the did-you-mean error


def get_local_experiments(as_objects: bool = False, project: Project | None = None) -> list[Any]:
    """The names (or Experiment objects) of the project's experiments, oldest first."""
    project = project or Project.find()
    names = [record.name for record in project.store.experiments()]
    return [Experiment.load(project, name) for name in names] if as_objects else names
