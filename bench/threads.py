"""Torch threads in the runners: 30,000 PPO CartPole-v1 steps from Python with torch's own thread count (one per
core, what every run got before the runners set it) against the runners' default of one thread.

    .venv/bin/python bench/threads.py                       # 1 and 16 environments, 3 repeats; updates bench/README.md
    .venv/bin/python bench/threads.py --steps 5000 --repeats 1 --no-readme     # a quick look

Each point is a fresh process (``--point``) that builds the shipped ``ppo_cartpole`` agent, runs
``Runner.run(num_timesteps=steps)`` and reports the seconds of that call alone (building excluded) and the torch
thread count seen inside the run. ``none`` is ``Runner(..., torch_threads=None)``: torch's setting is left as it is,
here torch's default with ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` removed from the child's environment; ``default``
is a plain ``Runner(...)``. Points run round-robin, repeat by repeat, so a slow phase of a shared machine hits all of
them. Records go to ``bench/results/threads-<time>.jsonl``; a run with the default settings replaces the section
between the ``threads`` markers of bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
POLICIES = ("none", "default")
DEFAULTS = {"steps": 30_000, "environments": [1, 16], "repeats": 3}


def point(environments: int, policy: str, steps: int) -> dict:
    """One timed run in this process."""
    import torch

    from torchforce.agents import create_agent
    from torchforce.configs import shipped
    from torchforce.environments import make, make_vector
    from torchforce.execution import Runner

    environment = make_vector("CartPole-v1", environments, seed=0) if environments > 1 else make("CartPole-v1")
    if environments == 1:
        environment.seed(0)
    agent = create_agent(
        str(shipped("agents", "ppo_cartpole")), states=environment.states, actions=environment.actions, seed=0
    )
    runner = Runner(agent, environment) if policy == "default" else Runner(agent, environment, torch_threads=None)
    seen: list[int] = []

    def step_finished(_runner: Runner) -> bool:
        if not seen:
            seen.append(torch.get_num_threads())
        return True

    before = torch.get_num_threads()
    started = time.perf_counter()
    runner.run(num_timesteps=steps, step_finished=step_finished)
    seconds = time.perf_counter() - started
    after = torch.get_num_threads()
    runner.close()
    return {
        "environments": environments,
        "policy": policy,
        "steps": runner.global_timestep,
        "seconds": seconds,
        "threads_in_run": seen[0],
        "threads_before": before,
        "threads_after": after,
    }


def run_point(environments: int, policy: str, steps: int) -> dict:
    environment = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    child = subprocess.run(
        [sys.executable, __file__, "--point", str(environments), policy, "--steps", str(steps)],
        capture_output=True,
        text=True,
        env=environment,
    )
    if child.returncode != 0:
        raise SystemExit(f"the point ({environments} environments, {policy}) failed:\n{child.stderr[-3000:]}")
    return json.loads(child.stdout.strip().splitlines()[-1])


def table(records: list[dict]) -> list[str]:
    lines = [
        "| environments | policy | torch threads in the run | seconds, median [min-max] | steps/s | speed-up |",
        "|---|---|---|---|---|---|",
    ]
    for environments in sorted({r["environments"] for r in records}):
        medians = {}
        for policy in POLICIES:
            runs = [r for r in records if r["environments"] == environments and r["policy"] == policy]
            if not runs:
                continue
            seconds = [r["seconds"] for r in runs]
            medians[policy] = statistics.median(seconds)
            label = "`torch_threads=None` (torch's own)" if policy == "none" else "default (`torch_threads=1`)"
            speed_up = f"{medians['none'] / medians[policy]:.1f}x" if "none" in medians and policy != "none" else "1.0x"
            lines.append(
                f"| {environments} | {label} | {runs[0]['threads_in_run']} | {medians[policy]:.1f} "
                f"[{min(seconds):.1f}-{max(seconds):.1f}] | {runs[0]['steps'] / medians[policy]:,.0f} | {speed_up} |"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=DEFAULTS["steps"], help="environment steps per run")
    parser.add_argument("--environments", type=int, nargs="+", default=DEFAULTS["environments"])
    parser.add_argument("--repeats", type=int, default=DEFAULTS["repeats"], help="runs per point (median reported)")
    parser.add_argument("--no-readme", action="store_true", help="leave bench/README.md as it is")
    parser.add_argument("--point", nargs=2, metavar=("ENVIRONMENTS", "POLICY"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.point:
        print(json.dumps(point(int(args.point[0]), args.point[1], args.steps)))
        return 0
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = HERE / "results" / f"threads-{stamp}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    records = []
    with out.open("w") as handle:
        for repeat in range(args.repeats):
            for environments in args.environments:
                for policy in POLICIES:
                    record = {"run": stamp, "repeat": repeat, **run_point(environments, policy, args.steps)}
                    records.append(record)
                    handle.write(json.dumps(record) + "\n")
                    handle.flush()
                    print(
                        f"repeat {repeat}: {environments:>2} environments, {policy:<7}: {record['seconds']:6.1f} s "
                        f"({record['threads_in_run']} threads)",
                        flush=True,
                    )
    from report import publish

    what = (
        f"Run `{stamp}`: {args.steps:,} steps of the shipped `ppo_cartpole` on CartPole-v1, {args.repeats} runs a point"
    )
    update = not args.no_readme and all(getattr(args, key) == value for key, value in DEFAULTS.items())
    publish(what, table(records), out, "threads" if update else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
