"""Distributed training throughput: environment steps per second of ``DistributedRunner`` with 1, 2, ... workers,
against the same agent config in one process, and where the workers' time goes (parameter exchange with the
servers against stepping and learning).

    .venv/bin/python bench/distributed.py                         # 1 and 2 workers (this machine: 2 cores)
    .venv/bin/python bench/distributed.py --workers 1 2 4 8 14    # a 16-core machine
    .venv/bin/python bench/distributed.py --config ppo_cartpole --steps 60000 --time-to 475

Each point starts a private Ray cluster on 127.0.0.1 (its start-up is timed apart), runs ``--steps`` steps of the
shipped config on CartPole-v1 with ``--environments`` copies per worker, and records steps/s over the run, the
workers' seconds spent exchanging parameters, and the mean return of the last 50 episodes. ``--time-to R`` also
records the wall-clock seconds until the mean return of the last 20 episodes first reaches R. Scaling efficiency
at N workers is (steps/s at N) / (N x steps/s at 1). Results go to ``bench/results/distributed-<time>.jsonl``
(one JSON object a line) and a table on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


def one_process(config: str, steps: int, environments: int) -> dict:
    """The same agent and budget in one process: the baseline for the workers' speed."""
    import torch

    from torchforce.agents import create_agent
    from torchforce.configs import shipped
    from torchforce.environments import make_vector
    from torchforce.execution import Runner

    torch.set_num_threads(1)
    vector = make_vector("CartPole-v1", environments, seed=0)
    agent = create_agent(str(shipped("agents", config)), states=vector.states, actions=vector.actions, seed=0)
    runner = Runner(agent, vector)
    started = time.perf_counter()
    runner.run(num_timesteps=steps)
    seconds = time.perf_counter() - started
    rewards = runner.episode_rewards[-50:]
    agent.close()
    vector.close()
    return {
        "workers": 0,
        "steps": runner.global_timestep,
        "seconds": seconds,
        "steps_per_second": runner.global_timestep / seconds,
        "mean_return_50": sum(rewards) / max(len(rewards), 1),
    }


def distributed(
    config: str, steps: int, environments: int, workers: int, time_to: float | None, sync_every: int = 1
) -> dict:
    import ray
    import torch

    from torchforce.agents import create_agent
    from torchforce.configs import shipped
    from torchforce.environments import make
    from torchforce.execution import DistributedRunner
    from torchforce.execution.distributed import OBJECT_STORE
    from torchforce.execution.ray_cluster import init_private

    torch.set_num_threads(1)
    probe = make("CartPole-v1")
    agent = create_agent(str(shipped("agents", config)), states=probe.states, actions=probe.actions, seed=0)
    probe.close()
    folder = tempfile.mkdtemp(prefix="tf-bench-")
    started = time.perf_counter()
    init_private(num_cpus=max(workers, 1), object_store_memory=OBJECT_STORE, temp_dir=folder)
    cluster_seconds = time.perf_counter() - started
    runner = DistributedRunner(
        agent,
        "CartPole-v1",
        num_workers=workers,
        num_parameter_servers=1,
        num_environments=environments,
        seed=0,
        sync_every=sync_every,
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
    return {
        "workers": workers,
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="dqn_cartpole", help="a shipped agent config (default dqn_cartpole)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=40_000, help="environment steps per point")
    parser.add_argument("--environments", type=int, default=4, help="CartPole copies per worker")
    parser.add_argument("--time-to", type=float, help="also time until the mean return (20) reaches this")
    parser.add_argument("--sync-every", type=int, nargs="+", default=[1], help="updates between exchanges")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    import multiprocessing

    context = multiprocessing.get_context("spawn")  # every point in a fresh process: its own Ray, no leftovers
    points = []
    with context.Pool(1, maxtasksperchild=1) as pool:
        points.append(pool.apply(one_process, (args.config, args.steps, args.environments)))
        for sync_every in args.sync_every:
            for workers in args.workers:
                points.append(
                    pool.apply(
                        distributed, (args.config, args.steps, args.environments, workers, args.time_to, sync_every)
                    )
                )
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"distributed-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
    base = {p.get("sync_every"): p["steps_per_second"] for p in points if p["workers"] == 1}
    with open(path, "w") as file:
        for point in points:
            point |= {"config": args.config, "environments": args.environments, "cpus": os.cpu_count()}
            if point["workers"] and point.get("sync_every") in base:  # against 1 worker with the same sync_every
                point["efficiency"] = point["steps_per_second"] / (point["workers"] * base[point["sync_every"]])
            file.write(json.dumps(point) + "\n")
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
