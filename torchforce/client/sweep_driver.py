"""A sweep's driver: the background process that runs its trials (``python -I -m torchforce.client.sweep_driver ROOT
NAME``, started by ``Sweep.start``). It asks the study for trials, runs each as experiments, reports their progress
to the pruner and their results to the study, and ends when the budget is spent or it is asked to stop; the module
doc of ``sweep.py`` says how, and how a driver that died is taken over."""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from torchforce.client.errors import ClientError
from torchforce.client.experiment import Experiment
from torchforce.client.experiment_state import ENDED
from torchforce.client.project import Project
from torchforce.client.report import read_episodes
from torchforce.client.sweep import LOCK_SECONDS, POLL_SECONDS, Sweep
from torchforce.client.sweep_file import REPORT_PERCENTS
from torchforce.client.sweep_process import DRIVER_MODULE, hold_lock
from torchforce.client.sweep_space import optuna_module
from torchforce.client.trial_runs import (
    all_ended,
    counts_toward_budget,
    existing_runs,
    interrupt,
    stop_runs,
    timesteps_done,
)
from torchforce.client.trial_values import RunProgress, final_value, no_value, report_and_judge
from torchforce.spec import SpecError


def _mark_passed(runs: Sequence[Experiment]) -> int:
    """The last mark of ``REPORT_PERCENTS`` (0: none) all ``runs`` have passed, as their progress files say."""
    reached = 1.0
    for run in runs:
        progress, spec = run.progress(), run.checked_spec
        parts = []
        for counter, budget in (("timesteps", "total_timesteps"), ("episodes", "episodes")):
            done = progress.get(counter)
            if spec.get(budget) and isinstance(done, int) and not isinstance(done, bool):
                parts.append(done / spec[budget])
        reached = min(reached, max(parts, default=0.0))
    return max((percent for percent in REPORT_PERCENTS if percent <= reached * 100), default=0)


@dataclass
class Flight:
    """A trial in flight: its Optuna trial, its runs (one experiment per seed) and the marks it has reported."""

    trial: Any
    runs: list[Experiment]
    reported: set[int] = field(default_factory=set)
    checked: int = 0  # the last mark (percent of the budget) its runs' logs were read at


class Driver:
    """Runs a sweep's trials until its budget is spent or it is asked to stop (SIGTERM); see the module doc."""

    def __init__(self, sweep: Sweep, *, poll: float = POLL_SECONDS) -> None:
        self.sweep = sweep
        self.project = sweep.project
        self.spec = sweep.spec
        self.poll = poll
        self.flights: dict[int, Flight] = {}
        self.stopping = False
        self.started_at = time.time()
        self.study: Any = None

    def log(self, text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)

    def run(self) -> int:
        """Drive the sweep; the exit code of the driver process (0: finished or stopped as asked)."""
        lock = hold_lock(self.sweep.lock_file, LOCK_SECONDS)
        if lock is None:
            self.log("another process drives this sweep; this driver ends")
            return 1
        try:
            signal.signal(signal.SIGTERM, self._request_stop)
            signal.signal(signal.SIGINT, self._request_stop)
            self._record("running")
            try:
                self.study = self.sweep.study(self.spec)
                self._adopt()
                status, message = self._drive()
            except Exception as error:  # noqa: BLE001 - whatever ends the driver is recorded, and the runs go on
                self.log(traceback.format_exc().rstrip())
                self._record("failed", f"{type(error).__name__}: {error}".splitlines()[0])
                return 1
            self._record(status, message)
            self.log(message)
            return 0
        finally:
            os.close(lock)

    def _request_stop(self, number: int, frame: Any) -> None:
        self.stopping = True

    def _record(self, status: str, message: str | None = None) -> None:
        ended = None if status == "running" else time.time()
        self.sweep._write_driver(
            status=status, pid=os.getpid(), started_at=self.started_at, ended_at=ended, message=message
        )

    def _drive(self) -> tuple[str, str]:
        """The main loop: poll the trials in flight, start new ones while the budget and ``parallel`` allow."""
        while True:
            if self.stopping:
                for flight in list(self.flights.values()):
                    self._stop_flight(flight)
                self.flights.clear()
                return (
                    "stopped",
                    f"stopped by 'tfcli sweep stop'; 'tfcli sweep start --sweep {self.sweep.name}' continues it",
                )
            for flight in list(self.flights.values()):
                self._poll(flight)
            if self._counted() >= self.spec.trials and not self.flights:
                best = self.sweep.write_best_config()
                return "finished", f"ran its {self.spec.trials} trials" + (
                    f"; the best experiment is in {best.relative_to(self.project.root)}" if best else ""
                )
            while (
                not self.stopping
                and len(self.flights) < self.spec.parallel
                and self._counted() + len(self.flights) < self.spec.trials
            ):
                self._launch()
            time.sleep(self.poll)

    def _stop_flight(self, flight: Flight) -> None:
        """Stop a trial in flight for 'sweep stop': its runs stop and its parameters are queued to run again. A
        trial whose runs had all ended before the stop reached them (since the last poll) is finished as ``_poll``
        finishes it, its result kept."""
        if not all_ended(flight.runs):
            stop_runs(flight.runs, self.log)
            if not all_ended(flight.runs, ("finished",)):  # unless they all finished in the meantime
                interrupt(self.study, flight.trial, "stopped")
                self.log(f"trial {flight.trial.number} stopped; its parameters are queued to run again")
                return
        self._poll(flight)

    def _counted(self) -> int:
        return sum(counts_toward_budget(trial) for trial in self.study.get_trials(deepcopy=False))

    def _adopt(self) -> None:
        """Take over the trials a driver before this one left RUNNING: those whose runs are all there go on, the
        others are failed and queued again."""
        optuna = optuna_module()
        for trial in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            names = trial.user_attrs.get("experiments") or []
            runs = existing_runs(self.project, names)
            whole = bool(names) and len(runs) == len(names) and all(run.record().status != "new" for run in runs)
            if whole:
                live = optuna.trial.Trial(self.study, trial._trial_id)
                self.flights[trial.number] = Flight(live, runs, set(trial.intermediate_values))
                self.log(f"trial {trial.number} adopted: its runs {', '.join(names)} go on")
            else:
                stop_runs(runs, self.log)
                interrupt(self.study, trial, "lost")
                self.log(f"trial {trial.number} lost its runs with the last driver; its parameters are queued again")

    def _launch(self) -> None:
        """Ask the study for a trial, create its runs and start them. A trial whose experiment the spec checks
        refuse fails (it spends budget); one with a run's name taken (an experiment folder copied in by hand) is
        queued again, to run under the next trial's names; one that cannot start for another reason is queued again
        and the error ends the driver (a missing cluster would fail every trial alike)."""
        from torchforce.client.overrides import apply_to_experiment

        optuna = optuna_module()
        trial = self.study.ask({dimension.key: dimension.distribution() for dimension in self.spec.space})
        values = self.spec.values(trial.params)
        names = self.spec.run_names(trial.number)
        taken = [name for name in names if self._taken(name)]
        if taken:  # never the sweep's own (trial numbers are not reused): it is not to be touched
            interrupt(self.study, trial, f"{taken[0]} was taken")
            self.log(
                f"trial {trial.number} not started: the name {taken[0]} is taken by an experiment this sweep did not "
                "make; its parameters are queued to run again as the next trial"
            )
            return
        trial.set_user_attr("experiments", names)
        runs: list[Experiment] = []
        try:
            for index in range(self.spec.seeds_per_trial):
                raw, overrides = self.spec.run_raw(trial.number, index, values)
                experiment = Experiment(self.project, **raw)
                experiment.raw = apply_to_experiment(self.project, experiment.raw, overrides)
                experiment.generate_locally(sweep=self.sweep.name)
                runs.append(experiment)
            for run in runs:
                run.start(cluster=self.spec.cluster or "local")
        except SpecError as error:
            stop_runs(runs, self.log)
            trial.set_user_attr("error", str(error).splitlines()[0])
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            self.log(f"trial {trial.number} failed: its experiment is refused: {error}")
            return
        except BaseException:
            stop_runs(runs, self.log)
            interrupt(self.study, trial, "not started")
            raise
        self.flights[trial.number] = Flight(trial, runs)
        shown = ", ".join(f"{key}={json.dumps(value)}" for key, value in values.items())
        self.log(f"trial {trial.number} started ({', '.join(names)}): {shown}")

    def _taken(self, name: str) -> bool:
        """Whether an experiment the project knows, or a folder in experiments/ (copied there by hand), has
        ``name``."""
        return self.project.store.experiment(name) is not None or self.project.experiment_folder(name).exists()

    def _poll(self, flight: Flight) -> None:
        """Read a trial's runs: report its progress to the study (pruning it if the pruner says so), and finish
        it once its runs have ended."""
        optuna = optuna_module()
        trial, runs = flight.trial, flight.runs
        try:
            records = [run.record() for run in runs]
        except ClientError as error:  # a run deleted under the sweep
            stop_runs(existing_runs(self.project, [run.name for run in runs]), self.log)
            trial.set_user_attr("error", error.message)
            self._end(flight, optuna.trial.TrialState.FAIL, f"failed: {error.message}")
            return
        # a run is broken when it failed, was stopped, or is new again (taken out of the queue, or the queue could
        # not start it): its trial would wait for it forever
        broken = [
            (run, record)
            for run, record in zip(runs, records, strict=True)
            if record.status in ("failed", "stopped", "new")
        ]
        if broken:
            stop_runs(runs, self.log)
            run, record = broken[0]
            status = "left the queue" if record.status == "new" else record.status
            reason = f"{run.name} {status}" + (f": {record.message.splitlines()[0]}" if record.message else "")
            trial.set_user_attr("error", reason)
            self._end(flight, optuna.trial.TrialState.FAIL, f"failed: {reason}")
            return
        ended = all(record.status in ENDED for record in records)
        mark = 100 if ended else _mark_passed(runs)
        if mark > flight.checked:  # the episode logs are read only when a mark has been passed
            flight.checked = mark
            progress = [
                RunProgress(
                    read_episodes(run.episode_log()),
                    run.checked_spec.get("total_timesteps"),
                    run.checked_spec.get("episodes"),
                    ended=record.status in ENDED,
                )
                for run, record in zip(runs, records, strict=True)
            ]
            pruned_at = report_and_judge(trial, progress, self.spec.metric.window, flight.reported)
            if pruned_at is not None:
                stop_runs(runs, self.log)
                trial.set_user_attr("pruned_at", pruned_at)
                self._end(flight, optuna.trial.TrialState.PRUNED, f"pruned at {pruned_at}% of its budget")
                return
        if not ended:
            return
        values = final_value(runs, self.spec.metric.name, self.spec.metric.window)
        if any(math.isnan(value) for value in values):
            missing = runs[next(i for i, value in enumerate(values) if math.isnan(value))]
            trial.set_user_attr("error", no_value(missing, self.spec.metric.name, self.spec.metric.window))
            self._end(flight, optuna.trial.TrialState.FAIL, f"failed: {trial.user_attrs['error']}")
            return
        trial.set_user_attr("seed_values", values)
        mean = sum(values) / len(values)
        self._end(flight, optuna.trial.TrialState.COMPLETE, f"complete: {self.spec.metric.name} {mean:.4g}", mean)
        self.sweep.write_best_config()

    def _end(self, flight: Flight, state: Any, text: str, value: float | None = None) -> None:
        flight.trial.set_user_attr("timesteps", max(timesteps_done(run) for run in flight.runs))
        self.study.tell(flight.trial, value, state=state)
        del self.flights[flight.trial.number]
        self.log(f"trial {flight.trial.number} {text}")


def main(argv: Sequence[str] | None = None) -> int:
    """The driver process: ``python -I -m torchforce.client.sweep_driver PROJECT_ROOT SWEEP``."""
    parser = argparse.ArgumentParser(
        prog=f"python -m {DRIVER_MODULE}",
        description="The driver of a sweep, as 'tfcli sweep start' runs it in the background: it runs the sweep's "
        "trials until its budget is spent.",
    )
    parser.add_argument("root", help="the project's folder")
    parser.add_argument("name", help="the sweep")
    parser.add_argument("--poll", type=float, default=POLL_SECONDS, help="seconds between reads of the trials' runs")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=optuna_module().exceptions.ExperimentalWarning)
    return Driver(Sweep.load(Project(args.root), args.name), poll=args.poll).run()


if __name__ == "__main__":
    sys.exit(main())
