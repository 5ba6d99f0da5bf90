"""Steps per second of the Atari agents on each torch device: torchforce's shipped ``breakout_ppo`` and
``breakout_dqn`` acting and learning on the CPU and on a GPU, with their environments in the agent's process
(``sync``) or in worker processes (``subprocess``), and where the time goes (updates against acting and stepping).

    python bench/devices.py                      # every point on every device here (cpu, and cuda if available)
    python bench/devices.py --devices cuda --tasks breakout_ppo --environments 8 16 32 --modes subprocess
    python bench/devices.py --threads 1 16       # CPU points with 1 and with 16 torch threads
    python bench/devices.py --quick              # a smoke of the harness: a few hundred steps a point
    python bench/devices.py --mixed-precision    # the same points with the networks in bfloat16 (mixed_precision)
    python bench/devices.py --devices cuda --libraries torchforce sb3   # and SB3's points beside torchforce's

Each point is a fresh process (``learning.run_child``): the experiment's agent and environments as its worker
builds them (``tasks.py``), with the point's device, number of environments and vectorization. It first runs
``--warmup`` steps untimed (allocations, cuDNN's choice of kernels, a DQN replay memory filling to its first
update), then times ``--steps`` more. DQN is measured in its steady state: updates from the end of the warm-up on,
and epsilon at its final value throughout, since acting at random leaves the network out (``Agent._explores_first``)
and would make the first 100k steps look faster than the rest. Updates are timed around ``Agent._learn``, with
the device synchronized before the clock stops, so a GPU's queued kernels count where they were launched.

On CUDA a last untimed segment counts the host's waits for the device (torch's sync debug mode warns at each):
per ``act``/``observe`` step outside updates, where the actions' one trip back to the host is the only wait the
hot path needs, and per update.

torchforce's points compute in float32 (the ``*_float32`` variants of ``bench/tasks.py``), whatever the shipped
configs' ``mixed_precision: "auto"`` would choose on the machine. ``--mixed-precision`` runs each point's agent with
``mixed_precision: "bfloat16"`` (the ``*_bfloat16`` variants): its networks under torch.autocast, on a GPU on its
tensor cores.

``--libraries torchforce sb3`` adds Stable-Baselines3's points: the zoo's algorithm and hyperparameters
(``sb3_tasks.ZOO``, as ``bench/run.py --only tasks`` trains them) on the same environments, with the zoo's number
of them in the agent's process (8 for PPO, 1 for DQN), measured as torchforce's are: ``--warmup`` steps untimed,
DQN learning from the warm-up's end (``learning_starts``) with epsilon at its final value throughout, updates timed
around SB3's ``train``. That gives the two libraries' steady-state speeds side by side on one device, which a
learning run of ``bench/run.py`` cannot show for DQN on Atari in a few minutes: the zoo's DQN acts at random for its
first 100k steps.

Records go to ``<out>/devices-<time>.jsonl``; the table is printed and written beside them as ``.md``. Never part
of ``make test`` or CI. A GPU machine runs the whole default set in a few minutes: see bench/README.md, "Devices".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# the environments of each task's points: (number, vectorization); the experiment's own first
POINTS = {
    "breakout_ppo": [(8, "sync"), (16, "subprocess")],
    "breakout_dqn": [(1, "sync")],
}
STEPS = {"breakout_ppo": 8192, "breakout_dqn": 4000}  # 8 PPO updates of 1,024 rows; 1,000 DQN updates
WARMUP = {"breakout_ppo": 1024, "breakout_dqn": 1000}
SYNC_ROWS = {"breakout_ppo": 1024, "breakout_dqn": 512}  # the segment that counts host synchronizations (CUDA)
QUICK_STEPS, QUICK_WARMUP = 256, 64
SYNC_WARNING = "called a synchronizing CUDA operation"  # what torch's sync debug mode says at each host wait


def build(
    task: str, device: str, environments: int, mode: str, warmup: int, agent: dict[str, Any] | None = None
) -> tuple[Any, Any]:
    """The agent and environments of ``task``'s experiment with the point's settings (see the module docstring);
    ``agent``: options that replace the experiment's agent's."""
    from tasks import TASKS, experiment

    from torchforce.agents import create_agent
    from torchforce.client.experiment_build import acted_environment, worker_agent_spec
    from torchforce.environments import VectorEnvironment, make

    spec = {**experiment(TASKS[task]), "num_environments": environments, "vectorization": mode}
    agent_spec = {**worker_agent_spec(spec), "device": device, **(agent or {})}
    if agent_spec["type"] == "dqn":  # the steady state: updating from the warm-up's end, epsilon at its final value
        agent_spec["update_mode"] = {**agent_spec["update_mode"], "first_update": warmup}
        final = agent_spec["actions_exploration"]["final_epsilon"]
        agent_spec["actions_exploration"] = {"type": "constant", "constant": final}
    environment = acted_environment(spec, spec["environment"])
    vector = VectorEnvironment(factory=lambda: make(environment), num_environments=environments, mode=mode)
    vector.seed(0)
    network = {} if spec["network"] is None else {"network": spec["network"]}
    return create_agent(agent_spec, states=vector.states, actions=vector.actions, **network), vector


def count_host_syncs(runner: Any, agent: Any, rows: int, environments: int) -> dict[str, float | None]:
    """Run ``rows`` more environment steps with torch's CUDA sync debug mode on, and count its warnings: per act
    (one ``act`` and ``observe`` of every environment) outside updates, and per update (``Agent._learn``)."""
    import warnings

    import torch

    counts = {"acting": 0, "updates": 0}
    calls = {"updates": 0}
    where = ["acting"]
    learn = agent._learn

    def counted_learn(*args: Any, **kwargs: Any) -> Any:
        where[0] = "updates"
        calls["updates"] += 1
        try:
            return learn(*args, **kwargs)
        finally:
            where[0] = "acting"

    def on_warning(message: Any, *rest: Any, **options: Any) -> None:
        if SYNC_WARNING in str(message):  # not torch's one "prototype feature" notice when the mode is set
            counts[where[0]] += 1

    agent._learn = counted_learn
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = on_warning
        torch.cuda.set_sync_debug_mode("warn")
        try:
            runner.run(num_timesteps=rows)
        finally:
            torch.cuda.set_sync_debug_mode("default")
            agent._learn = learn
    acts = rows // environments
    return {
        "host_syncs_per_act": counts["acting"] / acts,
        "host_syncs_per_update": counts["updates"] / calls["updates"] if calls["updates"] else None,
    }


def clocked(update: Any, synchronize: Any, timed: dict[str, Any]) -> Any:
    """``update`` (an agent's or SB3's update call) adding its seconds, the device synchronized before the clock
    stops, to ``timed["seconds"]``, and one to ``timed["updates"]`` per call."""

    def timed_update(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return update(*args, **kwargs)
        finally:
            synchronize()
            timed["seconds"] += time.perf_counter() - started
            timed["updates"] += 1

    return timed_update


def sb3_child(arguments: argparse.Namespace) -> dict[str, Any]:
    """SB3's point (see the module docstring): the zoo's entry for the task, with DQN in its steady state."""
    import sb3_tasks
    import torch
    from stable_baselines3.common.callbacks import BaseCallback
    from tasks import TASKS, atari_setup, experiment

    device = torch.device(arguments.device)
    synchronize = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    task = TASKS[arguments.task]
    entry = sb3_tasks.ZOO[task.sb3]
    if entry["algorithm"] == "dqn":
        final = entry["hyperparameters"]["exploration_final_eps"]
        settings = {"learning_starts": arguments.warmup, "exploration_initial_eps": final}
        entry = {**entry, "hyperparameters": {**entry["hyperparameters"], **settings}}
    game, options = atari_setup(experiment(task)["environment"])
    games = tempfile.TemporaryDirectory(prefix="tf-sb3-")  # the monitors' game records, unread here
    environments = sb3_tasks.atari_environments(entry, game, options, 0, Path(games.name))
    model = sb3_tasks.build(entry, environments, seed=0, device=arguments.device)
    timed = {"seconds": 0.0, "updates": 0, "started": 0.0, "from": 0}

    class Clock(BaseCallback):  # starts the clock once the warm-up's steps are done
        def _on_step(self) -> bool:
            if not timed["started"] and self.num_timesteps >= arguments.warmup:
                synchronize()
                if device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats(device)
                timed.update(seconds=0.0, updates=0, started=time.perf_counter(), **{"from": self.num_timesteps})
            return True

    model.train = clocked(model.train, synchronize, timed)
    try:
        model.learn(total_timesteps=arguments.warmup + arguments.steps, callback=Clock())
        synchronize()
        seconds = time.perf_counter() - timed["started"]
    finally:
        environments.close()
        games.cleanup()
    steps = int(model.num_timesteps) - int(timed["from"])
    return {
        "steps": steps,
        "seconds": seconds,
        "steps_per_second": steps / seconds,
        "updates": timed["updates"],
        "update_seconds": timed["seconds"],
        "acting_seconds": seconds - timed["seconds"],
        "gpu_peak_mb": torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "environments_used": entry["n_envs"],
        "host_syncs_per_act": None,
        "host_syncs_per_update": None,
    }


def child(arguments: argparse.Namespace) -> None:
    import torch
    from learning import peak_rss_mb

    from torchforce.execution import Runner

    torch.set_num_threads(arguments.threads)
    if arguments.library == "sb3":
        print(json.dumps(sb3_child(arguments) | {"peak_rss_mb": peak_rss_mb()}))
        return
    device = torch.device(arguments.device)
    synchronize = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    agent, vector = build(arguments.task, arguments.device, arguments.environments, arguments.mode, arguments.warmup)
    timed = {"seconds": 0.0, "updates": 0}
    learn = agent._learn
    agent._learn = clocked(learn, synchronize, timed)
    runner = Runner(agent, vector, torch_threads=arguments.threads)
    try:
        runner.run(num_timesteps=arguments.warmup)
        synchronize()
        timed.update(seconds=0.0, updates=0)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        started = time.perf_counter()
        runner.run(num_timesteps=arguments.steps)
        synchronize()
        seconds = time.perf_counter() - started
        agent._learn = learn
        syncs: dict[str, Any] = {"host_syncs_per_act": None, "host_syncs_per_update": None}
        if device.type == "cuda":
            try:
                syncs = count_host_syncs(runner, agent, arguments.sync_rows, arguments.environments)
            except Exception as error:  # a count that fails leaves the timed figures standing
                syncs["host_syncs_error"] = f"{type(error).__name__}: {error}"
    finally:
        runner.close()
    result = {
        "steps": arguments.steps,
        "seconds": seconds,
        "steps_per_second": arguments.steps / seconds,
        "updates": timed["updates"],
        "update_seconds": timed["seconds"],
        "acting_seconds": seconds - timed["seconds"],  # acting, observing, the environments' steps
        "peak_rss_mb": peak_rss_mb(),
        "gpu_peak_mb": torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        **syncs,
    }
    print(json.dumps(result))


def run_point(point: dict[str, Any]) -> dict[str, Any]:
    from learning import run_child

    command = [sys.executable, str(HERE / "devices.py"), "--child"]
    for key in ("task", "library", "device", "environments", "mode", "threads", "steps", "warmup", "sync_rows"):
        command += [f"--{key.replace('_', '-')}", str(point[key])]
    what = f"{point['library']}'s {point['task']} on {point['device']} ({point['environments']} {point['mode']})"
    return run_child(command, what)


def plan(arguments: argparse.Namespace) -> list[dict[str, Any]]:
    import torch

    devices = arguments.devices or ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    points = []
    for base in arguments.tasks:
        # variants of bench/tasks.py: float32 unless asked, whatever the shipped "auto" chooses on this machine
        task = f"{base}_bfloat16" if arguments.mixed_precision else f"{base}_float32"
        if arguments.environments:
            settings = [(count, mode) for count in arguments.environments for mode in arguments.modes or ["sync"]]
        else:
            settings = [(count, mode) for count, mode in POINTS[base] if not arguments.modes or mode in arguments.modes]
        steps = QUICK_STEPS if arguments.quick else arguments.steps or STEPS[base]
        warmup = QUICK_WARMUP if arguments.quick else arguments.warmup or WARMUP[base]
        sync_rows = QUICK_WARMUP if arguments.quick else SYNC_ROWS[base]
        for library in arguments.libraries:
            if library == "sb3":  # the zoo's environments, in SB3's process; torchforce's variants are its own
                if arguments.mixed_precision:
                    continue
                import sb3_tasks
                from tasks import TASKS

                library_settings = [(sb3_tasks.ZOO[TASKS[base].sb3]["n_envs"], "sync")]
            else:
                library_settings = settings
            for device in devices:
                for threads in arguments.threads if device == "cpu" else [1]:
                    for count, mode in library_settings:
                        points.append(
                            {"task": task if library == "torchforce" else base, "library": library}
                            | {"device": device, "environments": count}
                            | {"mode": mode, "threads": threads, "steps": steps, "warmup": warmup}
                            | {"sync_rows": sync_rows}
                        )
    return points


def table(records: list[dict[str, Any]]) -> str:
    """The records as a markdown table; each GPU point's speed-up over the CPU point of the same library, task,
    environments and vectorization with one torch thread."""

    def key(record: dict[str, Any]) -> tuple:
        return record.get("library", "torchforce"), record["task"], record["environments"], record["mode"]

    cpu = {
        key(record): record["steps_per_second"]
        for record in records
        if record["device"] == "cpu" and record["threads"] == 1 and record.get("steps_per_second")
    }
    lines = [
        "| library | task | device | envs | vectorization | torch threads | steps/s | vs CPU | updates | "
        "ms per update | update share | peak RSS MB | GPU peak MB | host syncs per act, per update |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for record in records:
        device = record.get("device_name") or record["device"]
        where = (
            f"| {record.get('library', 'torchforce')} | {record['task']} | {device} | {record['environments']} | "
            f"{record['mode']} | {record['threads']} |"
        )
        if record.get("error"):
            lines.append(f"{where} failed | | | | | | | |")
            continue
        base = cpu.get(key(record))
        speedup = f"{record['steps_per_second'] / base:.2f}x" if base and record["device"] != "cpu" else ""
        per_update = 1e3 * record["update_seconds"] / record["updates"] if record["updates"] else None
        gpu = "" if record["gpu_peak_mb"] is None else f"{record['gpu_peak_mb']:,.0f}"
        syncs = ""
        if record.get("host_syncs_per_act") is not None:
            in_updates = record["host_syncs_per_update"]
            syncs = f"{record['host_syncs_per_act']:.2f}, " + ("-" if in_updates is None else f"{in_updates:.1f}")
        elif record.get("host_syncs_error"):
            syncs = "failed"
        lines.append(
            f"{where} {record['steps_per_second']:,.0f} | {speedup} | {record['updates']} | "
            f"{'-' if per_update is None else f'{per_update:.1f}'} | "
            f"{record['update_seconds'] / record['seconds']:.0%} | {record['peak_rss_mb']:,.0f} | {gpu} | {syncs} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", choices=sorted(POINTS), default=list(POINTS))
    parser.add_argument("--devices", nargs="+", help="torch devices (default: cpu, and cuda where available)")
    parser.add_argument(
        "--libraries", nargs="+", choices=("torchforce", "sb3"), default=["torchforce"], help="whose agents"
    )
    parser.add_argument("--environments", nargs="+", type=int, help="numbers of environments (default: per task)")
    parser.add_argument("--modes", nargs="+", choices=("sync", "subprocess"), help="vectorizations (default: per task)")
    parser.add_argument("--threads", nargs="+", type=int, default=[1], help="torch threads of the CPU points")
    parser.add_argument("--steps", type=int, help="timed environment steps a point (default: per task)")
    parser.add_argument("--warmup", type=int, help="untimed steps before them (default: per task)")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_STEPS} steps a point: a smoke of the harness")
    parser.add_argument(
        "--mixed-precision", action="store_true", help='the agents with mixed_precision "bfloat16" (autocast)'
    )
    parser.add_argument("--out", type=Path, default=HERE / "results", help="directory of the records")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--task", help=argparse.SUPPRESS)
    parser.add_argument("--library", help=argparse.SUPPRESS)
    parser.add_argument("--device", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--sync-rows", type=int, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child:
        arguments.environments, arguments.threads = int(arguments.environments[0]), int(arguments.threads[0])
        child(arguments)
        return
    arguments.out.mkdir(parents=True, exist_ok=True)
    stem = arguments.out / f"devices-{time.strftime('%Y%m%d-%H%M%S')}"
    records = []
    with open(stem.with_suffix(".jsonl"), "w") as handle:
        for point in plan(arguments):
            try:
                record = point | run_point(point) | {"error": None}
            except RuntimeError as error:
                record = point | {"error": str(error)}
                print(error, file=sys.stderr, flush=True)
            record["cores"] = os.cpu_count()
            records.append(record)
            handle.write(json.dumps(record) + "\n")
            handle.flush()
            if not record["error"]:
                print(
                    f"  {point['library']} {point['task']} {point['device']} {point['environments']} {point['mode']} "
                    f"threads {point['threads']}: {record['steps_per_second']:,.0f} steps/s",
                    flush=True,
                )
    report = table(records)
    stem.with_suffix(".md").write_text(report + "\n")
    print(report)
    print(f"records: {stem.with_suffix('.jsonl')}")


if __name__ == "__main__":
    main()
