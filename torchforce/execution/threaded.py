"""The ThreadedRunner of TensorForce 0.4 (docs/tensorforce-0.4.md, Threaded runner): worker agents, each in its own
environment and thread, learning
into one shared model, asynchronously (hogwild-style, as A3C).

The workers (``clone_worker_agent``, or ``WorkerAgentGenerator``) are agents of one kind and spec that share the
first agent's networks and optimizers (``sharing.share_model``) and keep their own memory, episode bookkeeping,
exploration and preprocessing. Each thread drives a ``Runner`` over its pair; acting runs in parallel, and updates
to the shared model take turns. Counters and history are global: ``global_timestep`` counts every worker's acts (as
does the shared model's timestep, which its target network, learning-rate and exploration schedules follow:
``sharing``),
``global_episode`` their finished episodes (exactly ``num_episodes``: an episode another worker finishes after the
limit is not recorded). Fixed against 2018: each worker observes the state it acted on (2018
passed the next state to ``atomic_observe``, issue #384), an episode is cut at exactly ``max_episode_timesteps``,
and saving happens between two steps of the worker whose agent is saved, never while it acts.
"""

from __future__ import annotations

import contextlib
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

from torchforce.agents import Agent, create_agent
from torchforce.environments import Environment
from torchforce.execution.base import TORCH_THREADS, BaseRunner, check_torch_threads, shared_out, torch_threads
from torchforce.execution.runner import Runner, takes_one_argument
from torchforce.execution.sharing import share_model
from torchforce.spec.frequency import Every

SAVE_UNITS = {"s": "seconds", "t": "timesteps", "e": "episodes"}  # save_frequency_unit: Every's unit


class ThreadedRunner(BaseRunner):
    """Runs ``agent[i]`` in ``environment[i]`` in thread ``i`` (lists of equal length; ``agents``/``environments``
    are the deprecated names). ``save_path`` with ``save_frequency`` and ``save_frequency_unit`` ("s", "t" or "e")
    saves the first agent (the shared model) that often; ``save_episodes`` is the deprecated episode form.

    ``torch_threads``: each ``run`` sets this many intra-op torch threads before it starts the workers' threads, so
    every worker acts and updates on that many (1 by default: N workers then use N cores, not N times all of them),
    and sets torch's count back when it returns; None leaves torch's setting alone (docs/internals.md, Torch
    threads)."""

    def __init__(
        self,
        agent: list[Agent] | None = None,
        environment: list[Environment] | None = None,
        repeat_actions: int = 1,
        save_path: str | None = None,
        save_episodes: int | None = None,
        save_frequency: float | None = None,
        save_frequency_unit: str | None = None,
        agents: list[Agent] | None = None,
        environments: list[Environment] | None = None,
        torch_threads: int | None = TORCH_THREADS,
    ) -> None:
        if agents is not None or environments is not None:
            warnings.warn("agents/environments are deprecated; use agent/environment", DeprecationWarning, stacklevel=2)
        self.agents = list(agent if agent is not None else agents or [])
        self.environments = list(environment if environment is not None else environments or [])
        if not self.agents or len(self.agents) != len(self.environments):
            raise ValueError(
                f"one environment per agent: got {len(self.agents)} agents and {len(self.environments)} environments"
            )
        if save_episodes is not None:
            warnings.warn(
                "save_episodes is deprecated; use save_frequency with save_frequency_unit 'e'",
                DeprecationWarning,
                stacklevel=2,
            )
            save_frequency, save_frequency_unit = save_episodes, "e"
        if save_frequency is not None and save_frequency_unit not in SAVE_UNITS:
            raise ValueError(f"save_frequency_unit must be one of {sorted(SAVE_UNITS)}, got {save_frequency_unit!r}")
        if save_frequency is not None and save_path is None:
            raise ValueError("save_frequency needs a save_path")
        self.repeat_actions = repeat_actions
        self.torch_threads = check_torch_threads(torch_threads)
        self.save_path, self.save_frequency, self.save_unit = save_path, save_frequency, save_frequency_unit
        self._lock = threading.RLock()  # the counters and history, which every worker's thread updates; reentrant:
        # episode_finished runs holding it, and may read state_dict()
        self._save_lock = threading.Lock()  # one worker's thread saves at a time, and marks it done
        self.reset()

    def reset(self, history: dict[str, list] | None = None) -> None:
        history = history or {}
        self.episode_rewards: list[float] = list(history.get("episode_rewards", []))
        self.episode_timesteps: list[int] = list(history.get("episode_timesteps", []))
        self.episode_times: list[float] = list(history.get("episode_times", []))
        self.global_episode = len(self.episode_rewards)
        self._timesteps_before = int(sum(self.episode_timesteps))  # acts of earlier runs
        self._runners: list[Runner] = []  # this run's: each counts its worker's acts
        # per worker: its acts in earlier runs and its episodes in the history (which does not say whose an episode
        # was: a history's counts are shared out evenly, as load_state_dict does with a state without per-worker ones)
        self._worker_timesteps_before = shared_out(self._timesteps_before, len(self.agents))
        self._worker_episodes = shared_out(self.global_episode, len(self.agents))
        self.start_time = time.time()

    @property
    def global_timestep(self) -> int:
        """Every worker's acts so far."""
        return self._timesteps_before + sum(runner.global_timestep for runner in self._runners)

    def _run_timesteps(self) -> list[int]:
        """Per worker: its acts in this run (one reading of the counters its thread updates)."""
        return [runner.global_timestep for runner in self._runners] or [0] * len(self.agents)

    def worker_status(self) -> list[dict[str, Any]]:
        """Per worker, as ``DistributedRunner.worker_status()``'s rows count: ``steps`` and ``episodes`` of the whole
        run, earlier runs' included (they add up to ``global_timestep`` and ``global_episode``; a worker's episodes
        are those the history records), and ``run_steps``, its acts in this run (its speed)."""
        with self._lock:
            runs = self._run_timesteps()
            return [
                {"worker": index, "steps": before + steps, "episodes": episodes, "run_steps": steps}
                for index, (before, steps, episodes) in enumerate(
                    zip(self._worker_timesteps_before, runs, self._worker_episodes, strict=True)
                )
            ]

    def state_dict(self) -> dict[str, Any]:
        """The history and the counters (read between two updates of them), for ``load_state_dict``. The workers'
        episodes in progress are not part of it: a continued run starts new ones."""
        with self._lock:
            rows = self.worker_status()  # the total and the workers' counts from one reading (the lock is reentrant)
            return {
                "episode_rewards": list(self.episode_rewards),
                "episode_timesteps": list(self.episode_timesteps),
                "episode_times": list(self.episode_times),
                "global_timestep": self._timesteps_before + sum(row["run_steps"] for row in rows),
                "global_episode": self.global_episode,
                "worker_timesteps": [row["steps"] for row in rows],
                "worker_episodes": [row["episodes"] for row in rows],
            }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """What ``state_dict`` returned. A state without the per-worker counts (saved before torchforce kept them), or
        with another number of workers, shares the counters out evenly among the workers."""
        self.reset({key: state[key] for key in ("episode_rewards", "episode_timesteps", "episode_times")})
        self._timesteps_before, self.global_episode = int(state["global_timestep"]), int(state["global_episode"])
        steps, episodes = state.get("worker_timesteps"), state.get("worker_episodes")
        if (
            steps is not None
            and episodes is not None
            and len(steps) == len(episodes) == len(self.agents)
            and sum(steps) == self._timesteps_before
            and sum(episodes) == self.global_episode
        ):
            self._worker_timesteps_before = [int(count) for count in steps]
            self._worker_episodes = [int(count) for count in episodes]
        else:
            self._worker_timesteps_before = shared_out(self._timesteps_before, len(self.agents))
            self._worker_episodes = shared_out(self.global_episode, len(self.agents))

    @property
    def runners(self) -> list[Runner]:
        """This run's per-worker runners (each counts its own worker's steps and episodes)."""
        return list(self._runners)

    # 2018 names
    @property
    def episode(self) -> int:
        return self.global_episode

    @property
    def timestep(self) -> int:
        return self.global_timestep

    @property
    def global_step(self) -> int:
        return self.global_timestep

    @property
    def episode_lengths(self) -> list[int]:
        return self.episode_timesteps

    def close(self) -> None:
        for agent in self.agents:
            agent.close()
        for environment in self.environments:
            environment.close()

    def run(
        self,
        num_episodes: int | None = None,
        max_episode_timesteps: int | None = None,
        episode_finished: Callable[..., Any] | None = None,
        summary_report: Callable[..., Any] | None = None,
        summary_interval: int = 0,
        num_timesteps: int | None = None,
        deterministic: bool = False,
        episodes: int | None = None,
        max_timesteps: int | None = None,
        testing: bool = False,
        sleep: float | None = None,
        step_finished: Callable[[ThreadedRunner, int], Any] | None = None,
    ) -> None:
        """Run every worker until ``num_episodes`` episodes or ``num_timesteps`` acts more in all (-1 or None: no
        limit), or until interrupted. Each worker looks at the count after its own step, so the workers whose steps
        are under way when the limit is reached finish them: up to ``num_workers - 1`` acts past ``num_timesteps``,
        all of them counted. ``episode_finished(runner, worker_id)`` (or 2018's one-argument form) is
        called after each episode of any worker, one call at a time; a falsy return stops that worker.
        ``step_finished(runner, worker_id)`` is called in each worker's thread after each of its steps (not one
        call at a time); a falsy return stops every worker."""
        if episodes is not None or max_timesteps is not None:
            warnings.warn(
                "episodes/max_timesteps are deprecated; use num_episodes/max_episode_timesteps",
                DeprecationWarning,
                stacklevel=2,
            )
            num_episodes = num_episodes if num_episodes is not None else episodes
            max_episode_timesteps = max_episode_timesteps if max_episode_timesteps is not None else max_timesteps
        if summary_report is not None or summary_interval:
            warnings.warn(
                "summary_report/summary_interval are deprecated; use episode_finished", DeprecationWarning, stacklevel=2
            )
        num_episodes = None if num_episodes is None or num_episodes < 0 else self.global_episode + num_episodes
        num_timesteps = None if num_timesteps is None or num_timesteps < 0 else self.global_timestep + num_timesteps
        max_episode_timesteps = (
            None if max_episode_timesteps is None or max_episode_timesteps < 0 else max_episode_timesteps
        )
        self._limits, self._callback = (num_timesteps, num_episodes), self._episode_callback(episode_finished)
        self._step_callback = step_finished
        self._stop = threading.Event()
        self._errors: list[tuple[int, BaseException]] = []  # (worker index, what it raised)
        self._worker_timesteps_before = [row["steps"] for row in self.worker_status()]  # earlier runs' acts, per worker
        self._timesteps_before, self._runners = self.global_timestep, []
        pairs = enumerate(zip(self.agents, self.environments, strict=True))
        self._runners = [
            Runner(agent, environment, repeat_actions=self.repeat_actions, id_=index, torch_threads=None)
            for index, (agent, environment) in pairs
        ]
        if self.save_frequency is not None and self.save_unit is not None:  # __init__ checked the unit
            self._save_timer = Every(**{SAVE_UNITS[self.save_unit]: self.save_frequency})
            self._save_timer.mark(self.global_timestep, self.global_episode)
        threads = [
            threading.Thread(
                target=self._work,
                name=f"torchforce-worker-{index}",
                daemon=True,
                args=(index, max_episode_timesteps, deterministic, testing, sleep),
            )
            for index in range(len(self.agents))
        ]
        with torch_threads(self.torch_threads):  # a thread takes torch's count when it first runs torch code
            for thread in threads:
                thread.start()
            try:
                while any(thread.is_alive() for thread in threads):
                    for thread in threads:
                        thread.join(timeout=0.1)
            except KeyboardInterrupt:
                self._stop.set()
                for thread in threads:
                    thread.join()
        if self._errors:
            raise RuntimeError(f"worker {self._errors[0][0]} failed: {self._errors[0][1]!r}") from self._errors[0][1]

    def _episode_callback(self, function: Callable[..., Any] | None) -> Callable[[Any, int], Any] | None:
        """``episode_finished(runner, thread_id)``, or 2018's old style ``episode_finished(summary)`` with the dict
        ``{"thread_id", "episode", "timestep", "episode_reward"}``, which here also reads as the runner
        (``summary.global_episode``), as earlier releases of torchforce passed it."""
        if function is None or not takes_one_argument(function):
            return function

        def old_style(runner: ThreadedRunner, worker: int) -> Any:
            summary = EpisodeSummary(runner)
            summary.update(
                thread_id=worker,
                episode=runner.global_episode,
                timestep=runner.global_timestep,
                episode_reward=runner.episode_rewards[-1],
            )
            return function(summary)

        return old_style

    # ------------------------------------------------------------------ one worker

    def _work(self, index: int, max_steps: int | None, deterministic: bool, testing: bool, sleep: float | None) -> None:
        runner = self._runners[index]
        try:
            runner.run(
                max_episode_timesteps=max_steps,
                deterministic=deterministic,
                testing=testing,
                sleep=sleep,
                episode_finished=self._episode_finished,
                step_finished=self._step_finished,
            )
        except BaseException as error:  # noqa: BLE001 - reported by run() in the main thread
            self._errors.append((index, error))
            self._stop.set()

    def _step_finished(self, runner: Runner) -> bool:
        limit = self._limits[0]
        if limit is not None and self.global_timestep >= limit:
            self._stop.set()
        if self.save_frequency is not None:  # whichever worker's step makes it due (worker 0 may have stopped)
            with self._save_lock:
                if self._save_timer.due(self.global_timestep, self.global_episode):
                    self._save()
        if self._step_callback is not None and not self._step_callback(self, runner.id):
            self._stop.set()
        return not self._stop.is_set()

    def _episode_finished(self, runner: Runner, worker: int) -> bool:
        with self._lock:
            limit = self._limits[1]
            if limit is not None and self.global_episode >= limit:
                return False  # another worker reached the limit first: this episode is not recorded
            self.episode_rewards.append(runner.episode_rewards[-1])
            self.episode_timesteps.append(runner.episode_timesteps[-1])
            self.episode_times.append(runner.episode_times[-1])
            self.global_episode += 1
            self._worker_episodes[worker] += 1
            keep_going = True if self._callback is None else bool(self._callback(self, worker))
            if limit is not None and self.global_episode >= limit:
                self._stop.set()
        return keep_going and not self._stop.is_set()

    # ------------------------------------------------------------------ saving

    def _save(self) -> None:
        main = self.agents[0]
        with main.update_lock or contextlib.nullcontext():  # a consistent model: no other worker's update halfway in
            main.save_model(self.save_path)
        self._save_timer.mark(self.global_timestep, self.global_episode)


def clone_worker_agent(
    agent: Agent, factor: int, environment: Environment, network: Any, agent_config: dict[str, Any] | None
) -> list[Agent]:
    """``factor`` agents, ``agent`` first, the others workers sharing its model (2018's helper). Workers are built
    from ``agent_config`` (the agent's constructor arguments; its remembered spec without one) and ``network`` (or
    the config's, without one) for ``environment``'s states and actions; worker ``i`` gets the seed
    ``agent.seed + i`` when ``agent`` has one, so workers explore differently."""
    if factor < 1:
        raise ValueError(f"factor must be at least 1, got {factor}")
    config = dict(agent_config if agent_config is not None else agent.spec)
    network = network if network is not None else config.get("network")
    for key in ("type", "states", "actions", "network", "seed", "saver", "summarizer"):
        config.pop(key, None)
    workers = [agent]
    for index in range(1, factor):
        seed = None if agent.seed is None else agent.seed + index
        worker = create_agent(
            {"type": agent.name, **config},
            states=environment.states,
            actions=environment.actions,
            network=network,
            seed=seed,
        )
        share_model(worker, agent)
        workers.append(worker)
    return workers


def WorkerAgentGenerator(agent_class: type[Agent]) -> type[Agent]:  # noqa: N802 - the 2018 name
    """A subclass of ``agent_class`` whose constructor takes ``model=<the main agent>`` and shares its model."""

    class WorkerAgent(agent_class):  # type: ignore[misc, valid-type]
        def __init__(self, model: Agent | None = None, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            if model is not None:
                share_model(self, model)

    WorkerAgent.__name__ = WorkerAgent.__qualname__ = f"Worker{agent_class.__name__}"
    return WorkerAgent


class EpisodeSummary(dict):
    """What 2018's threaded runner passed an old-style ``episode_finished``: ``thread_id``, ``episode`` (the global
    count), ``timestep`` (the global count) and ``episode_reward``; its attributes are the runner's."""

    def __init__(self, runner: ThreadedRunner) -> None:
        super().__init__()
        self._runner = runner

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._runner, name)
