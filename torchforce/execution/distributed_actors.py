"""What runs in Ray's actor processes of a distributed run (``distributed.py`` says how the run goes): the
parameter servers, which hold the shared parameters sharded by name (``shard``) and each worker's record, and the
workers, each an agent with its own environments on an ordinary ``Runner`` that pushes the change of its
parameters and pulls the servers' after every update; with what a worker shares (``shared_parameters``), the
statistics of the whole run it keeps (``run_wide_statistics``), its seed after a restart (``restarted_seed``) and
what it asks of the cluster (``worker_resources``)."""

from __future__ import annotations

import math
import os
import socket
import time
from typing import Any

import numpy as np

from torchforce.agents import Agent, create_agent
from torchforce.spec.device import needs_gpu, uses_gpu

# seconds a worker's chunk runs at most, short of its steps: the driver pauses or stops a run between chunks, so on a
# slow environment (Atari: 1,000 steps are a minute or more on a busy CPU) a pause would otherwise wait for minutes
CHUNK_SECONDS = 10.0


def ray_module() -> Any:
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


def worker_resources(device: Any, cluster_gpus: float, num_workers: int, cpus: int = 1) -> dict[str, float]:
    """What each of ``num_workers`` workers whose agents compute on ``device`` asks of a Ray cluster with
    ``cluster_gpus`` GPUs: ``cpus`` CPUs (one a torch thread), and for an agent on a GPU (``"cuda"``, ``"auto"``) a
    share of one GPU such that the workers fit on the GPUs (Ray places a fraction of a GPU within one GPU: 3 workers
    on 2 GPUs get half of one each, not two thirds), at most one each. Ray then gives each worker its GPU (``cuda``
    in it is that GPU). ``"cuda"`` on a cluster without GPUs is refused; ``"auto"`` there computes on the CPUs."""
    bundle: dict[str, float] = {"CPU": cpus}
    if needs_gpu(device) and not cluster_gpus:
        raise ValueError(f"the workers' agents compute on {device!r} (device), and the Ray cluster has no GPUs")
    if uses_gpu(device) and cluster_gpus:
        if cluster_gpus < 1:  # a cluster declaring a fraction of a GPU: the workers share that fraction
            share = cluster_gpus / num_workers
        else:
            share = 1 / math.ceil(num_workers / math.floor(cluster_gpus))  # workers per GPU, rounded up
        bundle["GPU"] = min(1.0, math.floor(1e4 * share) / 1e4)  # Ray's resolution: 1e-4
    return bundle


def described_resources(bundle: dict[str, float]) -> str:
    """A worker's share of the cluster in words: "one CPU", "2 CPUs and 0.5 GPU"."""
    return ("one CPU" if bundle["CPU"] == 1 else f"{bundle['CPU']:g} CPUs") + (
        f" and {bundle['GPU']:g} GPU" if "GPU" in bundle else ""
    )


class ParameterServer:
    """One shard of the model's parameters: adds the deltas workers send, serves the current values."""

    def __init__(self, parameters: dict[str, np.ndarray]) -> None:
        self.parameters = {name: np.array(value, dtype=np.float32) for name, value in parameters.items()}
        self.updates = 0
        # the first server also keeps each worker's record (``keep``), which the worker's next incarnation recalls
        self.records: dict[int, dict[str, Any]] = {}
        self.arrivals: dict[int, int] = {}

    def apply(self, deltas: dict[str, np.ndarray]) -> int:
        for name, delta in deltas.items():
            self.parameters[name] += delta
        self.updates += 1
        return self.updates

    def get(self) -> dict[str, np.ndarray]:
        return self.parameters

    def push_pull(self, deltas: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``apply`` then ``get`` in one round trip: what a worker does after every update."""
        self.apply(deltas)
        return self.parameters

    def keep(self, index: int, record: dict[str, Any]) -> None:
        """Worker ``index``'s record as of its last chunk: what its agent would lose with its process (see
        ``Worker.record``)."""
        self.records[index] = record

    def arrive(self, index: int) -> tuple[int, dict[str, Any] | None]:
        """A worker built (again): how many incarnations of worker ``index`` came before it, and the last record
        they kept (None before any)."""
        earlier = self.arrivals.get(index, 0)
        self.arrivals[index] = earlier + 1
        return earlier, self.records.get(index)

    def set(self, parameters: dict[str, np.ndarray]) -> None:
        for name, value in parameters.items():
            self.parameters[name][...] = value


class Worker:
    """An agent in its environments, learning into the parameter servers (see the module docstring)."""

    def __init__(
        self,
        index: int,
        agent_spec: Any,
        environment: Any,
        num_environments: int,
        seed: int | None,
        servers: list[Any],  # the parameter servers' actor names or handles
        layout: list[list[str]],
        agent_kwargs: dict[str, Any],
        sync_every: int = 1,
        torch_threads: int = 1,
    ) -> None:
        import torch

        from torchforce.core.optimizers.torch_optimizers import skip_compiler_import
        from torchforce.environments import make_vector
        from torchforce.execution.runner import Runner

        torch.set_num_threads(torch_threads)  # as many as the CPUs the worker asked for
        skip_compiler_import()  # the actor's process runs this worker only, and compiles nothing: seconds sooner
        # the servers by name (how DistributedRunner passes them: an actor handle among a restartable actor's
        # arguments is a reference Ray cannot restore for a restart, and it warns so in the job's log), or handles
        self.servers = [ray_module().get_actor(server) if isinstance(server, str) else server for server in servers]
        self.index, self.layout, self.sync_every = index, layout, sync_every
        self.node = f"{socket.gethostname()}:{ray_module().get_runtime_context().get_node_id()[:8]}"
        self.incarnation = f"{os.getpid()}@{time.time():.6f}"  # a process Ray restarts is a new incarnation
        earlier, record = ray_module().get(self.servers[0].arrive.remote(index))
        self.seed = seed if not earlier else restarted_seed(seed, earlier)
        self.environments = make_vector(environment, num_environments, seed=self.seed)
        self.agent = create_agent(
            agent_spec,
            states=self.environments.states,
            actions=self.environments.actions,
            seed=self.seed,
            **agent_kwargs,
        )
        if record is not None:  # a restart: where the agent before it was, as of its last chunk
            self._take_over(record)
        self.runner = Runner(self.agent, self.environments, id_=index, torch_threads=torch_threads)
        self._started = False
        self.sync_seconds, self.syncs = 0.0, 0  # time spent waiting for the servers, and how many exchanges
        self.pending: list[Any] | None = None  # the servers' answer to the last change sent, not yet folded in
        self._pull()

    def _pull(self) -> None:
        """Take the servers' parameters (with every change this worker sent: a worker's calls run in order)."""
        ray = ray_module()
        if self.pending is not None:
            ray.get(self.pending)
            self.pending = None
        self.base = self._tensors(ray.get([server.get.remote() for server in self.servers]))
        self.agent.set_parameters(self.base)
        self.pulled_at = self.agent.updates

    def _tensors(self, parts: list[dict[str, np.ndarray]]) -> dict[str, Any]:
        """The servers' arrays as tensors on the agent's device (a GPU's parameters are compared with them)."""
        import torch

        device = self.agent.device
        return {name: torch.from_numpy(np.array(value)).to(device) for part in parts for name, value in part.items()}

    def _push(self) -> None:
        """After an update: send its change to the servers, and fold in their answer to the change sent after the
        previous update (every other worker's changes since), keeping this update's own. One exchange is in flight
        at a time, and it runs while the worker acts: the worker waits only when an exchange takes longer than
        its acting between two updates."""
        started = time.monotonic()
        now = shared_parameters(self.agent)
        change = {name: now[name] - self.base[name] for name in now}
        if self.pending is not None:
            fresh = self._tensors(ray_module().get(self.pending))
            now = {name: fresh[name] + change[name] for name in now}
            self.agent.set_parameters(now)
        self.pending = [
            server.push_pull.remote({name: change[name].cpu().numpy() for name in names})
            for server, names in zip(self.servers, self.layout, strict=True)
        ]
        self.base, self.pulled_at = now, self.agent.updates
        self.sync_seconds += time.monotonic() - started
        self.syncs += 1

    def _settle(self) -> None:
        """Wait until the servers have taken the change in flight, so that a chunk's changes are all on the servers
        when it returns (the driver reads them once the last chunk is in). Its answer is left where it is."""
        if self.pending is not None:
            waited = time.monotonic()
            ray_module().wait(self.pending, num_returns=len(self.pending), fetch_local=False)
            self.sync_seconds += time.monotonic() - waited

    def record(self) -> dict[str, Any]:
        """What a restarted worker's new agent takes over (``_take_over``): its counters, so that exploration and
        the other schedules of the timestep go on where they were, and its run-wide state statistics, which no
        parameter server holds. Its memory and optimizer state are not kept: a restarted agent refills and
        rebuilds them."""
        return {
            "timestep": self.agent.timestep,
            "episode": self.agent.episode,
            "statistics": on_cpu(run_wide_statistics(self.agent)),
        }

    def _take_over(self, record: dict[str, Any]) -> None:
        self.agent.timestep, self.agent.episode = int(record["timestep"]), int(record["episode"])
        load_run_wide_statistics(self.agent, record["statistics"])

    def _keep_record(self) -> None:
        """The record on the first server, after a ``set_state`` (each chunk's, the driver keeps as it counts it)."""
        ray_module().get(self.servers[0].keep.remote(self.index, self.record()))

    def ready(self) -> str:
        """Answers once the worker is built (again, after a restart): which incarnation of it this is."""
        return self.incarnation

    def get_state(self) -> dict[str, Any]:
        """The agent's whole state (to checkpoint), its tensors on the CPU: the driver may have no GPU."""
        return on_cpu(self.agent.state_dict())

    def statistics(self) -> dict[str, dict[str, dict[str, Any]]]:
        """This worker's run-wide state statistics (``run_wide_statistics``), for the driver's agent."""
        return run_wide_statistics(self.agent)

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue from a checkpointed agent state; the next chunk starts new episodes with the servers' model."""
        self.agent.load_state_dict(state)
        self._started = False
        self._keep_record()

    def run(self, steps: int, max_episode_timesteps: int | None, deterministic: bool) -> dict[str, Any]:
        """Up to ``steps`` more steps, from the servers' current parameters, for ``CHUNK_SECONDS`` at most; returns
        the episodes finished meanwhile and the steps taken."""
        self._pull()
        episodes: list[tuple[float, int, float]] = []
        before = self.runner.global_timestep

        def episode_finished(runner: Any, row: int) -> bool:
            episodes.append((runner.episode_rewards[-1], runner.episode_timesteps[-1], runner.episode_times[-1]))
            return True

        started = time.monotonic()

        def step_finished(runner: Any) -> bool:
            if self.agent.updates - self.pulled_at >= self.sync_every:  # the agent learned something: share it
                self._push()
            return time.monotonic() - started < CHUNK_SECONDS  # (the next chunk goes on with its episodes)

        self.runner.run(
            num_timesteps=steps,
            max_episode_timesteps=max_episode_timesteps,
            deterministic=deterministic,
            episode_finished=episode_finished,
            step_finished=step_finished,
            resume=self._started,
        )
        self._started = True
        if self.agent.updates > self.pulled_at:  # updates short of sync_every: the next chunk's pull would drop them
            self._push()
        self._settle()
        return {
            "episodes": episodes,
            "timesteps": self.runner.global_timestep - before,
            "node": self.node,
            "seconds": time.monotonic() - started,
            "sync_seconds": self.sync_seconds,
            "syncs": self.syncs,
            "incarnation": self.incarnation,
            "record": self.record(),  # the driver keeps it on the first server once it has counted this chunk
        }

    def close(self) -> None:
        self.environments.close()


def restarted_seed(seed: int | None, restarts: int) -> int | None:
    """The seed of a worker's incarnation after ``restarts`` restarts (None stays None): one of its own, so that it
    neither replays the episodes its first incarnation's seed started nor draws the same noise, and the same
    in every run that restarts that worker as often. Derived with numpy's SeedSequence, far from the seeds
    ``seed + 1 + i * num_environments + j`` that the workers and their copies start with."""
    if seed is None:
        return None
    return int(np.random.SeedSequence([seed, restarts]).generate_state(1)[0] >> 1)


def shared_parameters(agent: Agent) -> dict[str, Any]:
    """The parameters the servers hold and the workers exchange: every learned one but the target networks'
    (``target``, ``target_critic``, ...). Each worker syncs its own targets from the online networks it pulls, on
    its own schedule: were their changes added up on the servers, the targets of two workers syncing in the same
    exchange would move twice as far as the online network, past it. Only these are copied."""
    return agent.get_parameters([name for name in agent.trainable_modules() if not name.startswith("target")])


def run_wide_statistics(agent: Agent) -> dict[str, dict[str, dict[str, Any]]]:
    """The state dicts of ``agent``'s run-wide state normalizers (``running_standardize`` with
    ``reset_after_batch`` false, as the MuJoCo PPO configs have), by state and by the step's place in its stack:
    what a distributed run's workers learn in their environments and no parameter server holds."""
    from torchforce.core.preprocessors import RunningStandardize

    return {
        name: {
            str(index): step.state_dict()
            for index, step in enumerate(stack.preprocessors)
            if isinstance(step, RunningStandardize) and not step.reset_after_batch
        }
        for name, stack in getattr(agent, "preprocessing", {}).items()  # a learning agent's: the others have none
    }


def load_run_wide_statistics(agent: Agent, statistics: dict[str, dict[str, dict[str, Any]]]) -> None:
    """Each state dict of ``statistics`` (``run_wide_statistics``' form) into the normalizer of ``agent`` it names."""
    for name, steps in statistics.items():
        for index, state in steps.items():
            agent.preprocessing[name].preprocessors[int(index)].load_state_dict(state)


def on_cpu(value: Any) -> Any:
    """``value`` with every tensor in it (nested in dicts, lists and tuples) moved to the CPU."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, dict):
        return {key: on_cpu(item) for key, item in value.items()}
    if type(value) in (list, tuple):
        return type(value)(on_cpu(item) for item in value)
    return value
