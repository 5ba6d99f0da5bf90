"""One run of an experiment, as the worker process (``torchforce.client.worker``, whose docstring says what it
writes under ``results/``) runs it: ``ExperimentRun`` builds the environments, agent and runner from the
experiment's spec, restores a checkpoint, runs, evaluates (``PeriodicEvaluation``), saves, and writes the progress,
episodes, summaries and logs."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import socket
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchforce.client.checkpoints import Checkpoints
from torchforce.client.periodic_evaluation import PeriodicEvaluation
from torchforce.client.report import JsonLines, drop_after
from torchforce.client.signals import Signals, control_request
from torchforce.spec import parse_frequency

if TYPE_CHECKING:  # torch and the execution package load when the run is built, not when this module is imported
    from torchforce.client.tracking import MlflowRun
    from torchforce.core.summaries import Summarizer
    from torchforce.environments import Environment, VectorEnvironment
    from torchforce.execution import DistributedRunner, Runner, ThreadedRunner
from torchforce.spec.frequency import Every

LOG = logging.getLogger("torchforce.worker")
RESTARTS_VARIABLE = "TORCHFORCE_RESTARTS"  # how many times a supervised run has been restarted so far
PROGRESS_LOG_SECONDS = 5.0  # a progress line in worker.log at most this often (and once at the end)
RECENT_METRIC = "run/mean_return_100"  # the scalar that measures a run in TensorBoard's HParams dashboard


def finite(value: float) -> float | None:
    """``value``, or None for NaN and the infinities, which strict JSON has not: the progress file's readers take a
    null return after the first episode as NaN (see ``views.read_progress``)."""
    return float(value) if math.isfinite(value) else None


class ExperimentRun:
    """One run (or continuation) of the experiment in ``folder``. ``resume_if_any``: resume when there is a
    checkpoint, else start a new run (dropping what an earlier attempt without a checkpoint logged)."""

    def __init__(
        self, folder: Path, resume: bool, trust_pickle: bool | None = None, *, resume_if_any: bool = False
    ) -> None:
        self.folder = folder
        self.spec = json.loads((folder / "experiment.json").read_text())
        self.results = folder / "results"
        self.results.mkdir(exist_ok=True)
        self.checkpoints = Checkpoints(self.results / "checkpoints")
        self.discard_leftovers = False  # a new run under --resume-if-any over an earlier attempt's logs: dropped
        if resume_if_any and not resume:
            latest = self.checkpoints.latest()
            resume = latest is not None
            summaries = self.results / "summaries"
            self.discard_leftovers = not resume and (
                (self.results / "episodes.jsonl").is_file() or (summaries.is_dir() and any(summaries.iterdir()))
            )
            if latest is not None:
                LOG.info("--resume-if-any: resuming from the checkpoint at timestep %d", latest["timesteps"])
            else:
                LOG.info("--resume-if-any: no checkpoint, starting a new run")
        self.resume, self.trust_pickle = resume, trust_pickle
        self.episodes_restored = False  # whether a resumed run continues the environments' episodes in progress
        self._said_unsaved = False  # whether the log said that checkpoints cannot keep the episodes in progress
        self.recent: deque[float] = deque(maxlen=100)
        self._progress_written = 0.0
        self._session = {"start": time.monotonic(), "timesteps": 0}
        self._logged = {"seconds": time.monotonic(), "timesteps": 0}
        self.elapsed_before = 0.0
        self.restarts = int(os.environ.get(RESTARTS_VARIABLE, "0") or 0)
        self.host = socket.gethostname()
        # built with the run (build, run): where results go besides progress.json and the checkpoints
        self.summarizer: Summarizer | None = None
        self.evaluation: PeriodicEvaluation | None = None
        self.mlflow: MlflowRun | None = None
        self.episode_log: JsonLines | None = None
        self.evaluation_log: JsonLines | None = None
        if self.spec.get("debug_logging"):
            logging.getLogger("torchforce").setLevel(logging.DEBUG)
        LOG.debug("experiment spec: %s", json.dumps(self.spec, sort_keys=True))

    def build(self) -> None:
        from torchforce.agents import create_agent
        from torchforce.client import warm_start
        from torchforce.client.experiment_build import acted_environment, torch_threads_of, worker_agent_spec
        from torchforce.client.experiment_file import worker_timeout_of
        from torchforce.client.monitor import monitored
        from torchforce.environments import make, make_vector
        from torchforce.execution import Runner, ThreadedRunner, clone_worker_agent

        spec = self.spec

        # a monitor's records in the results, continued by every environment built (a resumed run's: appended to)
        environment = acted_environment(spec, monitored(spec["environment"], self.results, resume=self.resume))
        self.threaded = spec["run_mode"] == "multi-threaded"
        self.distributed = spec["run_mode"] == "distributed"
        # the environments this process steps: one per worker thread, a vector of them, or none (distributed)
        self.environments: list[Environment] | VectorEnvironment
        first: Environment | VectorEnvironment
        if self.distributed:  # the environments live in the Ray workers; this one tells the states and actions
            self.environments, first = [], make(environment)
            first.close()
        elif self.threaded:  # one environment per worker, as in 2018
            environments = [make(environment) for _ in range(spec["num_workers"])]
            for index, copy in enumerate(environments):
                copy.seed(None if spec["seed"] is None else spec["seed"] + index)
            self.environments, first = environments, environments[0]
        else:
            vector = make_vector(environment, spec["num_environments"], mode=spec["vectorization"], seed=spec["seed"])
            self.environments, first = vector, vector
        kwargs: dict[str, Any] = {"states": first.states, "actions": first.actions}
        if spec["network"] is not None:
            kwargs["network"] = spec["network"]
        agent_spec = worker_agent_spec(spec, summaries=str(self.results / "summaries"))
        if self.distributed:  # the driver's agent holds what checkpoints save, and evaluates: on the CPU, leaving
            agent_spec = {**agent_spec, "device": "cpu"}  # the GPUs to the Ray workers (Ray shows a driver them all)
        self.agent = create_agent(agent_spec, **kwargs)
        # a new run begins from another's networks where its spec says so (a resumed one, from its own checkpoint)
        warm = spec.get("warm_start") is not None and not self.resume
        if warm:
            self.agent.warm_start(self.folder, warm_start.FILE)
            LOG.info(
                "warm start from %s: its networks and run-wide statistics", warm_start.describe(spec["warm_start"])
            )
        self.summarizer = self.agent.summarizer
        if spec.get("evaluation") is not None:  # its own environment: the experiment's unless it names another
            from torchforce.client.evaluate import environment_spec, own_environment_spec

            settings = spec["evaluation"]
            self.evaluation = PeriodicEvaluation(
                settings,
                environment_spec(spec)  # the experiment's, without the monitor that records the training's games
                if settings.get("environment") is None
                else own_environment_spec(spec, settings["environment"]),
                seed=spec["seed"],
                max_timesteps=spec["max_timesteps_per_episode"],
            )
        self.runner: Runner | ThreadedRunner | DistributedRunner
        threads = torch_threads_of(spec)
        if self.distributed:  # Ray workers learning into parameter servers; the agent holds what checkpoints save
            from torchforce.execution.distributed import DistributedRunner

            self.workers = [self.agent]
            self.runner = DistributedRunner(
                self.agent,
                environment,
                num_workers=spec["num_workers"],
                num_parameter_servers=spec["num_parameter_servers"],
                num_environments=spec["num_environments"],
                seed=spec["seed"],
                agent_spec=worker_agent_spec(spec),
                agent_kwargs={} if spec["network"] is None else {"network": spec["network"]},
                torch_threads=threads,
                on_lost_worker=lambda index, steps: LOG.warning(
                    "Ray worker %d was lost (its process ended): its chunk of %d steps under way is lost (not "
                    "counted, its episodes not logged); Ray restarts it with the servers' parameters",
                    index,
                    steps,
                ),
                worker_timeout=worker_timeout_of(spec),
                on_hung_worker=lambda index, seconds: LOG.warning(
                    "Ray worker %d hung: it returned nothing for %g s (the experiment's worker_timeout), its process "
                    "alive; the worker is killed and replaced, as a lost one is",
                    index,
                    seconds,
                ),
            )
            Signals.install()  # ray.init replaces the SIGTERM handler: stop must still checkpoint
        elif isinstance(self.environments, list):  # threaded: workers sharing the agent's model, which checkpoints hold
            self.workers = clone_worker_agent(
                self.agent, spec["num_workers"], self.environments[0], spec["network"], agent_spec
            )
            for worker in self.workers[1:] if warm else []:  # the model they share is warm: their own statistics too
                worker.warm_start(self.folder, warm_start.FILE)
            self.runner = ThreadedRunner(self.workers, self.environments, torch_threads=threads)
        else:
            self.workers = [self.agent]
            self.runner = Runner(self.agent, self.environments, torch_threads=threads)

    def _ray_runner(self) -> DistributedRunner:
        """The runner of the distributed run mode (parameter servers and Ray workers)."""
        from torchforce.execution import DistributedRunner

        if not isinstance(self.runner, DistributedRunner):
            raise RuntimeError(f"the {self.spec['run_mode']} run mode has no Ray workers")
        return self.runner

    def restore(self) -> None:
        pointer, state = self.checkpoints.load(self.agent, trust_pickle=self.trust_pickle)
        self.runner.load_state_dict(state["runner"])
        if self.distributed:
            self._ray_runner().load_agent()  # the restored model into the parameter servers
            self._load_ray_workers(self.checkpoints.folder / pointer["folder"])
        elif not isinstance(self.environments, list) and state["environments"] is not None:
            self.environments.set_state(state["environments"])  # threaded: new episodes (see Checkpoints.load)
            self.episodes_restored = True
        self.elapsed_before = float(state["elapsed"])
        self.recent.extend(state["recent"])
        # what was logged after the checkpoint is played again: the runner's restored counters say where it ends
        drop_after(self.results / "episodes.jsonl", "episode", self.runner.global_episode)
        if self.evaluation is not None:
            drop_after(self.results / "evaluations.jsonl", "timesteps", self.runner.global_timestep)
            self.evaluation.load_state_dict(state.get("evaluation"), self.counts(), self.checkpoints.best())
            best = self.evaluation.best
            if best is not None:  # (again: the run before may have ended between the checkpoint and best.json)
                self.checkpoints.mark_best(best["timesteps"], best["mean_return"])
        LOG.info(
            "resumed from checkpoint %s (timestep %d, episode %d)",
            pointer["folder"],
            pointer["timesteps"],
            pointer["episodes"],
        )

    def elapsed(self) -> float:
        return self.elapsed_before + time.monotonic() - self._session["start"]

    def counts(self) -> dict[str, float]:
        """How far the run is, in each unit of a frequency."""
        return {
            "timesteps": self.runner.global_timestep,
            "episodes": self.runner.global_episode,
            "seconds": self.elapsed(),
        }

    def save(self, best: float | None = None) -> None:
        """A checkpoint now; ``best``: the mean return of an evaluation just played that is the best so far, which
        makes this checkpoint the one ``best.json`` points at."""
        for log in (self.episode_log, self.evaluation_log):
            if log is not None:
                log.flush()
        if self.distributed:  # one moment of the run: the chunks under way taken in first, then the servers' model
            self._ray_runner().drain()
            self._ray_runner().sync_agent()  # the parameter servers' model into the agent that is saved
        info = {"timesteps": self.runner.global_timestep, "episodes": self.runner.global_episode}
        if best is not None and self.evaluation is not None:
            self.evaluation.best = {
                "timesteps": info["timesteps"],
                "mean_return": best,
                "folder": Checkpoints.folder_name(info["timesteps"]),
            }
        state = {
            "runner": self.runner.state_dict(),
            "environments": self._episodes_in_progress(),
            "elapsed": self.elapsed(),
            "recent": list(self.recent),
            "evaluation": None if self.evaluation is None else self.evaluation.state_dict(),
        }
        self.checkpoints.save(self.agent, state, info, extra=self._save_ray_workers if self.distributed else None)
        self.saver.mark(info["timesteps"], info["episodes"])
        LOG.info("checkpoint at timestep %d, episode %d", info["timesteps"], info["episodes"])
        if best is not None:
            self.checkpoints.mark_best(info["timesteps"], best)

    def _episodes_in_progress(self) -> list[bytes] | None:
        """The environments as a checkpoint keeps them (``VectorEnvironment.get_state``), or None where their episodes
        in progress cannot be kept: a threaded run's, or copies that would not go on from a pickle (a resumed run
        starts new episodes there; the log says so once)."""
        if isinstance(self.environments, list):
            return None
        blobs = self.environments.get_state()
        if blobs is None and not self._said_unsaved:
            LOG.warning(
                "checkpoints cannot keep the episodes in progress of %s (Gymnasium builds such an environment again "
                "from its arguments when it is pickled, and torchforce restores only MuJoCo's and ALE's): they keep "
                "the agent and the counts, and a resumed run starts new episodes",
                self.environments,
            )
            self._said_unsaved = True
        return blobs

    def _save_ray_workers(self, folder: Path) -> None:
        """Every Ray worker's agent into ``folder/workers/`` of a checkpoint being written."""
        from torchforce.agents.checkpoint import save_checkpoint

        for index, state in enumerate(self._ray_runner().worker_states()):
            save_checkpoint(folder / "workers", f"worker-{index}", state, {"worker": index})

    def _load_ray_workers(self, folder: Path) -> None:
        from torchforce.agents.checkpoint import find_checkpoint, load_checkpoint

        try:
            files = [
                find_checkpoint(folder / "workers", f"worker-{index}") for index in range(self.spec["num_workers"])
            ]
        except FileNotFoundError as error:
            LOG.warning(
                "the checkpoint lacks a Ray worker's agent (%s): the workers start afresh from the servers' model",
                error,
            )
            return
        self._ray_runner().load_worker_states([load_checkpoint(file) for file in files])

    def poll_control(self) -> None:
        """A pause or stop asked through ``results/control.json`` (the Ray backend's way)."""
        request = control_request(self.results)
        if request is not None and Signals.request != request:
            Signals.ask(request)

    def drop_leftovers(self) -> None:
        """A new run where an earlier attempt left no checkpoint: its episodes would be played again, so its episode
        log and its summaries go (as a resumed run drops what was logged after its checkpoint)."""
        log, count = self.results / "episodes.jsonl", 0
        with contextlib.suppress(FileNotFoundError), open(log, "r+b") as file:
            count = sum(1 for _ in file)
            file.truncate(0)
        (self.results / "evaluations.jsonl").unlink(missing_ok=True)
        LOG.warning("dropping what an earlier attempt that left no checkpoint logged (%d episodes)", count)
        self.agent.summarizer.resume_at(0)  # TensorBoard's purge: the earlier attempt's summaries after step 0

    def worker_rows(self) -> list[dict[str, Any]]:
        """Per worker: node, steps, episodes, steps/s and restarts (``experiment show`` lists them)."""
        from torchforce.execution import DistributedRunner, ThreadedRunner

        if isinstance(self.runner, DistributedRunner):
            return self.runner.worker_status()
        seconds = max(time.monotonic() - self._session["start"], 1e-9)
        if isinstance(self.runner, ThreadedRunner):  # each worker's whole run, across pauses (checkpoints keep it)
            counts = self.runner.worker_status()
        else:
            steps, episodes = self.runner.global_timestep, self.runner.global_episode
            counts = [
                {"worker": 0, "steps": steps, "episodes": episodes, "run_steps": steps - self._session["timesteps"]}
            ]
        return [
            {
                "worker": count["worker"],
                "node": self.host,
                "steps": count["steps"],
                "episodes": count["episodes"],
                "steps_per_second": round(count["run_steps"] / seconds, 1),  # this session's speed
                "restarts": self.restarts,
            }
            for count in counts
        ]

    def write_progress(self, state: str, force: bool = False) -> None:
        from torchforce.client.project import write_json_atomically

        now = time.monotonic()
        if not force and now - self._progress_written < 1.0:
            return
        self._progress_written = now
        self.poll_control()
        session_seconds = max(now - self._session["start"], 1e-9)
        runner, spec = self.runner, self.spec
        write_json_atomically(
            self.results / "progress.json",
            {
                "state": state,
                "pid": os.getpid(),
                "timesteps": runner.global_timestep,
                "episodes": runner.global_episode,
                "total_timesteps": spec["total_timesteps"],
                "total_episodes": spec["episodes"],
                "elapsed_seconds": round(self.elapsed(), 3),
                "steps_per_second": round((runner.global_timestep - self._session["timesteps"]) / session_seconds, 1),
                "mean_return_100": finite(sum(self.recent) / len(self.recent)) if self.recent else None,
                "last_return": finite(self.recent[-1]) if self.recent else None,
                "restarts": self.restarts,
                "workers": self.worker_rows(),
                "updated_at": time.time(),
            },
        )

    def episode_finished(self, runner: Any, worker: int) -> bool:
        value = runner.episode_rewards[-1]
        self.recent.append(value)
        record = {
            "episode": runner.global_episode,
            "timesteps": runner.global_timestep,
            "worker": worker,
            "return": value,
            "length": runner.episode_timesteps[-1],
            "wall_time": round(self.elapsed(), 4),
        }
        if self.episode_log is not None:
            self.episode_log.append(record)
        if self.mlflow is not None:
            self.mlflow.episode(record)
        LOG.debug(
            "episode %d: return %g, length %d, timestep %d", record["episode"], value, record["length"], runner.timestep
        )
        return True

    def log_progress(self, force: bool = False) -> None:
        """A progress line in the log (as the 2018 worker logged): at most every PROGRESS_LOG_SECONDS."""
        now, runner = time.monotonic(), self.runner
        seconds = now - self._logged["seconds"]
        if not force and seconds < PROGRESS_LOG_SECONDS:
            return
        speed = (runner.global_timestep - self._logged["timesteps"]) / max(seconds, 1e-9)
        mean = sum(self.recent) / len(self.recent) if self.recent else None
        LOG.info(
            "episode %d, timesteps %d, %.0f steps/s, mean return (last %d) %s",
            runner.global_episode,
            runner.global_timestep,
            speed,
            len(self.recent),
            "-" if mean is None else f"{mean:.2f}",
        )
        self._logged = {"seconds": now, "timesteps": runner.global_timestep}
        scalars = {"run/steps_per_second": speed}
        if mean is not None:
            scalars[RECENT_METRIC] = mean
        self.record_scalars(scalars)

    def record_scalars(self, values: dict[str, float]) -> None:
        """Scalars of the run at its current timestep, into TensorBoard (and MLflow, when tracked)."""
        timestep = self.runner.global_timestep
        if self.summarizer is not None:
            self.summarizer.scalars(values, timestep)
        if self.mlflow is not None:
            self.mlflow.scalars(values, timestep)

    def flush_logs(self) -> None:
        """What the logs hold to the files (and MLflow) once it is due: called after every step."""
        for log in (self.episode_log, self.evaluation_log):
            if log is not None:
                log.flush(due_only=True)
        if self.mlflow is not None:
            self.mlflow.flush(due_only=True)

    def evaluate_if_due(self) -> float | None:
        """Play an evaluation round when one is due and log it; returns its mean return when it is the best so far
        (then the caller saves a checkpoint now, which becomes the best one), else None."""
        import numpy as np

        evaluation, runner = self.evaluation, self.runner
        if evaluation is None or not evaluation.due(self.counts()):
            return None
        if self.distributed:  # the chunks under way taken in first, as a save does: a best checkpoint saves this model
            self._ray_runner().drain()
            self._ray_runner().sync_agent()  # the parameter servers' model into the agent that plays
        returns = evaluation.play(self.agent, self.counts())
        mean, deviation = float(np.mean(returns)), float(np.std(returns))
        record = {
            "timesteps": runner.global_timestep,
            "episodes": runner.global_episode,
            "mean_return": mean,
            "std_return": deviation,
            "returns": [float(value) for value in returns],
            "wall_time": round(self.elapsed(), 4),
        }
        if self.evaluation_log is not None:
            self.evaluation_log.append(record)
        best = evaluation.best
        improved = bool(np.isfinite(mean)) and (best is None or mean > best["mean_return"])
        LOG.info(
            "evaluation at timestep %d: mean return %.2f (std %.2f) over %d episodes%s",
            record["timesteps"],
            mean,
            deviation,
            len(returns),
            ", the best so far" if improved else f" (best {best['mean_return']:.2f})" if best else "",
        )
        self.record_scalars({"evaluation/mean_return": mean, "evaluation/std_return": deviation})
        return mean if improved else None

    def step_finished(self, runner: Any) -> bool:
        """After every step: evaluate and checkpoint when due, pause/stop when asked, refresh the progress file
        and the logs."""
        best = self.evaluate_if_due()  # a round due at this step is played before a pause, as without one
        if Signals.request is not None:
            if best is not None:  # the new best, marked as such
                self.save(best)
            LOG.info("%s requested at timestep %d", Signals.request, runner.global_timestep)
            return False
        self._save_if_due(runner, best)
        self._report()
        return True

    def _save_if_due(self, runner: Any, best: float | None) -> None:
        """A checkpoint when the saver's frequency has come, or at once for a new best evaluation (``best``)."""
        if best is not None or self.saver.due(runner.global_timestep, runner.global_episode):
            self.save(best)

    def _report(self) -> None:
        """The progress file and the logs brought up to date (each no more often than it is written)."""
        self.write_progress("running")
        self.log_progress()
        self.flush_logs()

    def worker_step_finished(self, runner: Any, worker: int) -> bool:
        """Multi-threaded: every worker stops on a pause or stop request; worker 0's thread also evaluates and
        checkpoints (while no other worker updates the shared model) and refreshes the progress file and the logs."""
        if Signals.request is not None:
            return False
        if worker == 0:
            evaluating = self.evaluation is not None and self.evaluation.due(self.counts())
            if evaluating or self.saver.due(runner.global_timestep, runner.global_episode):
                with self.agent.update_lock or contextlib.nullcontext():  # a model no update changes halfway
                    self._save_if_due(runner, self.evaluate_if_due())
            self._report()
        return True

    def run(self) -> str:
        """Run to the end (or to a pause/stop request); returns "finished", "paused" or "stopped"."""
        from torchforce.execution import DistributedRunner

        self.build()
        if self.resume:
            self.restore()
        elif self.discard_leftovers:
            self.drop_leftovers()
        self._session["timesteps"] = self.runner.global_timestep
        self._logged["timesteps"] = self.runner.global_timestep
        self.write_progress("running", force=True)  # at once: readers see this session's counters and PID
        self.saver = Every.of(parse_frequency(self.spec["saver_frequency"], "experiment.saver_frequency"))
        self.saver.mark(self.runner.global_timestep, self.runner.global_episode)
        self.open_logs()
        outcome = "failed"
        try:
            outcome = self.play()
            latest = self.checkpoints.latest()
            if latest is None or latest["timesteps"] != self.runner.global_timestep:
                self.save()
            (self.results / "control.json").unlink(missing_ok=True)  # answered: no later run may read it
            self.write_progress(outcome, force=True)
            self.log_progress(force=True)
        finally:
            self.close_logs(outcome)
            if isinstance(self.runner, DistributedRunner):  # also when the run failed: its private cluster's folder
                self.runner.close()  # the Ray workers, the servers and the local Ray cluster
        for agent in self.workers:
            agent.close()
        for environment in self.environments if isinstance(self.environments, list) else [self.environments]:
            environment.close()
        if self.evaluation is not None:
            self.evaluation.close()
        return outcome

    def play(self) -> str:
        """Run the rest of the experiment's timesteps and episodes; returns how it ended."""
        from torchforce.execution import DistributedRunner, ThreadedRunner

        spec = self.spec
        self.poll_control()  # a distributed run asked to end while Ray started ends before its first chunks (minutes)
        if Signals.request is not None and isinstance(self.runner, DistributedRunner):
            LOG.info("%s requested at timestep %d, before the run went on", Signals.request, self.runner.timestep)
            return {"pause": "paused", "stop": "stopped"}[Signals.request]
        remaining_steps = None if spec["total_timesteps"] is None else spec["total_timesteps"] - self.runner.timestep
        remaining_episodes = None if spec["episodes"] is None else spec["episodes"] - self.runner.episode
        if (remaining_steps is None or remaining_steps > 0) and (remaining_episodes is None or remaining_episodes > 0):
            left = [
                f"{count:,} more {unit}"
                for count, unit in ((remaining_steps, "timesteps"), (remaining_episodes, "episodes"))
                if count is not None
            ]
            LOG.info("running %s: %s", spec["name"], " or ".join(left) or "until stopped")
            limits = {
                "num_timesteps": remaining_steps,
                "num_episodes": remaining_episodes,
                "max_episode_timesteps": spec["max_timesteps_per_episode"],
                "deterministic": spec["deterministic"],
                "episode_finished": self.episode_finished,
            }
            runner = self.runner
            # the first progress line's steps/s counts from here, not from the process's start (a resumed run
            # restored for seconds: its first line said 1 steps/s)
            self._logged = {"seconds": time.monotonic(), "timesteps": runner.global_timestep}
            if isinstance(runner, DistributedRunner):
                runner.run(**limits, report=self.step_finished)  # after each chunk a Ray worker returns
            elif isinstance(runner, ThreadedRunner):
                runner.run(**limits, step_finished=self.worker_step_finished)
            else:
                runner.run(**limits, step_finished=self.step_finished, resume=self.episodes_restored)
        return {"pause": "paused", "stop": "stopped"}.get(Signals.request or "", "finished")

    def open_logs(self) -> None:
        """The episode and evaluation logs (appended to), the run's hyperparameters in TensorBoard (a new run's),
        and its MLflow run when the experiment asks for one."""
        from torchforce.client.tracking import spec_params

        spec = self.spec
        self.episode_log = JsonLines(self.results / "episodes.jsonl")
        if self.evaluation is not None:
            self.evaluation_log = JsonLines(self.results / "evaluations.jsonl")
        if not self.resume and self.summarizer is not None:
            metrics = [RECENT_METRIC] + (["evaluation/mean_return"] if self.evaluation is not None else [])
            self.summarizer.hparams(spec_params(spec), metrics)
        if spec.get("mlflow") is not None:
            from torchforce.client.tracking import MlflowRun

            self.mlflow = MlflowRun(spec["mlflow"], self.results, spec, resume=self.resume)

    def close_logs(self, outcome: str) -> None:
        """The logs' last lines to their files; the MLflow run ends ``outcome``, with the last checkpoint."""
        for log in (self.episode_log, self.evaluation_log):
            if log is not None:
                log.close()
        if self.mlflow is not None:
            latest = self.checkpoints.latest()
            self.mlflow.end(outcome, None if latest is None else self.checkpoints.folder / latest["folder"])
