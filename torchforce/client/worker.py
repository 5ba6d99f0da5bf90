"""The worker: runs one experiment from its ``experiment.json`` and writes everything under ``results/``.

    python -I -m torchforce.client.worker EXPERIMENT_FOLDER [--project ROOT] [--resume | --resume-if-any]
        [--max-restarts N] [--hold-after-pause] [--log-file] [--modules FOLDER] [--trust-pickle]

It is what every backend runs: the local backend as a detached process, the Ray backend as a Ray job (then the
folder is on the cluster's storage). With ``--project`` it records the run's end in the project's state database,
and starts the project's next queued runs, its slot being free (torchforce/client/queue.py); without (a Ray job, or
a supervised run) the client reads it from ``progress.json``. Results:

- ``episodes.jsonl``: one JSON line per finished episode (episode, timesteps, worker, return, length, wall_time),
  in the file within a second of the episode's end (whole lines; readers leave out a last line still without its
  newline). A resumed run cuts it back to the checkpoint's episode count first: those after it are played again;
- ``evaluations.jsonl``: with the experiment's ``evaluation``, one JSON line per evaluation round
  (``PeriodicEvaluation``), cut back to the checkpoint's timestep on resume, as the episode log;
- ``progress.json``: counters, recent mean return and steps/s, rewritten about once a second (a NaN or infinite
  return, a diverged run's, as null: JSON has no NaN);
- ``checkpoints/<timestep>/``: the agent's whole state plus the runner's and the environments' state, every
  ``saver_frequency``, when paused or stopped, and when an evaluation is the best so far;
  ``checkpoints/latest.json`` points at the newest complete one, ``checkpoints/best.json`` at the best evaluated
  one (never pruned);
- ``summaries/``: TensorBoard event files (a resumed run purges what the earlier one wrote after its checkpoint):
  the agent's scalars, ``run/steps_per_second`` and ``run/mean_return_100`` with every progress line,
  ``evaluation/mean_return`` and ``evaluation/std_return``, and the run's hyperparameters (the resolved spec's
  scalar fields) for the HParams dashboard, measured by ``run/mean_return_100``;
- ``mlflow.json``: with the experiment's ``mlflow``, the MLflow run it is mirrored into (``tracking.MlflowRun``);
- a Gymnasium or Atari monitor's records (the environment's ``monitor``, a folder of the results): a new
  run starts them afresh, a resumed run appends to them, numbering on, and keeps those of episodes after its
  checkpoint, which happened (``torchforce.client.monitor``);
- ``worker.log``: this process's log, with a progress line every few seconds (episode, timesteps, steps/s, mean
  return of the last 100 episodes), and DEBUG lines when the experiment says ``debug_logging``.

Signals: SIGUSR1 (or SIGINT) pauses (checkpoint, status ``paused``, exit 0 or, with ``--hold-after-pause``, hold);
SIGTERM stops (checkpoint, status ``stopped``); so does a ``results/control.json`` saying ``{"request": "pause"}``
or ``"stop"`` (how the Ray backend asks, as a job's process is out of its reach), read about once a second. The
local backend starts the worker with these signals blocked and the worker unblocks them once its handlers are in
place, so one sent while it starts is handled then, instead of killing it.

Resuming restores the checkpoint exactly (model, optimizer, memory, counters, RNG states, the environments and
the episodes in progress), so a paused run ends as an uninterrupted one would. The multi-threaded run mode runs
``num_workers`` worker agents, one environment each, sharing the model of the first (``ThreadedRunner``); its
checkpoints hold that agent (the shared model and optimizers) and the history, and a resumed run starts the workers
on new episodes: threads interleave differently every time, so such a run is not reproducible anyway. The
distributed run mode starts a private Ray cluster on this machine (loopback only) with ``num_parameter_servers``
parameter servers and ``num_workers`` workers of ``num_environments`` environments each (``DistributedRunner``)
on a private Ray started on this machine (loopback only), or in the job's cluster when the worker is a Ray job; its
checkpoints hold the servers' model (as the agent), every Ray worker's agent (optimizer, memory, counters, RNG
states) and the history, and a resumed run loads them all back, the workers starting new episodes.

``--max-restarts N`` supervises the run: the worker runs in a child process, and when that ends without having
finished, paused or stopped (a crash, a ``kill -9``, a lost node), it is started again from the last checkpoint,
up to N times; ``progress.json`` counts the restarts. The supervisor's PID is the run's: when it dies (killed, even
with -9), its child is asked to stop (``signals.stop_with_the_supervisor``), and checkpoints and ends ``stopped``.

``--resume-if-any`` resumes from ``results/checkpoints/latest.json`` when there is one and starts a new run
otherwise (the log says which); a new run then drops what an earlier attempt that left no checkpoint logged
(``episodes.jsonl``, the summaries). It is how a run that its cluster starts again by itself (a GKE RayJob resumed
after a suspension, or after a lost pod) continues: the same command line serves the first run and every later
one. With ``--max-restarts`` the first child gets the flag, the restarts resume anyway.

``--hold-after-pause``: when the run ends because it was asked to pause (a signal or ``control.json``), the worker
does not exit once the checkpoint and ``progress.json`` (state ``paused``) are written and the run is closed: it
holds, asleep, until it is killed, so that the job that runs it stays alive until its cluster suspends it (KubeRay
deletes the pod). While it holds, ``control.json`` saying ``{"request": "stop"}`` ends it (exit 0, state
``stopped``; the pause's checkpoint stands), and SIGTERM or SIGINT ends it leaving the state ``paused`` (exit 0:
how a pod is deleted); SIGUSR1 (a pause) changes nothing. A stop request, or the run finishing, exits as without it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

from torchforce.client.checkpoints import Checkpoints
from torchforce.client.experiment_run import RESTARTS_VARIABLE, ExperimentRun
from torchforce.client.modules import use_modules
from torchforce.client.signals import SUPERVISOR_VARIABLE, Signals, control_request, stop_with_the_supervisor

LOG = logging.getLogger("torchforce.worker")
WORKER_MODULE = "torchforce.client.worker"
HOLD_POLL_SECONDS = 1.0  # --hold-after-pause: how often a held worker looks at control.json


def _record(project: Path | None, name: str, status: str, message: str | None) -> None:
    """The run's end in the project's state database, when the worker was given one; then its slot is free, and
    the next queued runs of the project start (torchforce/client/queue.py)."""
    if project is None:
        return
    from torchforce.client.store import Store

    ended = None if status == "paused" else time.time()
    Store(project / ".tfcli" / "state.db").update_experiment(
        name, status=status, pid=None, message=message, ended_at=ended
    )
    _move_the_queue_on(project)


def _move_the_queue_on(root: Path) -> None:
    """Start the queued runs that fit now; a failure is logged, never this run's outcome."""
    from torchforce.client.errors import ClientWarning
    from torchforce.client.project import Project
    from torchforce.client.queue import promote

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ClientWarning)
            started = promote(Project(root))
    except Exception:  # noqa: BLE001 - the run has ended as recorded; the queue moves on at the next tfcli command
        LOG.warning("starting the next queued run failed:\n%s", traceback.format_exc())
        return
    for warning in caught:
        if issubclass(warning.category, ClientWarning):  # (what a queued start that failed says)
            LOG.warning("%s", warning.message)
    if started:
        LOG.info("started from the queue: %s", ", ".join(started))


def _final_state(folder: Path) -> str | None:
    try:
        return json.loads((folder / "results" / "progress.json").read_text()).get("state")
    except (OSError, ValueError, AttributeError):
        return None


def hold(folder: Path, project: Path | None) -> int:
    """``--hold-after-pause``: stay alive, asleep, after a pause, until killed (SIGTERM, SIGINT: exit 0, the state
    stays ``paused``) or until ``control.json`` asks to stop (exit 0, state ``stopped``, the pause's checkpoint
    standing). A pause asked again (SIGUSR1, ``control.json``) changes nothing."""
    from torchforce.client.project import write_json_atomically

    ended: list[int] = []
    signal.signal(signal.SIGTERM, lambda number, _frame: ended.append(number))
    signal.signal(signal.SIGINT, lambda number, _frame: ended.append(number))
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    results = folder / "results"
    LOG.info("paused; holding (--hold-after-pause) until killed or until results/control.json asks to stop")
    while True:
        if control_request(results) == "stop":
            try:
                progress = json.loads((results / "progress.json").read_text())
            except (OSError, ValueError):
                progress = {}
            progress = progress if isinstance(progress, dict) else {}
            write_json_atomically(
                results / "progress.json",
                {**progress, "state": "stopped", "pid": os.getpid(), "updated_at": time.time()},
            )
            (results / "control.json").unlink(missing_ok=True)  # answered
            _record(project, folder.name, "stopped", None)
            LOG.info("stop requested while holding: experiment %s stopped (at the pause's checkpoint)", folder.name)
            return 0
        if ended or Signals.request == "stop":  # (the latter: a SIGTERM that came before these handlers)
            break
        time.sleep(HOLD_POLL_SECONDS)
    how = signal.Signals(ended[0]).name if ended else "SIGTERM"
    LOG.info("%s while holding: exiting, experiment %s stays paused", how, folder.name)
    return 0


def supervise(args: argparse.Namespace) -> int:
    """Run the experiment in a child worker; when it ends without finishing, pausing or stopping, start it again
    from the last checkpoint, up to ``args.max_restarts`` times. Pause and stop signals are passed on to it."""
    child: subprocess.Popen | None = None

    def forward(number: int, _frame: Any) -> None:
        Signals.ask(Signals.REQUESTS[number])
        if child is not None and child.poll() is None:
            os.kill(child.pid, number)

    for number in Signals.REQUESTS:
        signal.signal(number, forward)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, set(Signals.REQUESTS))
    restarts, resume, name = 0, args.resume, args.folder.name
    while True:
        command = [sys.executable, "-I", "-m", WORKER_MODULE, str(args.folder)]
        command += ["--resume"] if resume else ["--resume-if-any"] if args.resume_if_any else []
        command += ["--hold-after-pause"] if args.hold_after_pause else []
        command += ["--log-file"] if args.log_file else []
        command += ["--modules", str(args.modules)] if args.modules else []
        command += ["--trust-pickle"] if args.trust_pickle else []
        # the signals wait while the child starts: one that comes meanwhile is forwarded once ``child`` is set
        signal.pthread_sigmask(signal.SIG_BLOCK, set(Signals.REQUESTS))
        try:  # (the child starts with them blocked too, and unblocks them once its handlers are in place)
            variables = {RESTARTS_VARIABLE: str(restarts), SUPERVISOR_VARIABLE: str(os.getpid())}
            child = subprocess.Popen(command, env={**os.environ, **variables})  # noqa: S603
            if Signals.request is not None:  # asked after the decision to restart: the new child gets it
                os.kill(child.pid, signal.SIGTERM if Signals.request == "stop" else signal.SIGUSR1)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, set(Signals.REQUESTS))
        code = child.wait()
        state = _final_state(args.folder)
        if code == 0 and state in ("finished", "paused", "stopped"):
            _record(args.project, name, state, None)
            LOG.info("experiment %s %s", name, state)
            return 0
        how = f"signal {-code}" if code < 0 else f"exit code {code}"
        try:
            checkpoint, damaged = Checkpoints(args.folder / "results" / "checkpoints").latest(), None
        except ValueError as error:
            checkpoint, damaged = None, str(error)
        if Signals.request is not None or restarts >= args.max_restarts or checkpoint is None:
            why = (
                f"it was asked to {Signals.request}"
                if Signals.request
                else f"after {restarts} restarts"
                if restarts >= args.max_restarts
                else damaged or "no checkpoint to resume from"
            )
            LOG.error("the worker ended with %s; not restarted (%s)", how, why)
            _record(args.project, name, "failed", f"the worker ended with {how}; not restarted ({why})")
            return 1
        restarts, resume = restarts + 1, True
        LOG.warning(
            "the worker ended with %s; restart %d of %d from the checkpoint at timestep %d",
            how,
            restarts,
            args.max_restarts,
            checkpoint["timesteps"],
        )


def main(argv: list[str] | None = None) -> int:
    Signals.install()  # first: a pause that arrives while torch imports must not kill us
    stop_with_the_supervisor()  # (a supervised worker: its supervisor's death asks it to stop)
    parser = argparse.ArgumentParser(description="Run one torchforce experiment (started by tfcli).")
    parser.add_argument("folder", type=Path, help="the experiment's folder (with experiment.json)")
    parser.add_argument("--project", type=Path, help="the project root, to record the run's end in its database")
    parser.add_argument("--resume", action="store_true", help="continue from the latest checkpoint")
    parser.add_argument(
        "--resume-if-any",
        action="store_true",
        help="continue from the latest checkpoint when there is one, else start a new run (the log says which)",
    )
    parser.add_argument("--max-restarts", type=int, default=0, help="resume after a crash up to this many times")
    parser.add_argument(
        "--hold-after-pause",
        action="store_true",
        help="after a pause (checkpoint written, state paused) do not exit: sleep until killed (SIGTERM: exit 0, "
        'still paused) or until results/control.json says {"request": "stop"} (exit 0, state stopped)',
    )
    parser.add_argument("--log-file", action="store_true", help="also write the log to results/worker.log")
    parser.add_argument("--modules", type=Path, help="the folder of the project's own modules (user classes)")
    parser.add_argument(
        "--trust-pickle",
        action="store_true",
        help="unpickle the environments' state of a checkpoint "
        "not signed by this user (it runs whatever the file says)",
    )
    args = parser.parse_args(argv)
    use_modules(args.modules)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(asctime)s %(levelname)s %(message)s")
    if args.log_file:
        (args.folder / "results").mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(args.folder / "results" / "worker.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logging.getLogger().addHandler(handler)
    if args.max_restarts > 0:
        return supervise(args)

    import torch

    from torchforce.core.optimizers.torch_optimizers import without_the_compiler

    torch.set_num_threads(1)
    name = args.folder.name
    try:
        with without_the_compiler():  # a run compiles nothing: torch's compiler stays unimported (seconds)
            run = ExperimentRun(
                args.folder,
                args.resume,
                trust_pickle=True if args.trust_pickle else None,
                resume_if_any=args.resume_if_any,
            )
            outcome = run.run()
    except BaseException as error:  # noqa: BLE001 - every failure is recorded, then re-raised as an exit code
        LOG.error("the experiment failed:\n%s", traceback.format_exc())
        message = f"{type(error).__name__}: {error}".strip().splitlines()[0][:500]
        _record(args.project, name, "failed", message)
        return 1
    _record(args.project, name, outcome, None)
    LOG.info("experiment %s %s", name, outcome)
    if outcome == "paused" and args.hold_after_pause:
        return hold(args.folder, args.project)
    return 0


if __name__ == "__main__":
    sys.exit(main())
