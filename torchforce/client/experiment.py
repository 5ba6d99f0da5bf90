"""The Experiment of seed 000: create, start, pause, stop and download an experiment of a project.

The ``tfcli experiment ...`` commands are thin wrappers over this class, and scripts can use it directly::

    experiment = Experiment(name="cartpole", agent="ppo_cartpole", environment="cartpole", total_timesteps=50_000)
    experiment.generate_locally()
    experiment.start()

Every change of state goes through the project's state database with a compare-and-set on the status, so two
concurrent calls cannot both start (or both create) the same experiment.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from torchforce.client.backends import get_backend
from torchforce.client.errors import ClientError
from torchforce.client.project import Project, write_json_atomically
from torchforce.client.spec import check_name, resolve_experiment
from torchforce.client.store import ExperimentRecord
from torchforce.spec import SpecError, did_you_mean, expect_dict, load_file

SIGNAL_TIMEOUT = 120.0


class Experiment:
    """An experiment of ``project`` (default: the project around the current folder).

    Keyword arguments are the experiment spec fields (seed 000): ``file`` (a spec file holding any of them),
    ``name``, ``environment``, ``agent``, ``network``, ``cluster``, ``episodes``, ``total_timesteps``,
    ``max_timesteps_per_episode``, ``deterministic``, ``repeat_actions``, ``debug_logging``, ``run_mode``,
    ``num_workers``, ``num_parameter_servers``, ``saver_frequency``, ``summary_frequency``; and ours: ``seed``,
    ``num_environments``, ``vectorization``, ``description``. Values given here override the file's.
    """

    def __init__(self, project: Project | None = None, **kwargs: Any) -> None:
        self.project = project or Project.find()
        file = kwargs.pop("file", None)
        raw: dict[str, Any] = {}
        self.file = None
        if file is not None:
            path = self.project.find_config(str(file), "experiments", "experiment.file")
            raw = dict(expect_dict(load_file(path), "experiment"))
            self.file = str(path)
        if kwargs.get("total_timesteps") is not None:
            raw.pop("timesteps", None)  # a flag overrides the file's 2018 'timesteps' too
        raw.update({key: value for key, value in kwargs.items() if value is not None})
        self.raw = raw
        self.spec: dict[str, Any] | None = None
        if raw.get("name") is not None:
            check_name(raw["name"])

    @property
    def name(self) -> str:
        return str((self.spec or self.raw).get("name"))

    @property
    def folder(self) -> Path:
        return self.project.experiment_folder(self.name)

    @property
    def results(self) -> Path:
        return self.folder / "results"

    @classmethod
    def load(cls, project: Project, name: str) -> Experiment:
        """The existing experiment ``name`` of ``project``."""
        folder = project.experiment_folder(name)
        record = project.store.experiment(name)
        if record is None or not (folder / "experiment.json").is_file():
            known = [r.name for r in project.store.experiments()]
            guess = did_you_mean(name, known)
            raise ClientError(
                f"no experiment named '{name}' in project '{project.name}'",
                hint=(f"Did you mean '{guess}'? " if guess else "")
                + ("Known: " + ", ".join(known) + "." if known else "Create one with 'tfcli experiment new'."),
            )
        experiment = cls.__new__(cls)
        experiment.project = project
        experiment.file = str(folder / "experiment.json")
        experiment.spec = dict(expect_dict(load_file(folder / "experiment.json"), "experiment"))
        experiment.raw = dict(experiment.spec)
        return experiment

    # ------------------------------------------------------------------ creating

    def validate(self) -> dict[str, Any]:
        """Resolve and check the whole spec (building environment and agent once); nothing is written."""
        if self.raw.get("name") is None:
            raise SpecError("experiment.name", "an experiment needs a name", hint="Give -n/--name NAME.")
        self.spec = resolve_experiment(self.project, self.raw)
        return self.spec

    def generate_locally(self) -> Path:
        """Validate, then create ``experiments/<name>/experiment.json`` and the state database row atomically:
        on any error nothing is left behind."""
        spec = self.validate()
        from torchforce import __version__

        spec = {**spec, "created_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "torchforce_version": __version__}
        folder, store = self.folder, self.project.store
        if folder.exists():
            raise ClientError(
                f"experiment '{self.name}' already exists ({folder})",
                hint="Pick another name, or remove the old one with 'tfcli experiment delete'.",
            )
        staging = Path(tempfile.mkdtemp(dir=self.project.experiments_folder, prefix=f".{self.name}."))
        try:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(staging, 0o777 & ~umask)  # mkdtemp makes it private; an experiment folder is not
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

    def write_json_file(self, file: str | Path | None = None) -> Path:
        """Write the resolved spec to ``file`` (default: the experiment's ``experiment.json``)."""
        spec = self.spec or self.validate()
        target = Path(file) if file is not None else self.folder / "experiment.json"
        write_json_atomically(target, spec)
        return target

    def setup_cluster(self, cluster: str | None = None, project_id: str | None = None, start: bool = False) -> Any:
        """The Cluster this experiment would run on (the GKE backend, still to come, will create it)."""
        from torchforce.client.cluster import Cluster, get_cluster_from_string

        spec = (self.spec or {}).get("cluster")
        found = get_cluster_from_string(cluster) if cluster else Cluster(**spec) if spec else None
        if start and found is not None:
            found.create()
        return found

    # ------------------------------------------------------------------ status

    def record(self) -> ExperimentRecord:
        """The state database's row, reconciled with reality: a worker that died shows as failed."""
        store = self.project.store
        record = store.experiment(self.name)
        if record is None:
            raise ClientError(f"no experiment named '{self.name}'")
        if record.status == "running" and not get_backend(record.backend).alive(record.pid):
            time.sleep(0.2)  # a worker that just exited may be writing its own final status
            record = store.experiment(self.name)
            if record.status == "running":
                tail = self.log_tail()
                message = "the worker died" + (f"; its log ends:\n{tail}" if tail else "")
                store.update_experiment(
                    self.name, expect=("running",), status="failed", pid=None, message=message, ended_at=time.time()
                )
                record = store.experiment(self.name)
        return record

    def progress(self) -> dict[str, Any]:
        path = self.results / "progress.json"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return {}

    def log_tail(self, lines: int = 8) -> str:
        try:
            text = (self.results / "worker.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    def has_checkpoint(self) -> bool:
        return (self.results / "checkpoints" / "latest.json").is_file()

    # ------------------------------------------------------------------ lifecycle

    def start(
        self, project_id: str | None = None, resume: bool = False, cluster: str | None = None, fresh: bool = False
    ) -> int:
        """Start the experiment (``resume``: continue from its latest checkpoint; ``fresh``: discard the results
        of an earlier run and start over). Returns the worker's process id."""
        if cluster is not None:
            raise ClientError(
                "running on a cluster is not available yet (the Ray and GKE backends are to come)",
                hint="Leave out -c/--cluster to run on this machine.",
            )
        spec = self.spec or self.validate()
        record = self.record()
        backend = get_backend(record.backend)
        if record.status == "running":
            raise ClientError(
                f"experiment '{self.name}' is already running (PID {record.pid})",
                hint=f"Pause it with 'tfcli experiment pause -e {self.name}'.",
            )
        if spec["run_mode"] not in backend.supported_run_modes:
            raise ClientError(
                f"run mode '{spec['run_mode']}' is not available yet on the {backend.name} backend",
                hint="Use run_mode 'single' (with num_environments for vectorized environments) for now.",
            )
        if resume and fresh:
            raise ClientError("--resume and --fresh contradict each other", hint="Give one of them.")
        if resume:
            if record.status == "finished":
                raise ClientError(f"experiment '{self.name}' has finished; there is nothing to resume")
            if not self.has_checkpoint():
                raise ClientError(
                    f"experiment '{self.name}' has no checkpoint to resume from",
                    hint=f"Start it without --resume: 'tfcli experiment start -e {self.name}'."
                    if record.status == "new"
                    else f"Start it afresh with 'tfcli experiment start -e {self.name} --fresh'.",
                )
        elif record.status != "new" and not fresh:
            raise ClientError(
                f"experiment '{self.name}' has already run (status: {record.status})",
                hint="Use --resume to continue from its last checkpoint, or --fresh to start over.",
            )
        if not self.project.store.update_experiment(
            self.name,
            expect=(record.status,),
            status="running",
            pid=None,
            message=None,
            started_at=time.time(),
            ended_at=None,
        ):
            raise ClientError(f"experiment '{self.name}' changed state meanwhile; try again")
        try:
            if fresh:
                shutil.rmtree(self.results, ignore_errors=True)
            pid = backend.start(self.folder, self.project.root, resume=resume)
        except BaseException:
            self.project.store.update_experiment(self.name, status=record.status, started_at=record.started_at)
            raise
        self.project.store.update_experiment(self.name, expect=("running",), pid=pid)
        return pid

    def _signal(self, request: str) -> ExperimentRecord:
        record = self.record()
        backend = get_backend(record.backend)
        if not backend.signal(record.pid, request, SIGNAL_TIMEOUT):
            raise ClientError(
                f"the worker of '{self.name}' (PID {record.pid}) did not {request} within {SIGNAL_TIMEOUT:.0f} s",
                hint="See its log with 'tfcli experiment logs'.",
            )
        return self.record()

    def pause(self, project_id: str | None = None) -> ExperimentRecord:
        """Checkpoint the running experiment and end its worker; ``start(resume=True)`` continues it."""
        record = self.record()
        if record.status != "running":
            raise ClientError(f"experiment '{self.name}' is not running (status: {record.status})")
        return self._signal("pause")

    def stop(self, no_download: bool = False) -> ExperimentRecord:
        """End the experiment for good (a running worker checkpoints first); download its results unless
        ``no_download`` (locally they are in place already)."""
        record = self.record()
        if record.status in ("stopped", "finished"):
            raise ClientError(f"experiment '{self.name}' is already {record.status}")
        if record.status == "running":
            record = self._signal("stop")
        if record.status != "stopped":
            self.project.store.update_experiment(self.name, status="stopped", pid=None, ended_at=time.time())
        if not no_download and self.results.is_dir():
            self.download()
        return self.record()

    def download(self) -> Path:
        """The experiment's results (checkpoints, TensorBoard summaries, episode log) in ``results/``."""
        record = self.record()
        return get_backend(record.backend).download(self.folder)

    def delete(self) -> None:
        """Remove a experiment that is not running: its folder and its row."""
        record = self.record()
        if record.status == "running":
            raise ClientError(f"experiment '{self.name}' is running", hint="Stop it first.")
        shutil.rmtree(self.folder, ignore_errors=True)
        self.project.store.remove_experiment(self.name)


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
