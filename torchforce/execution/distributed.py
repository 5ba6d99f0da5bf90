"""Distributed training on Ray: parameter servers and workers (ARCHITECTURE.md; reference §5.4 is the 2018 design).

``num_parameter_servers`` parameter-server actors hold the model's parameters, sharded by name. Each of
``num_workers`` worker actors runs its own agent (same spec, its own seed) in its own environments with an
ordinary ``Runner``. Whenever its agent updates (with any optimizer, whose state stays the worker's own, as 2018's
``global_optimizer`` kept the local one), the worker sends the change of its parameters since it last pulled them
to the servers, which add it to theirs, and pulls the result: asynchronous, parameter-server style training (as
the 2018 ``distributed`` execution, which was built on TF's parameter servers). The driver hands each worker a
chunk of steps at a time, as soon as it is free, and gathers its episodes and counters.

Ray is started on this machine (``address="local"``: a new private cluster on 127.0.0.1 with its own temporary
folder, shut down by ``close``) unless Ray is already initialized, in which case the runner uses that cluster and
leaves it running. Install Ray with ``pip install torchforce[ray]``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

from torchforce.agents import Agent, create_agent
from torchforce.execution.runner import episode_callback

CHUNK = 1_000  # steps a worker runs between two reports to the driver
OBJECT_STORE = 200 * 1024**2  # bytes: parameters and results are small; Ray's default takes a share of all memory


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ImportError("distributed training runs on Ray: pip install 'torchforce[ray]'") from None
    return ray


def shard(parameters: dict[str, Any], count: int) -> list[list[str]]:
    """Parameter names split over ``count`` servers, largest first to the least loaded, so shards balance."""
    shards: list[list[str]] = [[] for _ in range(count)]
    loads = [0] * count
    for name in sorted(parameters, key=lambda key: (-int(np.prod(parameters[key].shape)), key)):
        least = loads.index(min(loads))
        shards[least].append(name)
        loads[least] += int(np.prod(parameters[name].shape))
    return shards


class ParameterServer:
    """One shard of the model's parameters: adds the deltas workers send, serves the current values."""

    def __init__(self, parameters: dict[str, np.ndarray]) -> None:
        self.parameters = {name: np.array(value, dtype=np.float32) for name, value in parameters.items()}
        self.updates = 0

    def apply(self, deltas: dict[str, np.ndarray]) -> int:
        for name, delta in deltas.items():
            self.parameters[name] += delta
        self.updates += 1
        return self.updates

    def get(self) -> dict[str, np.ndarray]:
        return self.parameters


class Worker:
    """An agent in its environments, learning into the parameter servers (see the module docstring)."""

    def __init__(self, index: int, agent_spec: Any, environment: Any, num_environments: int, seed: int | None,
                 servers: list[Any], agent_kwargs: dict[str, Any]) -> None:  # fmt: skip
        import torch

        from torchforce.environments import make_vector
        from torchforce.execution.runner import Runner

        torch.set_num_threads(1)
        self.index, self.servers = index, servers
        self.environments = make_vector(environment, num_environments, seed=seed)
        self.agent = create_agent(agent_spec, states=self.environments.states, actions=self.environments.actions,
                                  seed=seed, **agent_kwargs)  # fmt: skip
        self.runner = Runner(self.agent, self.environments, id_=index)
        self._started = False
        self._pull()

    def _pull(self) -> None:
        import torch

        ray = _ray()
        values: dict[str, np.ndarray] = {}
        for part in ray.get([server.get.remote() for server in self.servers]):
            values.update(part)
        self.base = {name: torch.from_numpy(np.array(value)) for name, value in values.items()}
        self.agent.set_parameters(self.base)
        self.pulled_at = self.agent.updates

    def _push(self) -> None:
        ray = _ray()
        now = self.agent.get_parameters()
        deltas = {name: (now[name] - self.base[name]).numpy() for name in now}
        shards = [{name: deltas[name] for name in names} for names in self.layout]
        ray.get([server.apply.remote(part) for server, part in zip(self.servers, shards, strict=True) if part])
        self._pull()

    def set_layout(self, layout: list[list[str]]) -> None:
        self.layout = layout

    def run(self, steps: int, max_episode_timesteps: int | None, deterministic: bool) -> dict[str, Any]:
        """Up to ``steps`` more steps; returns the episodes finished meanwhile and the steps taken."""
        episodes: list[tuple[float, int, float]] = []
        before = self.runner.global_timestep

        def episode_finished(runner: Any, row: int) -> bool:
            episodes.append((runner.episode_rewards[-1], runner.episode_timesteps[-1], runner.episode_times[-1]))
            return True

        def step_finished(runner: Any) -> bool:
            if self.agent.updates != self.pulled_at:  # the agent learned something: share it
                self._push()
            return True

        self.runner.run(num_timesteps=steps, max_episode_timesteps=max_episode_timesteps, deterministic=deterministic,
                        episode_finished=episode_finished, step_finished=step_finished,
                        resume=self._started)  # fmt: skip
        self._started = True
        return {"episodes": episodes, "timesteps": self.runner.global_timestep - before}

    def close(self) -> None:
        self.environments.close()


class DistributedRunner:
    """Trains ``agent`` (a local agent: its spec and initial parameters start the servers and workers, and it
    receives the servers' parameters for ``save_model`` and after each run) with ``num_workers`` Ray workers, each
    stepping ``num_environments`` copies of ``environment`` (an environment spec), and ``num_parameter_servers``
    parameter servers. ``agent_spec`` is what builds the workers' agents (``agent.spec`` when it can be rebuilt
    from it); ``agent_kwargs`` add to it (a network object, say). Worker ``i`` is seeded ``seed + 1 + i``."""

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
        history: dict[str, list] | None = None,
    ) -> None:
        if num_workers < 1 or num_parameter_servers < 1 or num_environments < 1:
            raise ValueError("num_workers, num_parameter_servers and num_environments must be at least 1, got "
                             f"{num_workers}, {num_parameter_servers} and {num_environments}")  # fmt: skip
        ray = _ray()
        self.agent, self.environment = agent, environment
        self.num_workers, self.num_parameter_servers = num_workers, num_parameter_servers
        self._own_ray = not ray.is_initialized()
        if self._own_ray:
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # bind and advertise 127.0.0.1 only
            self._temp = tempfile.mkdtemp(prefix="torchforce-ray-")
            ray.init(address="local", num_cpus=max(os.cpu_count() or 1, num_workers + num_parameter_servers),
                     object_store_memory=OBJECT_STORE, include_dashboard=False, _temp_dir=self._temp,
                     _node_ip_address="127.0.0.1", log_to_driver=False, configure_logging=False)  # fmt: skip
        parameters = {name: value.cpu().numpy() for name, value in agent.get_parameters().items()}
        self.layout = shard(parameters, num_parameter_servers)
        server_class = ray.remote(num_cpus=0)(ParameterServer)
        self.servers = [server_class.remote({name: parameters[name] for name in names}) for names in self.layout]
        spec = agent_spec if agent_spec is not None else {key: value for key, value in agent.spec.items()
                                                          if key not in ("seed", "states", "actions", "saver",
                                                                         "summarizer")}  # fmt: skip
        worker_class = ray.remote(num_cpus=1)(Worker)
        self.workers = [worker_class.remote(index, spec, environment, num_environments,
                                            None if seed is None else seed + 1 + index, self.servers,
                                            dict(agent_kwargs or {})) for index in range(num_workers)]  # fmt: skip
        ray.get([worker.set_layout.remote(self.layout) for worker in self.workers])
        self.reset(history)

    def reset(self, history: dict[str, list] | None = None) -> None:
        history = history or {}
        self.episode_rewards: list[float] = list(history.get("episode_rewards", []))
        self.episode_timesteps: list[int] = list(history.get("episode_timesteps", []))
        self.episode_times: list[float] = list(history.get("episode_times", []))
        self.global_episode = len(self.episode_rewards)
        self.global_timestep = int(history.get("global_timestep", sum(self.episode_timesteps)))

    def state_dict(self) -> dict[str, Any]:
        return {"episode_rewards": list(self.episode_rewards), "episode_timesteps": list(self.episode_timesteps),
                "episode_times": list(self.episode_times), "global_timestep": self.global_timestep}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.reset(state)

    def parameters(self) -> dict[str, np.ndarray]:
        """The servers' current parameters."""
        values: dict[str, np.ndarray] = {}
        for part in _ray().get([server.get.remote() for server in self.servers]):
            values.update(part)
        return values

    def sync_agent(self) -> Agent:
        """The local agent with the servers' parameters (what ``save_model`` should save)."""
        import torch

        self.agent.set_parameters(
            {name: torch.from_numpy(np.array(value)) for name, value in self.parameters().items()}
        )
        return self.agent

    def run(self, num_timesteps: int | None = None, num_episodes: int | None = None,
            max_episode_timesteps: int | None = None, deterministic: bool = False,
            episode_finished: Callable[..., Any] | None = None, chunk: int = CHUNK,
            report: Callable[[DistributedRunner], Any] | None = None) -> None:  # fmt: skip
        """Run until ``num_timesteps`` steps or ``num_episodes`` episodes more in all, or a falsy
        ``episode_finished(runner, worker_id)`` or ``report(runner)`` (called after each chunk a worker returns),
        which stop the whole run. Workers run ``chunk`` steps at a time (fewer near the step limit): the chunks under
        way when the run stops are finished, their steps counted, their episodes not recorded."""
        if num_timesteps is None and num_episodes is None:
            raise ValueError("a distributed run needs num_timesteps or num_episodes")
        ray = _ray()
        callback = episode_callback(episode_finished)
        step_limit = None if num_timesteps is None else self.global_timestep + num_timesteps
        episode_limit = None if num_episodes is None else self.global_episode + num_episodes
        assigned = self.global_timestep  # steps handed out so far
        running: dict[Any, int] = {}
        stop = False

        def hand_out(index: int) -> None:
            nonlocal assigned
            steps = chunk if step_limit is None else min(chunk, step_limit - assigned)
            if steps > 0 and not stop:
                assigned += steps
                running[self.workers[index].run.remote(steps, max_episode_timesteps, deterministic)] = index

        for index in range(self.num_workers):
            hand_out(index)
        while running:
            (done,), _ = ray.wait(list(running), num_returns=1)
            index = running.pop(done)
            result = ray.get(done)
            self.global_timestep += result["timesteps"]  # steps taken count, also those after a stop
            for reward, length, seconds in result["episodes"]:
                if stop or (episode_limit is not None and self.global_episode >= episode_limit):
                    stop = True  # episodes past the end of the run are not recorded
                    break
                self.episode_rewards.append(reward)
                self.episode_timesteps.append(length)
                self.episode_times.append(seconds)
                self.global_episode += 1
                if callback is not None and not callback(self, index):
                    stop = True
            if not stop and report is not None and not report(self):
                stop = True
            if episode_limit is not None and self.global_episode >= episode_limit:
                stop = True
            hand_out(index)
        self.sync_agent()

    def close(self) -> None:
        """End the workers and servers, and the Ray cluster if this runner started it."""
        ray = _ray()
        if not ray.is_initialized():
            return
        ray.get([worker.close.remote() for worker in self.workers])
        for actor in [*self.workers, *self.servers]:
            ray.kill(actor)
        if self._own_ray:
            ray.shutdown()

    @property
    def episode(self) -> int:
        return self.global_episode

    @property
    def timestep(self) -> int:
        return self.global_timestep
