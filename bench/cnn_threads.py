"""Torch threads for CNN agents: a shipped Atari experiment run as ``tfcli`` runs it, with the experiment field
``torch_threads`` at 1 (the default) and at more, in one and in worker processes for its environments.

    .venv/bin/python bench/cnn_threads.py                                  # pong_ppo, 8,192 steps, 3 repeats
    .venv/bin/python bench/cnn_threads.py --experiment breakout_dqn --steps 30000 --no-readme
    .venv/bin/python bench/cnn_threads.py --steps 2048 --repeats 1 --no-readme               # a quick look

Each point is the experiment worker (``python -I -m torchforce.client.worker FOLDER``, what ``experiment start``
runs on this machine) in a fresh process, on an experiment made from the shipped file with ``total_timesteps`` set
to ``--steps``, ``torch_threads`` to the point's count and, for the ``subprocess`` points, ``vectorization:
subprocess``; checkpoints, summaries and the episode log stay as the experiment has them. The figure is the run's
own: steps over its training seconds (``progress.json``: ``timesteps`` / ``elapsed_seconds``, building the agent
and starting excluded). Points run round-robin, repeat by repeat, so a slow phase of a shared machine hits all of
them. Records go to ``bench/results/cnn-threads-<time>.jsonl``; a run with the default settings replaces the section
between the ``cnn-threads`` markers of bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchforce.client import Project

HERE = Path(__file__).resolve().parent
DEFAULTS = {"experiment": "pong_ppo", "steps": 8192, "repeats": 3}


def points(cores: int) -> list[tuple[str, int]]:
    """(vectorization, torch threads) of every point: one thread, then all cores, in one process and beside worker
    processes for the environments."""
    return list(dict.fromkeys([("sync", 1), ("sync", cores), ("subprocess", 1), ("subprocess", cores)]))


def make_run(project: Project, experiment: str, name: str, steps: int, vectorization: str, threads: int) -> Path:
    """The experiment ``name`` in ``project``: the shipped ``experiment`` for ``steps`` steps, with its environments
    vectorized as ``vectorization`` and ``threads`` torch threads."""
    from torchforce.client import Experiment

    run = Experiment(
        project,
        file=experiment,
        name=name,
        total_timesteps=steps,
        torch_threads=threads,
        vectorization=vectorization,
    )
    return run.generate_locally()


def run_point(folder: Path) -> dict:
    environment = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    child = subprocess.run(
        [sys.executable, "-I", "-m", "torchforce.client.worker", str(folder)],
        capture_output=True,
        text=True,
        env=environment,
        cwd=folder,
    )
    progress = json.loads((folder / "results" / "progress.json").read_text())
    if child.returncode != 0 or progress.get("state") != "finished":
        raise SystemExit(f"the run in {folder} did not finish:\n{child.stdout[-2000:]}\n{child.stderr[-2000:]}")
    return {"timesteps": progress["timesteps"], "seconds": progress["elapsed_seconds"]}


def table(records: list[dict]) -> list[str]:
    lines = [
        "| environments | torch threads | seconds, median [min-max] | steps/s | against one thread, one process |",
        "|---|---|---|---|---|",
    ]
    baseline = None
    for vectorization, threads in dict.fromkeys((r["vectorization"], r["threads"]) for r in records):
        runs = [r for r in records if (r["vectorization"], r["threads"]) == (vectorization, threads)]
        seconds = [r["seconds"] for r in runs]
        rate = statistics.median(r["timesteps"] / r["seconds"] for r in runs)
        baseline = baseline or rate
        where = "in the worker process" if vectorization == "sync" else "in worker processes (`subprocess`)"
        lines.append(
            f"| {where} | {threads} | {statistics.median(seconds):.1f} [{min(seconds):.1f}-{max(seconds):.1f}] "
            f"| {rate:,.0f} | {rate / baseline:.2f}x |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--experiment", default=DEFAULTS["experiment"], help="a shipped experiment (default pong_ppo)")
    parser.add_argument("--steps", type=int, default=DEFAULTS["steps"], help="environment steps per run")
    parser.add_argument("--repeats", type=int, default=DEFAULTS["repeats"], help="runs per point (median reported)")
    parser.add_argument("--no-readme", action="store_true", help="leave bench/README.md as it is")
    args = parser.parse_args(argv)

    from torchforce.client import Project
    from torchforce.client.queue import available_cpus

    cores = available_cpus()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = HERE / "results" / f"cnn-threads-{stamp}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    records = []
    with tempfile.TemporaryDirectory(prefix="tf-cnn-threads-") as folder, out.open("w") as handle:
        project, _ = Project.init(Path(folder) / "project")
        for repeat in range(args.repeats):
            for vectorization, threads in points(cores):
                name = f"r{repeat}-{vectorization}-{threads}"
                run = make_run(project, args.experiment, name, args.steps, vectorization, threads)
                record = {
                    "run": stamp,
                    "experiment": args.experiment,
                    "repeat": repeat,
                    "vectorization": vectorization,
                    "threads": threads,
                    "cores": cores,
                    **run_point(run),
                }
                records.append(record)
                handle.write(json.dumps(record) + "\n")
                handle.flush()
                print(
                    f"repeat {repeat}: {vectorization:<10} {threads} threads: {record['seconds']:6.1f} s, "
                    f"{record['timesteps'] / record['seconds']:6.0f} steps/s",
                    flush=True,
                )
    from report import publish

    what = (
        f"Run `{stamp}`: {args.steps:,} steps of the shipped `{args.experiment}` experiment ({cores} cores), "
        f"{args.repeats} runs a point"
    )
    update = not args.no_readme and all(getattr(args, key) == value for key, value in DEFAULTS.items())
    publish(what, table(records), out, "cnn-threads" if update else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
