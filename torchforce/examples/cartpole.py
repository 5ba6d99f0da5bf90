"""The main job: train PPO on CartPole-v1 with a progress bar, then write results and a learning-curve PNG.

    python -m torchforce.examples.cartpole --out demo

Training uses 8 vectorized environments and the shipped ``ppo_cartpole`` config; every ``--eval-every`` steps the
deterministic policy plays 20 episodes on a separate environment, and training stops once their mean return
reaches ``--threshold`` (or after ``--timesteps``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from torchforce.configs import shipped
from torchforce.execution.training import train
from torchforce.plots import plot_learning_curves


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="demo", help="folder for results.json, episodes.jsonl and learning_curve.png")
    parser.add_argument("--agent", default="ppo_cartpole", help="a shipped agent config name or a JSON/YAML file")
    parser.add_argument("--environment", default="CartPole-v1", help="a Gymnasium id")
    parser.add_argument("--timesteps", type=int, default=100_000, help="training budget in environment steps")
    parser.add_argument("--envs", type=int, default=8, help="vectorized environments")
    parser.add_argument("--threshold", type=float, default=475.0, help="stop when the evaluation mean reaches this")
    parser.add_argument("--eval-every", type=int, default=5_000, help="evaluate every this many steps")
    parser.add_argument("--eval-episodes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    config = args.agent if args.agent.endswith((".json", ".yaml", ".yml")) else str(shipped("agents", args.agent))
    print(
        f"Training {config} on {args.environment} ({args.envs} environments, seed {args.seed}, "
        f"budget {args.timesteps:,} steps, stop at evaluation mean >= {args.threshold:g})"
    )
    _, result = train(
        config,
        args.environment,
        num_environments=args.envs,
        seed=args.seed,
        num_timesteps=args.timesteps,
        threshold=args.threshold,
        eval_every=args.eval_every,
        eval_episodes=args.eval_episodes,
        episode_log=out / "episodes.jsonl",
        progress=True,
    )
    results = {
        "agent": config,
        "environment": args.environment,
        "seed": args.seed,
        "environments": args.envs,
        **result.to_dict(),
    }
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    label = f"{Path(config).stem} on {args.environment}"
    plot = plot_learning_curves(
        {label: out / "episodes.jsonl"}, out / "learning_curve.png", evaluations={label: result.evaluations}
    )
    if result.solved:
        status = (
            f"reached {args.threshold:g} after {result.timesteps_to_threshold:,} steps, "
            f"{result.seconds_to_threshold:.1f} s"
        )
    else:
        status = f"did not reach {args.threshold:g}"
    rate = result.timesteps / max(result.train_seconds, 1e-9)
    print(
        f"\n{args.environment}: {status}; {result.timesteps:,} steps in {result.train_seconds:.1f} s of training "
        f"({rate:,.0f} steps/s), {result.evaluation_seconds:.1f} s evaluating"
    )
    print(f"results: {out / 'results.json'}\nepisode log: {out / 'episodes.jsonl'}\nlearning curve: {plot}")
    return 0 if result.solved else 1


if __name__ == "__main__":
    raise SystemExit(main())
