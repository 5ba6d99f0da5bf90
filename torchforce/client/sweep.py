"""Sweeps: a hyperparameter search over one experiment, its trials run as experiments by a background driver.

``tfcli sweep ...`` wraps this module, and scripts can use it directly::

    sweep = Sweep.create(project, "configs/sweeps/lr.yaml")   # validated completely (sweep_file.py)
    sweep.start()                                             # the driver, a detached process
    sweep.trials()                                            # ranked, read from the study at any time

A sweep's files are in the project's ``.tfcli/sweeps/``:

- ``NAME.json``: the resolved sweep file (``spec``) and the state of its driver (``driver``: ``status`` new, running,
  finished, stopped or failed; ``pid``, times, ``message``).
- ``NAME.db``: the Optuna study (SQLite, Optuna's RDB storage): the trials, their parameters, intermediate values
  (the mean return every 10% of a run's budget, keyed by that percentage) and values, and per trial the user
  attributes ``experiments`` (its runs), ``seed_values``, ``timesteps``, ``pruned_at``, ``error`` and
  ``interrupted``.
- ``NAME.log``: the driver's log. ``NAME.lock``: held alone (``flock``) by the one process that drives the trials:
  the driver, or ``tfcli sweep stop`` cleaning up after a driver that died; a look at the sweep (``show``,
  ``list``, the checks of ``start`` and ``stop``) shares it for a moment. ``NAME/``: the plots.

The driver (``python -I -m torchforce.client.sweep_driver ROOT NAME``, ``sweep_driver.py``) asks the study for a
trial, creates its runs as experiments ``<sweep>-t003-s0``, ``-s1``, ... (group ``<sweep>-t003``, the trial's
parameters set as ``--set`` would set them, seeds base + 0, 1, ...) and starts them with ``Experiment.start``. Those
names are the sweep's (``is_trial_name``): ``sweep new`` refuses a sweep while experiments have them, and
``Experiment.generate_locally`` (``experiment new``, groups) refuses them to anyone but the sweep's driver, until
``Sweep.delete`` (``tfcli sweep delete``) removes the sweep. A name taken all the same (a folder copied into
experiments/) neither ends the driver nor is touched: that trial fails as interrupted (``<name> was taken``) and its
parameters run again as the next trial, under that trial's names. The driver keeps at most ``parallel`` trials in
flight and reads their episode logs: every 10% of the budget the trial's mean return goes to the study
(``trial.report``), and a trial the pruner judges hopeless has its runs stopped and is marked PRUNED. A trial whose
runs all finish gets the metric, averaged over its seeds; one whose run fails or is stopped from outside FAILs. One
whose run is paused from outside (``tfcli experiment pause``) waits, and holds its place among the ``parallel``
trials, until that run is resumed (``tfcli experiment start -e RUN --resume``): the sweep cannot end before. The
budget counts trials that completed, were pruned or failed; the driver ends when it is spent.

Interruptions lose no budget, but an interrupted trial starts over. ``tfcli sweep stop`` makes the driver stop the
runs in flight, mark their trials FAIL (``interrupted: "stopped"``) and queue their parameters again; a trial whose
runs have all ended by then is finished as usual, its result kept. When the driver dies instead (a crash, a reboot),
its trials stay RUNNING in the study and their runs go on: ``tfcli sweep start`` then adopts every trial whose runs
are all still there, running or ended, and fails (``interrupted: "lost"``) and queues again those that lost one.
``tfcli sweep stop`` after such a driver interrupts only the trials with a run not yet ended, and leaves the others
RUNNING for the next driver to adopt. A queued trial is the next one run, as a new trial with the same parameters:
its runs are new experiments that start from the first timestep (the interrupted runs, and their checkpoints, are
not resumed).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchforce.client.errors import ClientError
from torchforce.client.experiment import Experiment, delete_runs, refuse_busy
from torchforce.client.experiment_file import NAME_PATTERN
from torchforce.client.project import MARKER, Project, write_json_atomically
from torchforce.client.sweep_file import (
    SweepSpec,
    check_not_gke,
    is_trial_name,
    load_sweep_file,
    resolve_sweep,
)
from torchforce.client.sweep_process import DRIVER_MODULE, hold_lock, is_driver, probe_lock, reap
from torchforce.client.sweep_space import optuna_module
from torchforce.client.trial_runs import (
    all_ended,
    counts_toward_budget,
    existing_runs,
    interrupt,
    stop_runs,
    timesteps_done,
)
from torchforce.spec import SpecError, did_you_mean

POLL_SECONDS = 0.5  # how often the driver reads its trials' runs
START_SECONDS = 60.0  # how long 'sweep start' waits for the driver to take over
STOP_SECONDS = 600.0  # how long 'sweep stop' waits for the driver (each run checkpoints before it stops)
LOCK_SECONDS = 5.0  # how long a driver or a stop's cleanup tries to take the lock (a probe shares it for a moment)
STATES = ("COMPLETE", "PRUNED", "RUNNING", "WAITING", "FAIL")  # the order trials are listed in after ranking


def spread(values: Sequence[float]) -> float | None:
    """The standard deviation of a trial's seed values (population; None for one seed)."""
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


@dataclass
class TrialRow:
    """One trial as ``sweep show`` lists it."""

    number: int
    state: str
    params: dict[str, Any]
    value: float | None
    seed_values: list[float]
    timesteps: int | None
    seconds: float | None
    experiments: list[str]
    note: str = ""
    counted: bool = False  # whether the budget counts it (see counts_toward_budget)
    best: bool = False

    @property
    def spread(self) -> float | None:
        return spread(self.seed_values)

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "spread": self.spread}


# ---------------------------------------------------------------------------------------------- the sweep


class Sweep:
    """The sweep ``name`` of ``project`` (see the module doc for its files)."""

    def __init__(self, project: Project, name: str) -> None:
        self.project = project
        self.name = name

    @staticmethod
    def folder_of(project: Project) -> Path:
        return project.root / MARKER / "sweeps"

    @property
    def state_file(self) -> Path:
        return self.folder_of(self.project) / f"{self.name}.json"

    @property
    def database(self) -> Path:
        return self.folder_of(self.project) / f"{self.name}.db"

    @property
    def log_file(self) -> Path:
        return self.folder_of(self.project) / f"{self.name}.log"

    @property
    def lock_file(self) -> Path:
        return self.folder_of(self.project) / f"{self.name}.lock"

    @property
    def plots_folder(self) -> Path:
        return self.folder_of(self.project) / self.name

    @property
    def best_config(self) -> Path:
        """Where the best trial's experiment is written, for ``tfcli experiment new -f <sweep>-best``."""
        return self.project.root / "configs" / "experiments" / f"{self.name}-best.json"

    @staticmethod
    def names(project: Project) -> list[str]:
        folder = Sweep.folder_of(project)
        if not folder.is_dir():
            return []
        return sorted(path.stem for path in folder.glob("*.json") if not path.name.startswith("."))  # not staging

    # ------------------------------------------------------------------ creating and loading

    @classmethod
    def create(cls, project: Project, file: str, *, name: str | None = None) -> Sweep:
        """Validate the sweep file ``file`` (a path, or a name in configs/sweeps/ or of a shipped example;
        ``name`` replaces its name), then create its study and its state file. On any error nothing is left."""
        optuna_module()
        raw, shown = load_sweep_file(project, file)
        spec = resolve_sweep(project, raw, name=name, file=shown)
        sweep = cls(project, spec.name)
        sweep._check_name_is_free()
        folder = cls.folder_of(project)
        folder.mkdir(parents=True, exist_ok=True)
        staging = folder / f".{spec.name}.{os.getpid()}"  # the study and the state file, made aside
        database, state_file = staging.with_suffix(".db"), staging.with_suffix(".json")
        try:
            optuna_module().create_study(
                study_name=spec.name, storage=sweep._storage(database), direction=spec.metric.direction
            )
            state = {"name": spec.name, "created_at": time.time(), "file": shown, "spec": spec.to_dict()}
            write_json_atomically(state_file, state | {"driver": {"status": "new"}})
            try:  # the name is claimed by the state file, never over another's
                os.link(state_file, sweep.state_file)
            except FileExistsError:
                raise ClientError(f"sweep '{spec.name}' already exists") from None
            sweep.lock_file.touch()
            os.replace(database, sweep.database)
        finally:
            database.unlink(missing_ok=True)
            state_file.unlink(missing_ok=True)
        return sweep

    def _check_name_is_free(self) -> None:
        hint = "Give another name with -n/--name."
        if self.state_file.exists() or self.database.exists():
            raise ClientError(f"sweep '{self.name}' already exists", hint=hint)
        taken = [r.name for r in self.project.store.experiments() if is_trial_name(self.name, r.name)]
        if taken:
            raise ClientError(
                f"the project has experiments named like the runs of a sweep '{self.name}' already "
                f"({', '.join(taken[:3])}{', ...' if len(taken) > 3 else ''})",
                hint=hint + " Or delete those experiments first.",
            )

    @staticmethod
    def owner_of_name(project: Project, name: str) -> str | None:
        """The sweep of ``project`` whose driver names its trials' groups or runs like ``name`` (``is_trial_name``),
        or None: ``Experiment.generate_locally`` keeps those names to it."""
        return next((sweep for sweep in Sweep.names(project) if is_trial_name(sweep, name)), None)

    @classmethod
    def load(cls, project: Project, name: str) -> Sweep:
        """The existing sweep ``name``; a ClientError with a did-you-mean where there is none."""
        sweep = cls(project, name)
        if not NAME_PATTERN.fullmatch(name) or not sweep.state_file.is_file():
            known = cls.names(project)
            guess = did_you_mean(name, known)
            raise ClientError(
                f"no sweep named '{name}' in project '{project.name}'",
                hint=(f"Did you mean '{guess}'? " if guess else "")
                + ("Known: " + ", ".join(known) + "." if known else "Create one with 'tfcli sweep new -f FILE'."),
            )
        return sweep

    def state(self) -> dict[str, Any]:
        try:
            state = json.loads(self.state_file.read_text())
        except (OSError, ValueError) as error:
            raise ClientError(f"the state file of sweep '{self.name}' cannot be read: {error}") from None
        if not isinstance(state, dict) or not isinstance(state.get("spec"), dict):
            raise ClientError(f"the state file of sweep '{self.name}' ({self.state_file}) is damaged")
        return state

    @property
    def spec(self) -> SweepSpec:
        """The sweep as created (checked again, cheaply: nothing is built)."""
        try:
            return resolve_sweep(self.project, self.state()["spec"], build=False, file=str(self.state_file))
        except SpecError as error:
            raise ClientError(f"the stored spec of sweep '{self.name}' is no longer valid: {error}") from None

    def _write_driver(self, **driver: Any) -> None:
        state = self.state()
        write_json_atomically(self.state_file, {**state, "driver": driver})

    # ------------------------------------------------------------------ the study

    def _storage(self, database: Path | None = None) -> Any:
        """Optuna's storage of the study: the sweep's database, or ``database`` (one being made)."""
        optuna = optuna_module()
        if database is None and not self.database.is_file():
            raise ClientError(f"the study of sweep '{self.name}' is missing ({self.database})")
        url = f"sqlite:///{database or self.database}"
        return optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 30}})

    def study(self, spec: SweepSpec | None = None) -> Any:
        """The sweep's Optuna study, with the sampler (see ``Sampler.build``) and pruner of its spec."""
        optuna = optuna_module()
        spec = spec or self.spec
        with self.reading():
            study = optuna.load_study(study_name=self.name, storage=self._storage(), pruner=spec.pruner.build())
            study.sampler = spec.sampler.build(len(study.get_trials(deepcopy=False)))
            return study

    @contextmanager
    def reading(self) -> Iterator[None]:
        """A study that cannot be read (a damaged or foreign database file) is a ClientError naming the file."""
        from sqlalchemy.exc import SQLAlchemyError  # optuna's storage layer

        try:
            yield
        except (SQLAlchemyError, KeyError) as error:
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise ClientError(
                f"the study of sweep '{self.name}' cannot be read ({self.database}): {reason}",
                hint="Restore the file from a backup; the trials' experiments are unharmed.",
            ) from None

    def counts(self, study: Any = None) -> dict[str, int]:
        """Trials per state, and ``counted``: those the budget counts (all but the interrupted ones)."""
        study = study or self.study()
        counts = dict.fromkeys(STATES, 0) | {"counted": 0}
        with self.reading():
            trials = study.get_trials(deepcopy=False)
        for trial in trials:
            counts[trial.state.name] = counts.get(trial.state.name, 0) + 1
            counts["counted"] += counts_toward_budget(trial)
        return counts

    # ------------------------------------------------------------------ the driver

    def driver_running(self) -> bool:
        """Whether a process holds the sweep's lock: its driver (or a 'sweep stop' cleaning up after one). The look
        shares the lock, so looks at once (sweep show, list) never take each other for a driver."""
        with probe_lock(self.lock_file) as free:
            return not free

    def status(self) -> tuple[str, str | None]:
        """The driver's status and message. A driver that ended without saying so (a crash, a kill) shows as
        failed."""
        driver = self.state().get("driver") or {}
        status, message = str(driver.get("status", "new")), driver.get("message")
        if status == "running" and not self.driver_running():
            return "failed", f"the driver ended unexpectedly; 'tfcli sweep start --sweep {self.name}' continues it"
        return status, message

    def start(self) -> int:
        """Start the driver in the background (continuing the sweep where it stopped); returns its PID once it has
        taken the sweep over."""
        spec = self.spec
        if spec.cluster is not None:  # a sweep made before GKE clusters were refused, or a cluster made again on GKE
            check_not_gke(self.project, spec.cluster)
        if self.driver_running():
            pid = (self.state().get("driver") or {}).get("pid")
            raise ClientError(
                f"sweep '{self.name}' is already running" + (f" (driver PID {pid})" if pid else ""),
                hint=f"Stop it with 'tfcli sweep stop --sweep {self.name}'.",
            )
        counts = self.counts(self.study(spec))
        if counts["counted"] >= spec.trials and not counts["RUNNING"] and not counts["WAITING"]:
            raise ClientError(
                f"sweep '{self.name}' has run its {spec.trials} trials",
                hint=f"See them with 'tfcli sweep show --sweep {self.name}'.",
            )
        command = [sys.executable, "-I", "-m", DRIVER_MODULE, str(self.project.root), self.name]
        environment = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        with open(self.log_file, "ab") as log:
            log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} start ===\n".encode())
            log.flush()
            process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.folder_of(self.project),  # -I keeps it off the path; no Python files there anyway
                env=environment,
                start_new_session=True,  # detached: it outlives this call and its terminal
            )
        deadline = time.monotonic() + START_SECONDS
        while (self.state().get("driver") or {}).get("pid") != process.pid:
            if process.poll() is not None or time.monotonic() > deadline:
                tail = "\n".join(self.log_file.read_text(errors="replace").strip().splitlines()[-8:])
                raise ClientError(f"the driver of sweep '{self.name}' did not start; its log ends:\n{tail}")
            time.sleep(0.05)
        return process.pid

    def stop(self, timeout: float = STOP_SECONDS) -> str:
        """Stop the sweep: its driver stops the trials in flight (their runs checkpoint and end) and ends; the
        trials' parameters are queued to run again at the next start, as new trials that start over (the stopped
        runs are not resumed). After a driver that died, this does that cleanup itself, for the trials with a run
        not yet ended: one whose runs have all ended (they went on without a driver) stays RUNNING, and the next
        driver adopts it and takes its result, as a live driver would have. Returns the status afterwards
        ("stopped")."""
        if self.driver_running():
            pid = (self.state().get("driver") or {}).get("pid")
            if not isinstance(pid, int) or not is_driver(pid, self):
                raise ClientError(f"another process is stopping sweep '{self.name}' right now; try again")
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while self.driver_running():
                if time.monotonic() > deadline:
                    raise ClientError(
                        f"the driver of sweep '{self.name}' (PID {pid}) did not stop within {timeout:.0f} s",
                        hint=f"See its log: {self.log_file}",
                    )
                time.sleep(0.1)
            while is_driver(pid, self) and time.monotonic() < deadline:  # its lock goes a moment before it
                time.sleep(0.05)
            reap(pid)
            return self.status()[0]
        lock = hold_lock(self.lock_file, LOCK_SECONDS)  # waits out a look at the sweep, not a driver
        if lock is None:
            raise ClientError(f"sweep '{self.name}' was started again meanwhile; try again")
        try:
            spec = self.spec
            status = str((self.state().get("driver") or {}).get("status", "new"))  # "running": a driver that died
            study = self.study(spec)
            left = study.get_trials(deepcopy=False, states=(optuna_module().trial.TrialState.RUNNING,))
            if not left and status not in ("running", "failed"):
                raise ClientError(f"sweep '{self.name}' is not running (status: {status})")
            for trial in left:
                names = trial.user_attrs.get("experiments") or []
                runs = existing_runs(self.project, names)
                if names and len(runs) == len(names) and all_ended(runs):
                    print(f"trial {trial.number}'s runs have all ended; the next 'sweep start' takes its result")
                    continue
                stop_runs(runs, print)
                interrupt(study, trial, "stopped")
            driver = self.state().get("driver") or {}
            message = f"stopped by 'tfcli sweep stop'; 'tfcli sweep start --sweep {self.name}' continues it"
            self._write_driver(**{**driver, "status": "stopped", "ended_at": time.time(), "message": message})
        finally:
            os.close(lock)
        return "stopped"

    # ------------------------------------------------------------------ deleting

    def trial_runs(self) -> list[Experiment]:
        """The experiments of the project that are this sweep's trials' runs: those named as its driver names them
        (``is_trial_name``), which no one else may take while the sweep exists (a damaged one too, to be deleted)."""
        names = [r.name for r in self.project.store.experiments() if is_trial_name(self.name, r.name)]
        return [Experiment.load(self.project, name, damaged=True) for name in names]

    def delete(self, *, keep_trials: bool = False) -> list[str]:
        """Delete the sweep: its trials' runs (unless ``keep_trials``: they stay as ordinary experiments), then its
        study, log, plots and lock, and last its state file, which frees its name and its trials' names. Refused,
        nothing deleted, while its driver runs or a run of its trials runs or is queued. A run that cannot be
        deleted stops the deletion with the sweep still whole but for the runs deleted before it, so deleting it
        again finishes the work. Returns the names of its trials' runs: deleted, or with ``keep_trials`` kept.
        ``configs/experiments/<sweep>-best.json`` is the user's now, and stays."""
        stop_first = f"Stop it first with 'tfcli sweep stop --sweep {self.name}'."
        if self.driver_running():
            raise ClientError(f"sweep '{self.name}' is running; nothing was deleted", hint=stop_first)
        lock = hold_lock(self.lock_file, LOCK_SECONDS)  # no driver starts meanwhile
        if lock is None:
            raise ClientError(f"sweep '{self.name}' was started again meanwhile; nothing was deleted", hint=stop_first)
        try:
            runs, whole = self.trial_runs(), f"sweep '{self.name}'"
            if keep_trials:  # they stay, but a run going on would write into what is deleted
                refuse_busy(runs, whole=whole, stop_first=stop_first)
            else:
                again = f"Delete the rest again with 'tfcli sweep delete --sweep {self.name}'."
                delete_runs(runs, whole=whole, stop_first=stop_first, again=again)
            shutil.rmtree(self.plots_folder, ignore_errors=True)
            for path in (self.log_file, *(Path(f"{self.database}{end}") for end in ("-journal", "-wal", "-shm"))):
                path.unlink(missing_ok=True)
            self.database.unlink(missing_ok=True)
            self.lock_file.unlink(missing_ok=True)
            self.state_file.unlink(missing_ok=True)  # last: until it goes, the sweep is there to be deleted again
        finally:
            os.close(lock)
        return [run.name for run in runs]

    # ------------------------------------------------------------------ results

    def trials(self, spec: SweepSpec | None = None) -> list[TrialRow]:
        """Every trial, ranked: completed ones best first, then pruned, running, waiting and failed ones."""
        spec = spec or self.spec
        maximize = spec.metric.direction == "maximize"
        with self.reading():
            rows = [self._row(trial, spec) for trial in self.study(spec).get_trials(deepcopy=False)]

        def rank(row: TrialRow) -> tuple[int, float, int]:
            value = row.value if row.state in ("COMPLETE", "PRUNED") and row.value is not None else 0.0
            return (
                STATES.index(row.state) if row.state in STATES else len(STATES),
                -value if maximize else value,
                row.number,
            )

        rows.sort(key=rank)
        if rows and rows[0].state == "COMPLETE":
            rows[0].best = True
        return rows

    def _row(self, trial: Any, spec: SweepSpec) -> TrialRow:
        attrs = trial.user_attrs
        state = trial.state.name
        end = trial.datetime_complete.timestamp() if trial.datetime_complete else time.time()
        seconds = end - trial.datetime_start.timestamp() if trial.datetime_start else None
        timesteps = attrs.get("timesteps")
        if state == "RUNNING":
            runs = existing_runs(self.project, attrs.get("experiments", []))
            timesteps = max((timesteps_done(run) for run in runs), default=None)
        note = ""
        if state == "PRUNED":
            last = trial.value
            note = f"pruned at {attrs.get('pruned_at', '?')}%" + (
                f" (mean return {last:.1f})" if last is not None else ""
            )
        elif state == "FAIL":
            interrupted = attrs.get("interrupted")
            note = f"interrupted ({interrupted}); queued again" if interrupted else str(attrs.get("error") or "failed")
        elif state == "WAITING":
            retry = attrs.get("retry_of")
            note = (f"trial {retry} again; " if retry is not None else "") + "queued to run next"
        return TrialRow(
            number=trial.number,
            state=state,
            params=spec.values(trial.params if state != "WAITING" else trial.system_attrs.get("fixed_params", {})),
            value=trial.value if state in ("COMPLETE", "PRUNED") else None,
            seed_values=list(attrs.get("seed_values") or []),
            timesteps=timesteps,
            seconds=seconds,
            experiments=list(attrs.get("experiments") or []),
            note=note.splitlines()[0] if note else "",
            counted=counts_toward_budget(trial),
        )

    def write_best_config(self, rows: list[TrialRow] | None = None) -> Path | None:
        """Write the best trial's experiment (its first seed's, as created, without name and group) to
        ``configs/experiments/<sweep>-best.json`` when it is not there as it should be; None while no trial has
        completed."""
        from torchforce.client.experiment_file import resolve_experiment
        from torchforce.client.overrides import apply_to_experiment

        spec = self.spec
        best = next((row for row in (rows if rows is not None else self.trials(spec)) if row.best), None)
        if best is None:
            return None
        raw, overrides = spec.run_raw(best.number, 0, best.params)
        resolved = resolve_experiment(self.project, apply_to_experiment(self.project, raw, overrides), build=False)
        shown = ", ".join(f"{key}={json.dumps(value)}" for key, value in best.params.items())
        value = f"{best.value:.4g}" + (f" ± {best.spread:.3g}" if best.spread is not None else "")
        config = {key: v for key, v in resolved.items() if key not in ("name", "group")} | {
            "seed": spec.base_seed,
            "description": f"Best trial {best.number} of sweep '{self.name}' ({spec.metric.name} {value}): {shown}",
        }
        path = self.best_config
        try:
            current = json.loads(path.read_text())
        except (OSError, ValueError):
            current = None
        if current != config:
            write_json_atomically(path, config)
        return path

    def plot(self, folder: Path | None = None) -> tuple[list[Path], list[str]]:
        """The history plot (each trial's value, and the best so far) and the importance plot (Optuna's fANOVA
        importance of each key of the space) as PNG files in ``folder`` (default: ``.tfcli/sweeps/NAME/``).
        Returns the files written and why any was not."""
        from torchforce.client.sweep_plots import plot_history, plot_importance

        optuna = optuna_module()
        spec = self.spec
        rows = self.trials(spec)
        skipped, importances = [], None
        if not any(row.state in ("COMPLETE", "PRUNED") and row.value is not None for row in rows):
            skipped.append("history: no trial has completed yet")
        complete = sum(row.state == "COMPLETE" for row in rows)
        if complete < 2:
            skipped.append(
                f"importance: it needs 2 completed trials, there {'is' if complete == 1 else 'are'} {complete}"
            )
        else:
            try:
                evaluator = optuna.importance.FanovaImportanceEvaluator(seed=0)  # the same plot every time
                with self.reading():
                    importances = optuna.importance.get_param_importances(self.study(spec), evaluator=evaluator)
            except (ValueError, RuntimeError) as error:
                skipped.append(f"importance: {error}")
        written: list[Path] = []
        folder = folder or self.plots_folder
        title = f"sweep {self.name}"
        if len(skipped) < 2:  # something to draw
            folder.mkdir(parents=True, exist_ok=True)
        if not any(reason.startswith("history") for reason in skipped):
            written.append(plot_history(rows, spec.metric, folder / "history.png", title=title))
        if importances is not None:
            written.append(plot_importance(importances, folder / "importance.png", title=title))
        return written, skipped
