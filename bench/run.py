"""torchforce against Stable-Baselines3 on CartPole-v1: micro figures and learning figures, one command; and, on
its own, learning on MuJoCo and Atari tasks (``bench/tasks.py``).

    make bench                          # everything (about 20-40 minutes), updates bench/README.md
    make bench BENCH_ARGS=--quick       # a few minutes: shorter micro loops, one seed
    python bench/run.py --only micro    # one part; --seeds 5, --out DIR
    python bench/run.py --only tasks --tasks hopper_ppo --seeds 3 --steps 50000   # MuJoCo/Atari tasks
    python bench/run.py --only tasks --quick                                      # every task, 3,000 steps, 1 seed
    python bench/run.py --only tasks --tasks pong_ppo --seeds 3 --jobs 6          # 6 runs at once (6+ cores)
    python bench/run.py --only tasks --tasks halfcheetah_ddpg --seeds 1 --first-seed 1   # seed 1 only, to add

Raw records go to ``<out>/<run id>.jsonl`` (one JSON object a line, comparable across runs) with the episode logs
beside them; the report (tables, ratios, learning-curve PNGs) is written from those records. A full run (all parts,
not --quick) also rewrites the results section of bench/README.md and its plots under bench/report/. Seeds that did
not fit one session run later with ``--first-seed`` (their plots stay beside their records), and ``python
bench/report.py FIRST.jsonl LATER.jsonl --plots bench/report`` reports the runs together (each seed's pair of
libraries still ran side by side, on one day).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from importlib import metadata
from pathlib import Path
from typing import Any, TextIO

HERE = Path(__file__).resolve().parent
ALGORITHMS = ("ppo", "dqn")
LIBRARIES = ("torchforce", "sb3")
QUICK_TASK_STEPS = 3_000  # --only tasks --quick: a smoke of the whole harness, not a measurement


def machine() -> dict[str, Any]:
    import os

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next(line.split(":", 1)[1].strip() for line in handle if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    versions = {name: _version(name) for name in ("torchforce", "torch", "stable_baselines3", "gymnasium", "numpy")}
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "system": platform.platform(),
        "versions": versions,
        "torch_threads": 1,
    }


def _version(name: str) -> str | None:
    """The installed distribution's version; for a package run from a source tree on PYTHONPATH (the GPU
    machine's torchforce), the module's own ``__version__``."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        import importlib

        try:
            return getattr(importlib.import_module(name), "__version__", None)
        except ImportError:
            return None


class Records:
    """Appends records to the run's JSON-lines file and keeps them for the report."""

    def __init__(self, path: Path, run_id: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path, self.run_id = path, run_id
        self.handle: TextIO = open(path, "w")  # noqa: SIM115
        self.all: list[dict[str, Any]] = []

    def add(self, kind: str, record: dict[str, Any]) -> None:
        record = {"run": self.run_id, "kind": kind, **record}
        self.all.append(record)
        self.handle.write(json.dumps(record) + "\n")
        self.handle.flush()

    def close(self) -> None:
        self.handle.close()


def run_micro(records: Records, quick: bool) -> None:
    import micro

    for record in micro.run(quick=quick):
        records.add("micro", record)
        shown = {key: round(value, 1) if isinstance(value, float) else value for key, value in record.items()}
        print("  micro", json.dumps(shown), flush=True)


def run_learning(records: Records, seeds: list[int], cap: int, eval_every: int, logs: Path) -> None:
    """Every (seed, algorithm) pair runs both libraries back to back, alternating which goes first, so slow phases
    of a shared machine hit both."""
    from learning import run_in_subprocess

    logs.mkdir(parents=True, exist_ok=True)
    for index, seed in enumerate(seeds):
        for algorithm in ALGORITHMS:
            order = LIBRARIES if index % 2 == 0 else LIBRARIES[::-1]
            for library in order:
                log = logs / f"{library}-{algorithm}-seed{seed}.jsonl"
                result = run_in_subprocess(
                    library, algorithm, seed=seed, cap=cap, eval_every=eval_every, episode_log=log
                )
                records.add(
                    "learning",
                    {
                        "library": library,
                        "algorithm": algorithm,
                        "seed": seed,
                        "cap": cap,
                        "eval_every": eval_every,
                        "episode_log": str(log),
                        **result,
                    },
                )
                print(
                    f"  learning {library:10s} {algorithm} seed {seed}: steps to 475 "
                    f"{result['timesteps_to_threshold']}, train s {_round(result['seconds_to_threshold'])}, "
                    f"eval s {result['evaluation_seconds']:.1f}, peak RSS {result['peak_rss_mb']:.0f} MB",
                    flush=True,
                )


# What a task run's child reports (tasks.child), all None where it failed: every task record has these keys.
TASK_RESULT: dict[str, Any] = dict.fromkeys(
    (
        "steps",
        "episodes",
        "final_return",
        "final_episodes",
        "steps_to_threshold",
        "seconds_to_threshold",
        "train_seconds",
        "steps_per_second",
        "process_seconds",
        "peak_rss_mb",
        "environments",
        "settings",
    )
)


def task_names(asked: str | None, device: str = "cpu") -> tuple[list[str], dict[str, str]]:
    """The tasks to run (``asked``: comma-separated; None: every shipped experiment, no variant) that can run here
    on the torch ``device``, and why the others cannot."""
    from tasks import TASKS, unavailable

    if asked is None:
        names = [name for name, task in TASKS.items() if not task.agent]
    else:
        names = [name.strip() for name in asked.split(",") if name.strip()]
    unknown = [name for name in names if name not in TASKS]
    if unknown:
        raise SystemExit(f"unknown task(s) {', '.join(unknown)}; known: {', '.join(TASKS)}")
    reasons = {name: unavailable(name, device) for name in names}
    for name, reason in reasons.items():
        if reason is not None:
            print(f"task {name}: unavailable, {reason}", flush=True)
    return [name for name in names if reasons[name] is None], {n: r for n, r in reasons.items() if r is not None}


def run_tasks(
    records: Records, names: list[str], seeds: list[int], steps: int | None, device: str, logs: Path, jobs: int = 1
) -> None:
    """Every (task, seed) trains both libraries, alternating which goes first, as the learning runs do; ``jobs``
    runs at a time (each on one torch thread, so up to one a core without slowing the others down). ``steps``: the
    budget of every run (None: each experiment's ``total_timesteps``). A run that fails is recorded with its
    error, and the others go on. Records are written in plan order."""
    from concurrent.futures import ThreadPoolExecutor

    from tasks import SMOOTHING, TASKS, experiment, run_in_subprocess

    logs.mkdir(parents=True, exist_ok=True)
    planned: list[tuple[dict[str, Any], Path]] = []
    for name in names:
        task = TASKS[name]
        budget = steps or int(experiment(task)["total_timesteps"])
        print(f"task {name}: {budget:,} steps a run, seeds {seeds}", flush=True)
        for index, seed in enumerate(seeds):
            for library in LIBRARIES if index % 2 == 0 else LIBRARIES[::-1]:
                stem = logs / f"{name}-{library}-seed{seed}"
                record = {"task": name, "library": library, "seed": seed, "budget": budget, "device": device}
                record |= {"threshold": task.threshold, "window": task.window, "smoothing": SMOOTHING}
                record |= {"atari": task.atari, "note": task.note, "curve": str(stem.with_suffix(".jsonl"))}
                planned.append((record, stem))

    def train(plan: tuple[dict[str, Any], Path]) -> dict[str, Any]:
        record, stem = plan
        try:
            result = run_in_subprocess(
                record["task"],
                record["library"],
                seed=record["seed"],
                steps=record["budget"],
                device=device,
                curve=stem.with_suffix(".jsonl"),
                games=stem.with_name(stem.name + "-games"),
            )
            return record | {**TASK_RESULT, **result, "error": None}
        except RuntimeError as error:
            print(f"  {error}", flush=True)
            return record | {**TASK_RESULT, "error": str(error)}

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for record in pool.map(train, planned):
            records.add("task", record)
            print(
                f"  {record['task']} {record['library']:10s} seed {record['seed']}: final return "
                f"{_round(record['final_return'])}, train s {_round(record['train_seconds'])}, steps/s "
                f"{_round(record['steps_per_second'])}, peak RSS {_round(record['peak_rss_mb'])} MB",
                flush=True,
            )


def _round(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description="torchforce vs Stable-Baselines3 benchmarks: CartPole-v1; MuJoCo and Atari tasks"
    )
    parser.add_argument("--quick", action="store_true", help="short micro loops and one seed (a few minutes)")
    parser.add_argument("--seeds", type=int, help="number of seeds of the learning runs (default 10; --quick: 1)")
    parser.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="the first seed (default 0): --seeds 2 --first-seed 1 runs seeds 1 and 2, to add to an earlier run",
    )
    parser.add_argument(
        "--only", choices=("micro", "learning", "tasks"), help="run one part only (tasks run only when asked)"
    )
    parser.add_argument("--cap", type=int, default=100_000, help="environment steps per learning run at most")
    parser.add_argument("--eval-every", type=int, default=2_500, help="steps between evaluations")
    parser.add_argument("--out", type=Path, default=HERE / "results", help="directory of the raw results")
    parser.add_argument(
        "--tasks",
        help="--only tasks: which, comma-separated (default: every shipped experiment that can run; variants such "
        "as breakout_ppo_bfloat16 and halfcheetah_ppo_compiled only by name)",
    )
    parser.add_argument("--steps", type=int, help="--only tasks: steps a run (default: the experiment's; --quick 3000)")
    parser.add_argument("--device", default="cpu", help="--only tasks: the torch device of both libraries")
    parser.add_argument(
        "--jobs", type=int, default=1, help="--only tasks: runs at a time, one torch thread each (at most the cores)"
    )
    arguments = parser.parse_args()
    tasks = arguments.only == "tasks"
    if arguments.first_seed < 0:
        parser.error(f"--first-seed must be 0 or more, got {arguments.first_seed}")
    count = arguments.seeds or (1 if arguments.quick else 3 if tasks else 10)
    seeds = list(range(arguments.first_seed, arguments.first_seed + count))
    names, unavailable = task_names(arguments.tasks, arguments.device) if tasks else ([], {})
    steps = arguments.steps or (QUICK_TASK_STEPS if arguments.quick and tasks else None)

    run_id = time.strftime("%Y%m%d-%H%M%S")
    records = Records(arguments.out / f"{run_id}.jsonl", run_id)
    records.add(
        "meta",
        {
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "machine": machine(),
            "quick": arguments.quick,
            "seeds": seeds,
            "only": arguments.only,
            "tasks": names,
            "unavailable": unavailable,
            "steps": steps,
            "device": arguments.device,
        },
    )
    started = time.perf_counter()
    try:
        if arguments.only in (None, "micro"):
            print("micro figures", flush=True)
            run_micro(records, arguments.quick)
        if arguments.only in (None, "learning"):
            print(f"learning figures: seeds {seeds}, cap {arguments.cap}", flush=True)
            run_learning(records, seeds, arguments.cap, arguments.eval_every, arguments.out / run_id)
        if tasks:
            run_tasks(records, names, seeds, steps, arguments.device, arguments.out / run_id, arguments.jobs)
    finally:
        records.close()

    import report

    full = arguments.only is None and not arguments.quick
    plots = HERE / "report" if full else arguments.out / run_id
    # later seeds alone (--first-seed) are part of a run: report.py --plots bench/report draws them with the rest
    task_plots = HERE / "report" if tasks and not arguments.quick and not arguments.first_seed else plots
    text = report.write(records.all, plots=plots, readme=HERE / "README.md" if full else None, task_plots=task_plots)
    print(text)
    print(f"raw results: {records.path}  ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
