"""Learning figures: steps and training seconds until the deterministic evaluation mean reaches the threshold.

Each run is its own process (``python bench/learning.py --library ... --algorithm ... --seed ...``), so imports,
memory and caches of one run never touch another. The child prints its result as one JSON line, with its peak
resident memory (``VmHWM``: the high-water mark of its own address space since ``exec``; ``ru_maxrss`` would also
count the parent's memory, which the child inherits through ``fork`` and keeps across ``exec``).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
THRESHOLD = 475.0
EVAL_EPISODES = 20


def shipped_setup(algorithm: str) -> tuple[str, int]:
    """torchforce's shipped tuned agent config for CartPole and its number of environments, as the shipped
    experiment ``cartpole_<algorithm>`` names them (SB3's settings come from the zoo, see sb3_runs.py)."""
    from torchforce.configs import shipped

    experiment = json.loads(shipped("experiments", f"cartpole_{algorithm}").read_text())
    return experiment["agent"], experiment["num_environments"]


def train_torchforce(
    algorithm: str, *, seed: int, num_timesteps: int, eval_every: int, episode_log: str | None
) -> dict[str, Any]:
    from torchforce.configs import shipped
    from torchforce.execution.training import train

    config, environments = shipped_setup(algorithm)
    _, result = train(
        str(shipped("agents", config)),
        "CartPole-v1",
        num_environments=environments,
        seed=seed,
        num_timesteps=num_timesteps,
        threshold=THRESHOLD,
        eval_every=eval_every,
        eval_episodes=EVAL_EPISODES,
        episode_log=episode_log,
    )
    return result.to_dict()


def child(arguments: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(1)
    started = time.perf_counter()
    if arguments.library == "torchforce":
        result = train_torchforce(
            arguments.algorithm,
            seed=arguments.seed,
            num_timesteps=arguments.cap,
            eval_every=arguments.eval_every,
            episode_log=arguments.episode_log,
        )
    else:
        from sb3_runs import train_sb3

        result = train_sb3(
            arguments.algorithm,
            seed=arguments.seed,
            num_timesteps=arguments.cap,
            threshold=THRESHOLD,
            eval_every=arguments.eval_every,
            eval_episodes=EVAL_EPISODES,
            episode_log=arguments.episode_log,
        )
    result["process_seconds"] = time.perf_counter() - started
    result["peak_rss_mb"] = peak_rss_mb()
    print(json.dumps(result))


def peak_rss_mb() -> float:
    """This process's peak resident memory in MB (``VmHWM``; ``ru_maxrss`` where /proc is missing)."""
    try:
        with open("/proc/self/status") as status:
            line = next(line for line in status if line.startswith("VmHWM:"))
        return int(line.split()[1]) / 1024  # kB
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_in_subprocess(
    library: str, algorithm: str, *, seed: int, cap: int, eval_every: int, episode_log: Path
) -> dict[str, Any]:
    """One learning run in a fresh process; its result, with ``peak_rss_mb`` and ``process_seconds``."""
    command = [
        sys.executable,
        str(HERE / "learning.py"),
        "--library",
        library,
        "--algorithm",
        algorithm,
        "--seed",
        str(seed),
        "--cap",
        str(cap),
        "--eval-every",
        str(eval_every),
        "--episode-log",
        str(episode_log),
    ]
    return run_child(command, f"{library} {algorithm} seed {seed}")


def run_child(command: list[str], what: str) -> dict[str, Any]:
    """Run a benchmark child process (``command``) from the repository root; the JSON object it printed last. A
    failure raises a RuntimeError naming ``what``, with the end of the child's output."""
    process = subprocess.run(command, capture_output=True, text=True, cwd=HERE.parent)
    if process.returncode != 0:
        output = (process.stdout + process.stderr)[-3000:]
        raise RuntimeError(f"{what} failed (exit {process.returncode}):\n{output}")
    return json.loads(process.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--library", choices=("torchforce", "sb3"), required=True)
    parser.add_argument("--algorithm", choices=("ppo", "dqn"), required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cap", type=int, default=100_000)
    parser.add_argument("--eval-every", type=int, default=2_500)
    parser.add_argument("--episode-log")
    child(parser.parse_args())


if __name__ == "__main__":
    main()
