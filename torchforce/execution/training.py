"""Train until a threshold: the loop the demo, the learning tests and the benchmarks share.

Training runs on vectorized environments; every ``eval_every`` steps the deterministic policy plays
``eval_episodes`` episodes on a separate environment. Evaluation time is measured apart from training time.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from torchforce.agents import Agent, create_agent
from torchforce.environments import Environment, make, make_vector
from torchforce.execution.base import TORCH_THREADS, check_torch_threads
from torchforce.execution.evaluation import evaluate
from torchforce.execution.runner import Runner
from torchforce.spec import expect_int

EPISODE_LOG_KEYS = ("episode", "timesteps", "worker", "return", "length", "wall_time")


@dataclass
class TrainingResult:
    timesteps: int
    episodes: int
    train_seconds: float
    evaluation_seconds: float
    threshold: float | None
    timesteps_to_threshold: int | None
    seconds_to_threshold: float | None
    evaluations: list[dict[str, float]] = field(default_factory=list)

    @property
    def solved(self) -> bool:
        return self.timesteps_to_threshold is not None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "solved": self.solved}


def train(
    agent_spec: Any,
    environment: Any,
    *,
    num_environments: int = 8,
    seed: int = 0,
    num_timesteps: int = 100_000,
    threshold: float | None = None,
    eval_every: int = 5_000,
    eval_episodes: int = 20,
    episode_log: str | Path | None = None,
    progress: bool = False,
    agent_kwargs: dict[str, Any] | None = None,
    torch_threads: int | None = TORCH_THREADS,
) -> tuple[Agent, TrainingResult]:
    """Train a fresh agent; stop at ``num_timesteps`` or when the evaluation mean reaches ``threshold``.

    ``agent_spec`` is anything ``create_agent`` takes (``agent_kwargs`` add to it, e.g. a network); ``environment``
    any environment spec (a Gymnasium id, a registry name like ``"minimal"``, a dict, a file). Training runs on
    ``num_environments`` copies seeded ``seed + i``; evaluation plays ``eval_episodes`` deterministic episodes on a
    separate copy after the first episode that ends at or past each multiple of ``eval_every`` timesteps.
    ``episode_log`` gets one JSON line per finished training episode with the keys of ``EPISODE_LOG_KEYS``:
    ``episode`` (the global count, from 1), ``timesteps`` (global), ``worker`` (the row), ``return``, ``length``
    and ``wall_time`` (training seconds so far, evaluation excluded). ``torch_threads`` is the ``Runner``'s: the
    intra-op torch threads of the run, evaluations included (None: torch's setting as it is).
    """
    eval_every = expect_int(eval_every, "eval_every", minimum=1)
    eval_episodes = expect_int(eval_episodes, "eval_episodes", minimum=1)
    torch_threads = check_torch_threads(torch_threads)
    environments = make_vector(environment, num_environments, seed=seed)
    evaluation_env: Environment | None = None
    log: TextIO | None = None
    try:
        evaluation_env = make(environment)
        evaluation_env.seed(seed + 100_000)
        agent = create_agent(
            agent_spec, states=environments.states, actions=environments.actions, seed=seed, **(agent_kwargs or {})
        )
        log = open(episode_log, "w") if episode_log else None  # noqa: SIM115
    except BaseException:
        environments.close()
        if evaluation_env is not None:
            evaluation_env.close()
        raise
    runner = Runner(agent, environments, torch_threads=torch_threads)
    evaluations: list[dict[str, float]] = []
    clock = {"start": time.perf_counter(), "evaluation": 0.0, "next": eval_every}

    def train_seconds() -> float:
        return time.perf_counter() - clock["start"] - clock["evaluation"]

    def episode_finished(r: Runner, worker: int) -> bool:
        if log is not None:
            log.write(
                json.dumps(
                    {
                        "episode": r.global_episode,
                        "timesteps": r.global_timestep,
                        "worker": worker,
                        "return": r.episode_rewards[-1],
                        "length": r.episode_timesteps[-1],
                        "wall_time": round(train_seconds(), 4),
                    }
                )
                + "\n"
            )
        if r.global_timestep < clock["next"]:
            return True
        clock["next"] += eval_every * ((r.global_timestep - clock["next"]) // eval_every + 1)  # the next one ahead
        begin = time.perf_counter()
        returns = evaluate(agent, evaluation_env, episodes=eval_episodes)
        clock["evaluation"] += time.perf_counter() - begin
        evaluations.append(
            {"timesteps": r.global_timestep, "mean_return": float(np.mean(returns)), "train_seconds": train_seconds()}
        )
        return threshold is None or evaluations[-1]["mean_return"] < threshold

    try:
        runner.run(num_timesteps=num_timesteps, episode_finished=episode_finished, progress=progress)
    finally:
        if log is not None:
            log.close()
        environments.close()
        evaluation_env.close()
    solved = next((e for e in evaluations if threshold is not None and e["mean_return"] >= threshold), None)
    result = TrainingResult(
        timesteps=runner.global_timestep,
        episodes=runner.global_episode,
        train_seconds=train_seconds(),
        evaluation_seconds=clock["evaluation"],
        threshold=threshold,
        timesteps_to_threshold=None if solved is None else int(solved["timesteps"]),
        seconds_to_threshold=None if solved is None else solved["train_seconds"],
        evaluations=evaluations,
    )
    return agent, result
