"""Distributed training on Ray: parameter servers and workers (docs/tensorforce-0.4.md, Distributed execution;
docs/internals.md, Clusters and backends).

``num_parameter_servers`` parameter-server actors hold the model's parameters, sharded by name. Each of
``num_workers`` worker actors runs its own agent (same spec, its own seed) in its own environments with an
ordinary ``Runner``. Whenever its agent updates (with any optimizer, whose state stays the worker's own, as 2018's
``global_optimizer`` kept the local one), the worker sends the change of its parameters since it last pulled them
to the servers, which add it to theirs, and pulls the result: asynchronous, parameter-server style training (as
the 2018 ``distributed`` execution, which was built on TF's parameter servers). Target networks (DQN's, DDPG's,
NAF's) are not exchanged: each worker moves its own toward the online network it pulls (``shared_parameters``).
The driver hands each worker a chunk of steps at a time, as soon as it is free, and gathers its episodes and
counters.

Where it runs: in the Ray this process has initialized already (left running); else, for the driver of a Ray job
(Ray's job supervisor gives it ``RAY_ADDRESS`` and its job config), in that job's cluster; else in a new private
cluster on this machine, every process listening on 127.0.0.1 only, in its own temporary folder, shut down by
``close``. A ``RAY_ADDRESS`` of the user's own shell is not followed: a run never joins a cluster it was not sent
to. The workers are placed with a placement group of one CPU each, spread over the nodes, and worker i's
environment copy j is seeded ``seed + 1 + i * num_environments + j`` (no two copies alike).

Faults: a worker whose process dies (killed, out of memory, its node lost) is restarted by Ray (up to
``MAX_WORKER_RESTARTS`` times): its new agent finds the servers by their actor names, pulls their parameters, and
the run goes on. Only the chunk it had under way is lost: its steps are not counted and its episodes not recorded
(``on_lost_worker`` is told). The new agent takes over what the worker's record on the first server holds as of
its last chunk (its counters, so that exploration and the other schedules of the timestep go on where they were,
and its run-wide state statistics), and seeds itself and its copies anew (``restarted_seed``), so that it does not
replay its predecessor's episodes; its memory and optimizer state start empty. A worker whose process lives on but
hangs (its environment blocked in ``step``, a deadlock, a stuck GPU call) is taken for lost too: once a chunk of it
has been under way ``worker_timeout`` seconds (``WORKER_TIMEOUT`` by default; None waits for ever), the driver kills
its actor (``on_hung_worker`` is told) and Ray restarts it as above, within the same ``MAX_WORKER_RESTARTS``. An
error raised inside a worker (its environment failing, a parameter server that died) ends the run with a
RuntimeError that names the worker and says what failed.

Install Ray with ``pip install torchforce[ray]``.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

from torchforce.agents import Agent
from torchforce.execution import worker_health
from torchforce.execution.base import BaseRunner, shared_out
from torchforce.execution.distributed_actors import (
    ParameterServer,
    Worker,
    described_resources,
    load_run_wide_statistics,
    ray_module,
    run_wide_statistics,
    shard,
    shared_parameters,
    worker_resources,
)
from torchforce.execution.ray_signals import handlers_kept, restore_signal_handlers, signal_handlers
from torchforce.execution.runner import episode_callback
from torchforce.execution.worker_health import (
    MAX_WORKER_RESTARTS,
    Absence,
    WorkerStatus,
    described_failure,
)
from torchforce.spec import expect_int

CHUNK = 1_000  # steps a worker runs between two reports to the driver (at most distributed_actors.CHUNK_SECONDS)
OBJECT_STORE = 200 * 1024**2  # bytes: parameters and results are small; Ray's default takes a share of all memory
# seconds a chunk may be under way before its worker counts as hung, killed and restarted: a CPU worker's chunk of
# CHUNK steps, its updates and exchanges included, takes seconds to a minute; ten minutes leave room for a slow
# environment, a big update on a busy machine and a first chunk's warm-up
WORKER_TIMEOUT = 600.0
LONGEST_WAIT = 3600.0  # seconds: the longest single wait for the workers (Ray's wait takes no far-off deadline)
PLACEMENT_TIMEOUT = 120.0  # seconds to wait for the cluster to place the workers


def ray_job_driver() -> bool:
    """Whether this process is the driver of a Ray job (Ray's job supervisor gives it the cluster's ``RAY_ADDRESS``
    and the job's config), whose cluster its runs use; a ``RAY_ADDRESS`` alone is a shell's, not followed."""
    return bool(os.environ.get("RAY_ADDRESS")) and "RAY_JOB_CONFIG_JSON_ENV_VAR" in os.environ


class _Chunks:
    """The chunks of steps a ``DistributedRunner.run`` hands its workers: those under way (``running``: the call, or
    a readiness probe of 0 steps, to its worker and steps; ``deadlines``: when each counts as hung), the steps
    handed out so far, and how each chunk that ends is taken in (counted, its episodes recorded, a lost one handed
    out again)."""

    def __init__(
        self, runner: DistributedRunner, ray: Any, chunk: int, options: tuple[int | None, bool], callback: Any
    ) -> None:
        self.runner, self.ray, self.chunk, self.options, self.callback = runner, ray, chunk, options, callback
        self.step_limit: int | None = None
        self.episode_limit: int | None = None
        self.assigned = runner.global_timestep  # steps handed out so far
        self.running: dict[Any, tuple[int, int]] = {}
        self.deadlines: dict[Any, float] = {}  # per call under way; inf: none, or its worker killed already
        self.absences = [Absence() for _ in range(runner.num_workers)]  # failed calls since a worker last answered
        self.idle: list[int] = []  # workers whose chunk ``drain`` took in: each gets its next one after ``report``

    def hand_out(self, index: int) -> None:
        """Worker ``index``'s next chunk, if the run goes on and steps are left."""
        steps = self.chunk if self.step_limit is None else min(self.chunk, self.step_limit - self.assigned)
        if steps > 0 and not self.runner._stop:
            self.assigned += steps
            self._under_way(self.runner.workers[index].run.remote(steps, *self.options), index, steps)

    def _under_way(self, call: Any, index: int, steps: int) -> None:
        """``call`` to worker ``index`` (a chunk of ``steps``, or a readiness probe: 0) under way from now."""
        self.running[call] = index, steps
        self.deadlines[call] = time.monotonic() + self._allowed(steps)

    def _allowed(self, steps: int) -> float:
        """The seconds a call may take: a chunk ``worker_timeout``, a readiness probe as long as a restart may take
        if that is more (inf: for ever)."""
        timeout = math.inf if self.runner.worker_timeout is None else float(self.runner.worker_timeout)
        return timeout if steps else max(timeout, worker_health.RESTART_TIMEOUT)

    def next_done(self, calls: list[Any]) -> Any | None:
        """The first of ``calls`` (under way) to end; None when none ended before the first deadline among them
        (``kill_hung`` has then killed the workers whose calls are overdue) or within ``LONGEST_WAIT``."""
        remaining = min(self.deadlines[call] for call in calls) - time.monotonic()
        done, _ = self.ray.wait(calls, num_returns=1, timeout=min(max(remaining, 0.0), LONGEST_WAIT))
        if done:
            return done[0]
        self.kill_hung(calls)
        return None

    def kill_hung(self, calls: list[Any]) -> None:
        """Kill the actor of each worker whose call among ``calls`` is past its deadline: a worker that hangs with
        its process alive answers no more. Ray restarts it, and its call fails as a lost worker's does (``collect``:
        its chunk handed out again, the same restart budget, its new agent taking over its record)."""
        now = time.monotonic()
        for call in calls:
            if self.deadlines[call] > now:
                continue
            index, steps = self.running[call]
            if not steps:  # a readiness probe: the worker, killed or lost, did not come back; killing it again
                # would only fail the probe as Ray's error, past the wait for a restart (Absence)
                raise RuntimeError(
                    f"Ray worker {index} did not come back within {self._allowed(steps):g} s of its restart (its "
                    "new process hangs as it starts, or no node took it)"
                )
            self.deadlines[call] = math.inf  # its call fails next, as the actor dies
            self.runner.status[index]["hangs"] += 1
            if self.runner.on_hung_worker is not None:
                self.runner.on_hung_worker(index, self._allowed(steps))
            self.ray.kill(self.runner.workers[index], no_restart=False)

    def collect(self, done: Any) -> int | None:
        """The call ``done`` (ended) taken in: the worker whose chunk it was, counted and recorded; None for a lost
        chunk or a readiness probe (a probe that finds the worker back hands it its next chunk)."""
        runner, ray = self.runner, self.ray
        index, steps = self.running.pop(done)
        del self.deadlines[done]
        try:
            result = ray.get(done)
        except ray.exceptions.RayTaskError as error:  # raised by the worker's code: it would fail again
            raise RuntimeError(f"Ray worker {index} failed: {described_failure(error)}") from error
        except ray.exceptions.RayActorError as error:  # its process died: Ray restarts it; a chunk under way is lost
            try:
                delay = self.absences[index].failed(error)  # raises once the worker is given up
            except ray.exceptions.RayActorError:
                status = runner.status[index]
                raise RuntimeError(
                    f"Ray worker {index} is given up: it did not come back from its restart (restarts so far: "
                    f"{status['restarts']}, hangs: {status['hangs']}): {described_failure(error)}"
                ) from error
            if steps:
                self.assigned -= steps
                runner.status[index]["lost_steps"] += steps
                if runner.on_lost_worker is not None:
                    runner.on_lost_worker(index, steps)
            time.sleep(delay)  # while Ray restarts it
            self._under_way(runner.workers[index].ready.remote(), index, 0)
            return None
        runner._note_incarnation(index, result["incarnation"] if steps else result)
        if not steps:  # a restarted worker is ready: back to work (it counts as back once a chunk succeeds)
            self.absences[index].answered()
            self.hand_out(index)
            return None
        self.absences[index] = Absence()
        self.assigned += result["timesteps"] - steps  # a vector steps all its rows: a chunk ends on a multiple
        runner._count(index, result)
        runner.servers[0].keep.remote(index, result["record"])  # what the counted steps left: a restart goes on there
        if not runner._stop:  # once the run stops, the episodes of the chunks still under way are not recorded
            runner._stop = runner._record_episodes(index, result["episodes"], self.episode_limit, self.callback)
        if self.episode_limit is not None and runner.global_episode >= self.episode_limit:
            runner._stop = True
        return index

    def drain(self) -> None:
        """Every chunk under way taken in (see ``DistributedRunner.drain``)."""
        while under_way := [call for call, (_, steps) in self.running.items() if steps]:
            done = self.next_done(under_way)
            if done is None:
                continue
            index = self.collect(done)
            if index is not None:
                self.idle.append(index)


class DistributedRunner(BaseRunner):
    """Trains ``agent`` (a local agent: its spec and initial parameters start the servers and workers, and it
    receives the servers' parameters for ``save_model`` and after each run) with ``num_workers`` Ray workers, each
    stepping ``num_environments`` copies of ``environment`` (an environment spec), and ``num_parameter_servers``
    parameter servers. ``agent_spec`` is what builds the workers' agents (``agent.spec`` when it can be rebuilt
    from it); ``agent_kwargs`` add to it (a network object, say). Worker ``i`` is seeded ``seed + 1 + i``.
    ``sync_every``: a worker exchanges its parameters with the servers after this many updates of its own (1, the
    default, after every update as 2018 did; more trades fresher parameters for less waiting), and at the end of
    each chunk it runs, when it has updates not yet sent: a chunk returns once all its changes are on the servers.
    ``torch_threads``: the intra-op torch threads of each worker, which asks the cluster for as many CPUs (1: a CPU
    and a thread each, what small networks run fastest on). ``worker_timeout``: the seconds a worker's chunk may be
    under way (a restarted worker's first answer: ``RESTART_TIMEOUT`` if that is more) before the worker counts as
    hung; its actor is then killed and restarted as a lost worker's (``on_hung_worker(worker_id, seconds)`` is told
    first, ``on_lost_worker(worker_id, steps)`` then, as for any lost chunk). None waits for ever."""

    def __init__(
        self,
        agent: Agent,
        environment: Any,
        *,
        num_workers: int = 2,
        num_parameter_servers: int = 1,
        num_environments: int = 1,
        seed: int | None = None,
        agent_spec: Any = None,
        agent_kwargs: dict[str, Any] | None = None,
        history: dict[str, Any] | None = None,
        on_lost_worker: Callable[[int, int], Any] | None = None,
        sync_every: int = 1,
        torch_threads: int = 1,
        worker_timeout: float | None = WORKER_TIMEOUT,
        on_hung_worker: Callable[[int, float], Any] | None = None,
    ) -> None:
        if worker_timeout is not None and not (
            isinstance(worker_timeout, int | float) and not isinstance(worker_timeout, bool) and worker_timeout > 0
        ):
            raise ValueError(
                f"worker_timeout must be a number of seconds > 0, or None to wait for ever; got {worker_timeout!r}"
            )
        if sync_every < 1:
            raise ValueError(f"sync_every must be at least 1, got {sync_every}")
        if torch_threads < 1:
            raise ValueError(f"torch_threads must be at least 1, got {torch_threads}")
        if num_workers < 1 or num_parameter_servers < 1 or num_environments < 1:
            raise ValueError(
                "num_workers, num_parameter_servers and num_environments must be at least 1, got "
                f"{num_workers}, {num_parameter_servers} and {num_environments}"
            )
        ray = ray_module()  # without Ray installed, an ImportError that says how to install it comes first
        if not agent.learning:
            raise ValueError(
                f"a distributed run trains one model on parameter servers, and a {agent.name} agent learns none: run "
                "it with the Runner (run_mode 'single')"
            )
        self.agent, self.environment = agent, environment
        self.num_workers, self.num_parameter_servers = num_workers, num_parameter_servers
        self.on_lost_worker, self.sync_every, self.torch_threads = on_lost_worker, sync_every, torch_threads
        self.worker_timeout, self.on_hung_worker = worker_timeout, on_hung_worker
        self._temp: str | None = None
        self._connected = not ray.is_initialized()  # whether close() disconnects (and ends a private cluster)
        self._chunks: _Chunks | None = None  # the chunks of the run under way
        self._stop = False
        self.workers: list[Any] = []  # actor handles
        self.servers: list[Any] = []
        self.placement: Any = None
        handlers = signal_handlers()  # ray.init puts its own in their place (SIGTERM: exit at once)
        try:
            with handlers_kept(handlers):  # a stop asked while Ray starts is the caller's (ray_signals.py)
                if self._connected and ray_job_driver():  # its cluster
                    ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False, configure_logging=False)
                elif self._connected:
                    from torchforce.execution.ray_cluster import init_private

                    self._temp = tempfile.mkdtemp(prefix="tf-ray-")
                    import torch

                    init_private(
                        num_cpus=max(os.cpu_count() or 1, num_workers * torch_threads),
                        num_gpus=torch.cuda.device_count(),  # this machine's GPUs, for workers of an agent on a GPU
                        object_store_memory=OBJECT_STORE,
                        temp_dir=self._temp,
                    )
            restore_signal_handlers(handlers)  # the caller's again before the minutes the workers may take to start
            self._start(agent, environment, num_environments, seed, agent_spec, agent_kwargs)
        except BaseException:
            self.close()
            raise
        self.reset(history)

    def _start(
        self,
        agent: Agent,
        environment: Any,
        num_environments: int,
        seed: int | None,
        agent_spec: Any,
        agent_kwargs: dict[str, Any] | None,
    ) -> None:
        """The servers, and the workers placed ``torch_threads`` CPUs each (and a share of the GPUs for agents on a
        GPU), spread over the nodes."""
        ray = ray_module()
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self.workers, self.servers, self.placement = [], [], None
        resources = ray.cluster_resources()
        cpus = resources.get("CPU", 0)
        threads = self.torch_threads
        if cpus < self.num_workers * threads:
            each = "a CPU each" if threads == 1 else f"{threads} CPUs each (torch_threads)"
            raise ValueError(f"{self.num_workers} distributed workers need {each}; the Ray cluster has {cpus:g}")
        parameters = {name: value.cpu().numpy() for name, value in shared_parameters(agent).items()}
        self.layout = shard(parameters, self.num_parameter_servers)
        server_class = ray.remote(num_cpus=0)(ParameterServer)
        run = uuid.uuid4().hex[:12]  # the servers are named actors, which the workers look up (see Worker)
        server_names = [f"torchforce-ps-{run}-{i}" for i in range(len(self.layout))]
        self.servers = [
            server_class.options(name=name).remote({key: parameters[key] for key in names})
            for name, names in zip(server_names, self.layout, strict=True)
        ]
        spec = agent_spec if agent_spec is not None else agent.spec
        if isinstance(spec, dict):  # each worker gets its own seed; only the driver saves and summarizes
            spec = {
                key: value
                for key, value in spec.items()
                if key not in ("seed", "states", "actions", "saver", "summarizer")
            }
        device = spec.get("device") if isinstance(spec, dict) else None
        bundle = worker_resources(device, resources.get("GPU", 0), self.num_workers, threads)
        self.placement = placement_group([bundle] * self.num_workers, strategy="SPREAD")
        try:
            ray.get(self.placement.ready(), timeout=PLACEMENT_TIMEOUT)
        except ray.exceptions.GetTimeoutError:
            raise RuntimeError(
                f"the Ray cluster placed no {self.num_workers} workers of {described_resources(bundle)} each within "
                f"{PLACEMENT_TIMEOUT:.0f} s (are its CPUs{' or GPUs' if 'GPU' in bundle else ''} taken by other work?)"
            ) from None
        self.workers = [
            ray.remote(Worker)
            .options(
                num_cpus=threads,
                num_gpus=bundle.get("GPU", 0),
                max_restarts=MAX_WORKER_RESTARTS,
                max_task_retries=0,
                scheduling_strategy=PlacementGroupSchedulingStrategy(self.placement, placement_group_bundle_index=i),
            )
            .remote(
                i,
                spec,
                environment,
                num_environments,
                None if seed is None else seed + 1 + i * num_environments,  # its copies: that and the next ones
                server_names,
                self.layout,
                dict(agent_kwargs or {}),
                self.sync_every,
                threads,
            )
            for i in range(self.num_workers)
        ]
        self.status: list[WorkerStatus] = [
            {
                "worker": i,
                "node": None,
                "steps": 0,
                "episodes": 0,
                "steps_per_second": None,
                "restarts": 0,
                "lost_steps": 0,
                "hangs": 0,
            }
            for i in range(self.num_workers)
        ]
        self._incarnations = ray.get([worker.ready.remote() for worker in self.workers])

    def reset(self, history: dict[str, Any] | None = None) -> None:
        history = history or {}
        self.episode_rewards: list[float] = list(history.get("episode_rewards", []))
        self.episode_timesteps: list[int] = list(history.get("episode_timesteps", []))
        self.episode_times: list[float] = list(history.get("episode_times", []))
        self.global_episode = len(self.episode_rewards)
        self.global_timestep = int(history.get("global_timestep", sum(self.episode_timesteps)))

    def state_dict(self) -> dict[str, Any]:
        return {
            "episode_rewards": list(self.episode_rewards),
            "episode_timesteps": list(self.episode_timesteps),
            "episode_times": list(self.episode_times),
            "global_timestep": self.global_timestep,
            "worker_counts": [[row["steps"], row["episodes"]] for row in self.status],  # each worker's whole run
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """What ``state_dict`` returned; the workers' rows go on counting from their counts (a state saved before it
        kept them, or with another number of workers, shares the run's out evenly)."""
        self.reset(state)
        counts = state.get("worker_counts")
        if not isinstance(counts, list) or len(counts) != len(self.status):
            steps, episodes = (
                shared_out(total, len(self.status)) for total in (self.global_timestep, self.global_episode)
            )
            counts = list(zip(steps, episodes, strict=True))
        for row, (steps, episodes) in zip(self.status, counts, strict=True):
            row["steps"], row["episodes"] = int(steps), int(episodes)

    def parameters(self) -> dict[str, np.ndarray]:
        """The servers' current parameters."""
        values: dict[str, np.ndarray] = {}
        for part in ray_module().get([server.get.remote() for server in self.servers]):
            values.update(part)
        return values

    def worker_status(self) -> list[dict[str, Any]]:
        """Per worker: the node it last ran on, steps and episodes it ran (across pauses: checkpoints keep them), the
        steps/s of its last chunk, how often Ray restarted it, the steps lost with it, and how often it was killed for
        hanging (these three in this session)."""
        return [dict(row) for row in self.status]

    def worker_states(self) -> list[dict[str, Any]]:
        """Every worker's agent state."""
        return self._ask_every_worker("get_state")

    def _ask_every_worker(self, method: str) -> list[Any]:
        """Every worker's answer to ``method`` (each answers once its chunk under way is done; one that Ray is
        restarting answers once it is back)."""
        ray = ray_module()
        answers = []
        for worker in self.workers:
            absence = Absence()
            while True:
                try:
                    answers.append(ray.get(getattr(worker, method).remote()))
                    break
                except ray.exceptions.RayActorError as error:
                    time.sleep(absence.failed(error))
        return answers

    def load_worker_states(self, states: list[dict[str, Any]]) -> None:
        if len(states) != self.num_workers:
            raise ValueError(f"{len(states)} worker states for {self.num_workers} workers")
        ray_module().get([worker.set_state.remote(state) for worker, state in zip(self.workers, states, strict=True)])

    def load_agent(self) -> None:
        """Put the local agent's parameters (a restored checkpoint, say) into the servers; workers pull them at the
        start of their next chunk."""
        values = {name: value.cpu().numpy() for name, value in shared_parameters(self.agent).items()}
        ray_module().get(
            [
                server.set.remote({name: values[name] for name in names})
                for server, names in zip(self.servers, self.layout, strict=True)
            ]
        )

    def sync_agent(self) -> Agent:
        """The local agent with the servers' parameters and the workers' run-wide state statistics together (what
        ``save_model`` should save, and evaluation and export apply: the networks learned on states the workers'
        statistics standardized)."""
        import torch

        from torchforce.core.preprocessors import RunningStandardize

        self.agent.set_parameters(
            {name: torch.from_numpy(np.array(value)) for name, value in self.parameters().items()}
        )
        own = run_wide_statistics(self.agent)
        if any(own.values()):
            states = self._ask_every_worker("statistics")
            combined = {
                name: {index: RunningStandardize.combined([state[name][index] for state in states]) for index in steps}
                for name, steps in own.items()
            }
            load_run_wide_statistics(self.agent, combined)
        return self.agent

    def run(
        self,
        num_timesteps: int | None = None,
        num_episodes: int | None = None,
        max_episode_timesteps: int | None = None,
        deterministic: bool = False,
        episode_finished: Callable[..., Any] | None = None,
        chunk: int = CHUNK,
        report: Callable[[DistributedRunner], Any] | None = None,
    ) -> None:
        """Run until ``num_timesteps`` steps or ``num_episodes`` episodes more in all, or a falsy
        ``episode_finished(runner, worker_id)`` or ``report(runner)`` (called after each chunk a worker returns),
        which stop the whole run. Workers run ``chunk`` steps at a time (fewer near the step limit): the chunks under
        way when the run stops are finished, their steps counted, their episodes not recorded. A worker steps all
        its ``num_environments`` copies at once, so its chunk ends on a multiple of them: the run may end up to
        ``num_environments - 1`` steps per worker past ``num_timesteps``, and the steps counted are those taken."""
        if num_timesteps is None and num_episodes is None:
            raise ValueError("a distributed run needs num_timesteps or num_episodes")
        num_timesteps = expect_int(num_timesteps, "num_timesteps", minimum=0, allow_none=True)
        num_episodes = expect_int(num_episodes, "num_episodes", minimum=0, allow_none=True)
        if num_timesteps == 0 or num_episodes == 0:  # nothing to run: no chunk
            return
        ray = ray_module()
        chunks = _Chunks(self, ray, chunk, (max_episode_timesteps, deterministic), episode_callback(episode_finished))
        chunks.step_limit = None if num_timesteps is None else self.global_timestep + num_timesteps
        chunks.episode_limit = None if num_episodes is None else self.global_episode + num_episodes
        self._stop, self._chunks = False, chunks
        try:
            for worker in range(self.num_workers):
                chunks.hand_out(worker)
            while chunks.running:
                done = chunks.next_done(list(chunks.running))
                returned = None if done is None else chunks.collect(done)
                if returned is None:
                    continue
                if not self._stop and report is not None and not report(self):
                    self._stop = True
                for free in [returned, *chunks.idle]:
                    chunks.hand_out(free)
                chunks.idle.clear()
        finally:
            self._chunks = None
        self.sync_agent()

    def drain(self) -> None:
        """Within ``run``'s ``report``: wait for every chunk under way and take it in (its steps counted, its
        episodes recorded), so that what is saved next (``sync_agent``, ``state_dict``, ``worker_states``) is one
        moment of the run: the servers' model, the counters and each worker's agent after the same steps. The
        workers start their next chunks once ``report`` returns. Outside a run it does nothing."""
        if self._chunks is not None:
            self._chunks.drain()

    def _record_episodes(
        self,
        index: int,
        episodes: list[tuple[float, int, float]],
        limit: int | None,
        callback: Callable[..., Any] | None,
    ) -> bool:
        """Add a chunk's episodes to the history, up to the episode limit; whether the run should stop."""
        for reward, length, seconds in episodes:
            if limit is not None and self.global_episode >= limit:
                return True  # episodes past the end of the run are not recorded
            self.episode_rewards.append(reward)
            self.episode_timesteps.append(length)
            self.episode_times.append(seconds)
            self.global_episode += 1
            if callback is not None and not callback(self, index):
                return True
        return False

    def _note_incarnation(self, index: int, incarnation: str) -> None:
        if incarnation != self._incarnations[index]:
            self._incarnations[index] = incarnation
            self.status[index]["restarts"] += 1

    def _count(self, index: int, result: dict[str, Any]) -> None:
        row = self.status[index]
        row["node"] = result["node"]
        row["steps"] += result["timesteps"]
        row["episodes"] += len(result["episodes"])
        self.global_timestep += result["timesteps"]  # steps taken count, also those after a stop
        row["steps_per_second"] = round(result["timesteps"] / max(result["seconds"], 1e-9), 1)
        row["sync_seconds"], row["syncs"] = round(result["sync_seconds"], 3), result["syncs"]

    def close(self) -> None:
        """End the workers and servers, and disconnect from Ray if this runner connected (ending the private
        cluster it started)."""
        ray = ray_module()
        if ray.is_initialized():
            try:
                ray.get([worker.close.remote() for worker in self.workers], timeout=30)
            except (ray.exceptions.RayError, TimeoutError):
                pass  # a worker that is gone or stuck is killed below all the same
            for actor in [*self.workers, *self.servers]:
                ray.kill(actor)
            if self.placement is not None:
                from ray.util.placement_group import remove_placement_group

                remove_placement_group(self.placement)
            if self._connected:
                ray.shutdown()
        self.workers, self.servers, self.placement = [], [], None
        if self._temp is not None:
            shutil.rmtree(self._temp, ignore_errors=True)
            self._temp = None

    @property
    def episode(self) -> int:
        return self.global_episode

    @property
    def timestep(self) -> int:
        return self.global_timestep
