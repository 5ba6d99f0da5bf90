"""Random search over an agent config: how the shipped tuned configs were found.

    python bench/sweep.py --config dqn_cartpole --space bench/spaces/dqn_cartpole.json --samples 60 --seeds 0 1 \
        --processes 16 --out sweep.jsonl

The search space is a JSON object mapping dotted config keys (``update_mode.batch_size``, ``network.0.size``) to
lists of values; ``num_environments`` is the number of vectorized environments. Each sampled point is trained on
CartPole-v1 (or ``--environment``) once per seed, in its own process with one torch thread, until the
deterministic mean return over 20 evaluation episodes reaches ``--threshold`` or ``--cap`` steps pass (with
``--full``, always ``--cap`` steps, to see whether what was learned lasts). Every run is one JSON line; the summary
ranks points by the median of the steps to the threshold (an unsolved run counts as infinitely slow), and shows
the number of updates (the other half of wall time), the mean of the last three evaluations and the point.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import random
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any


def with_overrides(config: dict[str, Any], point: dict[str, Any]) -> dict[str, Any]:
    """``config`` with each dotted key of ``point`` set (list indices are numbers: ``network.0.size``)."""
    result = copy.deepcopy(config)
    for dotted, value in point.items():
        if dotted == "num_environments":
            continue
        *parents, last = dotted.split(".")
        node: Any = result
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return result


def run_one(job: tuple[int, dict[str, Any], dict[str, Any], int, argparse.Namespace]) -> dict[str, Any]:
    index, point, config, seed, options = job
    import torch

    torch.set_num_threads(1)
    from torchforce.execution.training import train

    agent, result = train(
        with_overrides(config, point),
        options.environment,
        seed=seed,
        num_timesteps=options.cap,
        num_environments=point.get("num_environments", 1),
        eval_every=options.eval_every,
        threshold=None if options.full else options.threshold,
    )
    returns = [evaluation["mean_return"] for evaluation in result.evaluations]
    first = next((e for e in result.evaluations if e["mean_return"] >= options.threshold), None)
    return {
        "point": index,
        "seed": seed,
        "params": point,
        "steps": None if first is None else first["timesteps"],
        "seconds": None if first is None else first["train_seconds"],
        "updates": agent.updates,
        "timesteps": result.timesteps,
        "train_seconds": result.train_seconds,
        "final": statistics.mean(returns[-3:]) if returns else None,
        "returns": returns,
    }


def summarize(records: list[dict[str, Any]], top: int) -> str:
    by_point: dict[int, list[dict[str, Any]]] = {}
    for record in records:
        by_point.setdefault(record["point"], []).append(record)

    def median_steps(runs: list[dict[str, Any]]) -> float:
        return statistics.median(math.inf if run["steps"] is None else run["steps"] for run in runs)

    ranked = sorted(by_point.values(), key=median_steps)
    lines = [
        "| rank | solved | median steps | steps by seed | median updates | final (last 3 evaluations) | point |",
        "|---|---|---|---|---|---|---|",
    ]
    for rank, runs in enumerate(ranked[:top], 1):
        solved = sum(run["steps"] is not None for run in runs)
        steps = ", ".join("-" if run["steps"] is None else str(run["steps"]) for run in runs)
        updates = statistics.median(run["updates"] for run in runs)
        final = ", ".join("-" if run.get("final") is None else f"{run['final']:.0f}" for run in runs)
        lines.append(
            f"| {rank} | {solved}/{len(runs)} | {median_steps(runs):,.0f} | {steps} | {updates:,.0f} | "
            f"{final} | {json.dumps(runs[0]['params'])} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="a shipped agent config name, or a JSON file")
    parser.add_argument("--space", required=True, help="JSON file: {dotted key: [values]}")
    parser.add_argument("--samples", type=int, default=40, help="points drawn from the space (default 40)")
    parser.add_argument("--points", help="JSON file with a list of points to run instead of sampling")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--environment", default="CartPole-v1")
    parser.add_argument("--threshold", type=float, default=475.0)
    parser.add_argument("--cap", type=int, default=100_000, help="environment steps per run at most")
    parser.add_argument("--eval-every", type=int, default=2_500)
    parser.add_argument(
        "--full",
        action="store_true",
        help="train the whole --cap instead of stopping at the threshold, to see if learning lasts",
    )
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--sample-seed", type=int, default=0)
    parser.add_argument("--out", default="sweep.jsonl")
    parser.add_argument("--top", type=int, default=15)
    arguments = parser.parse_args()

    from torchforce.configs import shipped
    from torchforce.spec import load_spec

    path = Path(arguments.config)
    config, _ = load_spec(path if path.is_file() else shipped("agents", arguments.config))
    space = json.loads(Path(arguments.space).read_text())
    if arguments.points:
        points = json.loads(Path(arguments.points).read_text())
    else:
        rng = random.Random(arguments.sample_seed)
        points = [{key: rng.choice(values) for key, values in space.items()} for _ in range(arguments.samples)]
    jobs = [(index, point, config, seed, arguments) for index, point in enumerate(points) for seed in arguments.seeds]
    records = []
    with ProcessPoolExecutor(arguments.processes) as pool, open(arguments.out, "w") as out:
        futures = [pool.submit(run_one, job) for job in jobs]
        for done, future in enumerate(as_completed(futures), 1):
            record = future.result()
            records.append(record)
            out.write(json.dumps(record) + "\n")
            out.flush()
            print(
                f"{done}/{len(jobs)} point {record['point']} seed {record['seed']}: {record['steps']}",
                file=sys.stderr,
                flush=True,
            )
    print(summarize(records, arguments.top))


if __name__ == "__main__":
    main()
