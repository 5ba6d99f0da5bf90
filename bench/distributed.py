"""Distributed training throughput: environment steps per second of ``DistributedRunner`` with 1, 2, ... workers,
against the same agent config in one process, and where the workers' time goes (parameter exchange with the
servers against stepping and learning).

    .venv/bin/python bench/distributed.py                         # 1 and 2 workers (this machine: 2 cores)
    .venv/bin/python bench/distributed.py --workers 1 2 4 8 14    # a 16-core machine
    .venv/bin/python bench/distributed.py --config ppo_cartpole --steps 60000 --time-to 475
    python bench/distributed.py --experiment breakout_ppo --device cuda --workers 1 2 4 8 --environments 8   # a GPU

Each point starts a private Ray cluster on 127.0.0.1 (its start-up is timed apart), runs ``--steps`` steps of the
shipped config on CartPole-v1 with ``--environments`` copies per worker, and records steps/s over the run, the
workers' seconds spent exchanging parameters, and the mean return of the last 50 episodes. ``--time-to R`` also
records the wall-clock seconds until the mean return of the last 20 episodes first reaches R; with
``--per-worker``, ``--steps`` is each worker's, so that a point with many workers lasts long enough to measure.
Scaling efficiency at N workers is (steps/s at N) / (N x steps/s at 1). Results go to
``bench/results/distributed-<time>.jsonl`` (one JSON object a line) and a table on stdout.

``--experiment NAME`` takes the agent and the environment of a task of ``bench/tasks.py`` instead (the shipped
experiment's, as its worker builds them: ``breakout_ppo``, Breakout from pixels). ``--device`` is where the agents
compute: the one process's, and the workers' (``cuda``: each worker asks Ray for a share of the machine's GPUs,
``DistributedRunner``'s ``worker_resources``; the driver's agent, which only holds the servers' parameters, stays
on the CPU as ``tfcli``'s distributed driver keeps it). Each point records the device the workers' agents
actually computed on, asked of the workers themselves.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


def workload(config: str, experiment: str | None, device: str) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """A point's environment spec, agent spec (on ``device``) and the agent's other keyword arguments: the shipped
    agent ``config`` on CartPole-v1, or the agent and environment of the task ``experiment`` of bench/tasks.py."""
    from torchforce.configs import shipped

    if experiment is None:
        return "CartPole-v1", {**json.loads(shipped("agents", config).read_text()), "device": device}, {}
    from tasks import TASKS
    from tasks import experiment as resolved

    from torchforce.client.experiment_build import acted_environment, worker_agent_spec

    spec = resolved(TASKS[experiment])
    network = {} if spec["network"] is None else {"network": spec["network"]}
    agent = {key: value for key, value in worker_agent_spec(spec).items() if key != "seed"}  # each point seeds its own
    return acted_environment(spec, spec["environment"]), {**agent, "device": device}, network


def one_process(config: str, steps: int, environments: int, experiment: str | None = None, device: str = "cpu") -> dict:
    """The same agent and budget in one process: the baseline for the workers' speed."""
    import torch

    from torchforce.agents import create_agent
    from torchforce.environments import make_vector
    from torchforce.execution import Runner

    torch.set_num_threads(1)
    environment, agent_spec, extra = workload(config, experiment, device)
    vector = make_vector(environment, environments, seed=0)
    agent = create_agent(agent_spec, states=vector.states, actions=vector.actions, seed=0, **extra)
    runner = Runner(agent, vector)
    started = time.perf_counter()
    runner.run(num_timesteps=steps)
    seconds = time.perf_counter() - started
    rewards = runner.episode_rewards[-50:]
    computed = str(agent.device)
    agent.close()
    vector.close()
    return {
        "workers": 0,
        "worker_devices": [computed],
        "steps": runner.global_timestep,
        "seconds": seconds,
        "steps_per_second": runner.global_timestep / seconds,
        "mean_return_50": sum(rewards) / max(len(rewards), 1),
    }


def distributed(
    config: str,
    steps: int,
    environments: int,
    workers: int,
    time_to: float | None,
    sync_every: int = 1,
    experiment: str | None = None,
    device: str = "cpu",
) -> dict:
    import ray
    import torch

    from torchforce.agents import create_agent
    from torchforce.environments import make
    from torchforce.execution import DistributedRunner
    from torchforce.execution.distributed import OBJECT_STORE
    from torchforce.execution.ray_cluster import init_private

    torch.set_num_threads(1)
    environment, agent_spec, extra = workload(config, experiment, device)
    probe = make(environment)
    driver_spec = {**agent_spec, "device": "cpu"}  # the driver's agent holds parameters only
    agent = create_agent(driver_spec, states=probe.states, actions=probe.actions, seed=0, **extra)
    probe.close()
    folder = tempfile.mkdtemp(prefix="tf-bench-")
    started = time.perf_counter()
    gpus = torch.cuda.device_count()
    init_private(num_cpus=max(workers, 1), num_gpus=gpus, object_store_memory=OBJECT_STORE, temp_dir=folder)
    cluster_seconds = time.perf_counter() - started
    runner = DistributedRunner(
        agent,
        environment,
        num_workers=workers,
        num_parameter_servers=1,
        num_environments=environments,
        seed=0,
        sync_every=sync_every,
        agent_spec=agent_spec,
        agent_kwargs=extra,
    )
    # where the workers' agents compute, and the share of a GPU Ray gave each (its CUDA_VISIBLE_DEVICES)
    placed = ray.get(
        [
            worker.__ray_call__.remote(
                lambda self: f"{self.agent.device} (GPUs {ray.get_runtime_context().get_accelerator_ids()['GPU']})"
            )
            for worker in runner.workers
        ]
    )
    startup = time.perf_counter() - started
    reached: list[float] = []
    begin = time.perf_counter()

    def episode_finished(r, _worker: int) -> bool:
        recent = r.episode_rewards[-20:]
        if time_to is not None and not reached and len(recent) == 20 and sum(recent) / 20 >= time_to:
            reached.append(time.perf_counter() - begin)
        return True

    runner.run(num_timesteps=steps, episode_finished=episode_finished)
    seconds = time.perf_counter() - begin
    status = runner.worker_status()
    rewards = runner.episode_rewards[-50:]
    runner.close()
    ray.shutdown()
    shutil.rmtree(folder, ignore_errors=True)  # the private cluster's session files and logs
    return {
        "workers": workers,
        "worker_devices": sorted(set(placed)),
        "cluster_gpus": gpus,
        "steps": runner.global_timestep,
        "seconds": seconds,
        "steps_per_second": runner.global_timestep / seconds,
        "startup_seconds": startup,
        "cluster_seconds": cluster_seconds,
        "sync_fraction": sum(w.get("sync_seconds", 0.0) for w in status) / max(seconds * workers, 1e-9),
        "syncs": sum(w.get("syncs", 0) for w in status),
        "sync_every": sync_every,
        "wait_ms_per_sync": 1000
        * sum(w.get("sync_seconds", 0.0) for w in status)
        / max(sum(w.get("syncs", 0) for w in status), 1),
        "mean_return_50": sum(rewards) / max(len(rewards), 1),
        "seconds_to_threshold": reached[0] if reached else None,
    }


def planned_points(args: argparse.Namespace) -> list[tuple[Callable[..., dict], tuple]]:
    """What to run, in order: the one process, then each number of workers for each ``sync_every``."""
    what = (args.experiment, args.device)
    plan: list[tuple[Callable[..., dict], tuple]] = [(one_process, (args.config, args.steps, args.environments, *what))]
    for sync_every in args.sync_every:
        for workers in args.workers:
            steps = args.steps * workers if args.per_worker else args.steps
            arguments = (args.config, steps, args.environments, workers, args.time_to, sync_every, *what)
            plan.append((distributed, arguments))
    return plan


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="dqn_cartpole", help="a shipped agent config (default dqn_cartpole)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=40_000, help="environment steps per point")
    parser.add_argument(
        "--per-worker",
        action="store_true",
        help="--steps is each worker's: N workers run N x steps (the one process: steps), so every point lasts "
        "about as long where they scale",
    )
    parser.add_argument("--environments", type=int, default=4, help="environment copies per worker")
    parser.add_argument("--experiment", help="the agent and environment of this task of bench/tasks.py instead")
    parser.add_argument("--device", default="cpu", help="where the agents compute (cpu, cuda, auto)")
    parser.add_argument("--time-to", type=float, help="also time until the mean return (20) reaches this")
    parser.add_argument("--sync-every", type=int, nargs="+", default=[1], help="updates between exchanges")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    return parser.parse_args(argv)


def main() -> None:
    args = parse()
    import multiprocessing

    context = multiprocessing.get_context("spawn")  # every point in a fresh process: its own Ray, no leftovers
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"distributed-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
    points: list[dict] = []
    base: dict = {}  # steps/s of 1 worker, by sync_every: each point's efficiency is against it
    plan = planned_points(args)
    with context.Pool(1, maxtasksperchild=1) as pool, open(path, "w") as file:
        for function, arguments in plan:  # each record written as it comes: a run stopped early keeps its points
            point = pool.apply(function, arguments)
            point |= {"config": args.experiment or args.config, "device": args.device}
            point |= {"environments": args.environments, "cpus": os.cpu_count()}
            if point["workers"] == 1:
                base[point.get("sync_every")] = point["steps_per_second"]
            if point["workers"] and point.get("sync_every") in base:  # against 1 worker with the same sync_every
                point["efficiency"] = point["steps_per_second"] / (point["workers"] * base[point["sync_every"]])
            file.write(json.dumps(point) + "\n")
            file.flush()
            points.append(point)
            label = "one process" if point["workers"] == 0 else f"{point['workers']} workers"
            print(
                f"  {label}: {point['steps_per_second']:,.0f} steps/s, the agents on "
                f"{', '.join(point['worker_devices'])}",
                flush=True,
            )
    print(
        f"{'workers':>8} {'sync/upd':>8} {'steps/s':>9} {'efficiency':>10} {'sync share':>10} {'ms/sync':>8} "
        f"{'startup s':>9} {'mean50':>7} {'to thr. s':>9}"
    )
    for p in points:

        def show(key: str, form: str, p: dict = p) -> str:
            return format(p[key], form) if p.get(key) is not None else "-"

        label = "1 proc" if p["workers"] == 0 else str(p["workers"])
        print(
            f"{label:>8} {show('sync_every', '8d')} {show('steps_per_second', '9.0f')} {show('efficiency', '10.2f')} "
            f"{show('sync_fraction', '10.2f')} {show('wait_ms_per_sync', '8.2f')} {show('startup_seconds', '9.1f')} "
            f"{show('mean_return_50', '7.1f')} {show('seconds_to_threshold', '9.1f')}"
        )
    print(f"records: {path}")


if __name__ == "__main__":
    main()
