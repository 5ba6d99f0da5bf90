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
import warnings
from pathlib import Path
from typing import Any

from torchforce.client.backends import get_backend
from torchforce.client.errors import ClientError, ClientWarning
from torchforce.client.project import Project, current_umask, write_json_atomically
from torchforce.client.spec import check_name, check_stored, resolve_experiment
from torchforce.client.store import ExperimentRecord
from torchforce.spec import SpecError, did_you_mean, expect_dict, load_file

SIGNAL_TIMEOUT = 120.0
# A worker whose row says running but has no PID yet is starting (its start call writes the PID in a moment): for
# this long it is not judged dead, so a status check during a start cannot mark a live worker failed.
STARTING_SECONDS = 30.0


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
    def load(cls, project: Project, name: str, *, damaged: bool = False) -> Experiment:
        """The existing experiment ``name`` of ``project``. Its stored spec is checked again (a person may have
        edited it). With ``damaged``, an experiment whose folder is gone or whose spec is broken is still
        returned (with ``spec`` None), so that it can be deleted."""
        folder = project.experiment_folder(name)
        spec_file = folder / "experiment.json"
        shown = spec_file.relative_to(project.root)
        record = project.store.experiment(name)
        if record is None:
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
        self._check_name_is_free()
        staging = Path(tempfile.mkdtemp(dir=self.project.experiments_folder, prefix=f".{self.name}."))
        try:
            os.chmod(staging, 0o777 & ~current_umask())  # mkdtemp makes it private; an experiment folder is not
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

    def _check_name_is_free(self) -> None:
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
        """The Cluster this experiment would run on (the GKE backend, still to come, will create it)."""
        from torchforce.client.cluster import Cluster, get_cluster_from_string

        spec = (self.spec or {}).get("cluster")
        found = get_cluster_from_string(cluster) if cluster else Cluster(**spec) if spec else None
        if start and found is not None:
            found.create()
        return found

    # ------------------------------------------------------------------ status

    def record(self) -> ExperimentRecord:
        """The state database's row, reconciled with reality: a worker that died shows as failed. A worker that is
        still starting (``running`` with no PID yet, for STARTING_SECONDS) is never judged dead."""
        store = self.project.store
        record = store.experiment(self.name)
        if record is None:
            raise ClientError(f"no experiment named '{self.name}'")
        if record.status != "running" or self._may_be_alive(record):
            return record
        time.sleep(0.2)  # a worker that just exited may be writing its own final status
        again = store.experiment(self.name)
        if again is None or again.status != "running" or again.pid != record.pid or self._may_be_alive(again):
            return again or record
        tail = self.log_tail()
        message = "the worker died" + (f"; its log ends:\n{tail}" if tail else "")
        # only if nothing changed meanwhile (a starting call may just have written the PID)
        store.update_experiment(
            self.name,
            expect=("running",),
            expect_pid=record.pid,
            status="failed",
            pid=None,
            message=message,
            ended_at=time.time(),
        )
        return store.experiment(self.name) or record

    def _may_be_alive(self, record: ExperimentRecord) -> bool:
        if record.pid is None:
            return time.time() - (record.started_at or 0.0) < STARTING_SECONDS
        return get_backend(record.backend).alive(record.pid, self.folder)

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

    def checkpoint_timesteps(self) -> int:
        """The timestep of the latest checkpoint (0 when there is none): where a resumed run goes on from."""
        try:
            return int(json.loads((self.results / "checkpoints" / "latest.json").read_text())["timesteps"])
        except (OSError, ValueError, KeyError, TypeError):
            return 0

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
                f"experiment '{self.name}' is already running"
                + (f" (PID {record.pid})" if record.pid else " (its worker is starting)"),
                hint=f"Pause it with 'tfcli experiment pause -e {self.name}'.",
            )
        if spec["run_mode"] not in backend.supported_run_modes:
            raise ClientError(
                f"run mode '{spec['run_mode']}' is not available yet on the {backend.name} backend",
                hint="Use run_mode 'single' (with num_environments for vectorized environments) for now.",
            )
        self._check_can_start(record, resume=resume, fresh=fresh)
        self._refuse_a_live_worker(record, backend)
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
            if spec.get("cluster"):
                warnings.warn(
                    f"experiment '{self.name}' names the cluster '{spec['cluster']['name']}', which the "
                    f"{backend.name} backend ignores: it runs on this machine (cluster backends are to come)",
                    ClientWarning,
                    stacklevel=2,
                )
            pid = backend.start(self.folder, self.project.root, resume=resume)
        except BaseException:
            self.project.store.update_experiment(self.name, status=record.status, started_at=record.started_at)
            raise
        self._record_pid(pid, backend)
        return pid

    def _check_can_start(self, record: ExperimentRecord, *, resume: bool, fresh: bool) -> None:
        if resume and fresh:
            raise ClientError("--resume and --fresh contradict each other", hint="Give one of them.")
        if resume:
            if record.status == "finished":
                raise ClientError(
                    f"experiment '{self.name}' has finished; there is nothing to resume",
                    hint=f"Run it again from the start with 'tfcli experiment start -e {self.name} --fresh'.",
                )
            if not self.has_checkpoint():
                raise ClientError(
                    f"experiment '{self.name}' has no checkpoint to resume from",
                    hint=f"Start it without --resume: 'tfcli experiment start -e {self.name}'."
                    if record.status == "new"
                    else f"Start it afresh with 'tfcli experiment start -e {self.name} --fresh'.",
                )
        elif record.status != "new" and not fresh:
            resumable = record.status != "finished" and self.has_checkpoint()
            raise ClientError(
                f"experiment '{self.name}' has already run (status: {record.status})",
                hint="Use --resume to continue from its last checkpoint, or --fresh to start over."
                if resumable
                else "Use --fresh to start over (its results are discarded).",
            )

    def _refuse_a_live_worker(self, record: ExperimentRecord, backend: Any) -> None:
        """No second worker on the same results (nor --fresh deleting them under one), whatever the status says."""
        for pid in dict.fromkeys((record.pid, self.progress().get("pid"))):
            if pid and backend.alive(pid, self.folder):
                raise ClientError(
                    f"a worker of experiment '{self.name}' is still running (PID {pid}), though its status is "
                    f"'{record.status}'",
                    hint=f"Wait for it to end, or end it with 'kill {pid}'.",
                )

    def _record_pid(self, pid: int, backend: Any) -> None:
        """Write the new worker's PID, checked: only onto this start's row (running, no PID yet)."""
        store = self.project.store
        if store.update_experiment(self.name, expect=("running",), expect_pid=None, pid=pid):
            return
        current = store.experiment(self.name)
        if current is not None and current.status == "failed" and backend.alive(pid, self.folder):
            # judged dead while it started (a start slower than STARTING_SECONDS): it is not
            store.update_experiment(
                self.name, expect=("failed",), status="running", pid=pid, message=None, ended_at=None
            )
        # otherwise the worker has ended already and written its own status: that stands

    def _running_record(self, request: str) -> ExperimentRecord:
        """The row of a running experiment, once its worker's PID is known (it may be starting)."""
        deadline = time.monotonic() + STARTING_SECONDS
        while True:
            record = self.record()
            if record.status != "running":
                raise ClientError(f"experiment '{self.name}' is not running (status: {record.status})")
            if record.pid is not None:
                return record
            if time.monotonic() > deadline:
                raise ClientError(f"the worker of '{self.name}' has not started; cannot {request} it")
            time.sleep(0.05)

    def _signal(self, request: str) -> ExperimentRecord:
        """Ask the running worker to pause or stop; the row afterwards, which must say so."""
        record = self._running_record(request)
        backend = get_backend(record.backend)
        if not backend.signal(record.pid, request, SIGNAL_TIMEOUT):
            raise ClientError(
                f"the worker of '{self.name}' (PID {record.pid}) did not {request} within {SIGNAL_TIMEOUT:.0f} s",
                hint=f"See its log with 'tfcli experiment logs -e {self.name}'.",
            )
        after = self.record()
        wanted = {"pause": "paused", "stop": "stopped"}[request]
        if after.status == wanted:
            return after
        if after.status == "finished":
            raise ClientError(f"experiment '{self.name}' finished before it could {request}")
        reason = (after.message or "").splitlines()[0] if after.message else ""
        raise ClientError(
            f"experiment '{self.name}' did not {request}: it is {after.status}" + (f" ({reason})" if reason else ""),
            hint=f"See its log with 'tfcli experiment logs -e {self.name}'.",
        )

    def pause(self, project_id: str | None = None) -> ExperimentRecord:
        """Checkpoint the running experiment and end its worker; ``start(resume=True)`` continues it."""
        return self._signal("pause")

    def stop(self, no_download: bool = False) -> ExperimentRecord:
        """End the experiment for good (a running worker checkpoints first); download its results unless
        ``no_download`` (locally they are in place already)."""
        record = self.record()
        if record.status in ("stopped", "finished"):
            raise ClientError(f"experiment '{self.name}' is already {record.status}")
        if record.status == "new":
            raise ClientError(
                f"experiment '{self.name}' has not been started; there is nothing to stop",
                hint=f"Remove it with 'tfcli experiment delete -e {self.name}' if it is not wanted.",
            )
        if record.status == "running":
            record = self._signal("stop")
        elif not self.project.store.update_experiment(
            self.name, expect=(record.status,), status="stopped", pid=None, ended_at=time.time()
        ):
            raise ClientError(f"experiment '{self.name}' changed state meanwhile; try again")
        if not no_download and self.results.is_dir():
            self.download()
        return self.record()

    def download(self) -> Path:
        """The experiment's results (checkpoints, TensorBoard summaries, episode log) in ``results/``."""
        record = self.record()
        return get_backend(record.backend).download(self.folder)

    def delete(self) -> None:
        """Remove an experiment that is not running: its folder (if it still has one) and its row."""
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
