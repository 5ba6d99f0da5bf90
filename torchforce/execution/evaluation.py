"""Evaluating an agent: deterministic episodes on a separate environment, without learning."""

from __future__ import annotations

import numpy as np

from torchforce.agents import Agent
from torchforce.environments import Environment
from torchforce.spec import expect_int


def evaluate(
    agent: Agent,
    environment: Environment,
    *,
    episodes: int = 20,
    deterministic: bool = True,
    max_episode_timesteps: int | None = None,
) -> list[float]:
    """Returns of ``episodes`` episodes acted with ``independent=True``: the agent's counters, memory and
    training rows are untouched, so evaluation can run in the middle of training. An episode ends at a terminal
    (1 or 2) or after ``max_episode_timesteps`` steps."""
    episodes = expect_int(episodes, "episodes", minimum=1)
    max_episode_timesteps = expect_int(max_episode_timesteps, "max_episode_timesteps", minimum=1, allow_none=True)
    returns = []
    for _ in range(episodes):
        state = environment.reset()
        agent.start_independent_episode()  # recurrent policies carry their own state through the episode
        total, steps = 0.0, 0
        while True:
            action = agent.act(state, deterministic=deterministic, independent=True)
            state, terminal, reward = environment.execute(action)
            total += reward
            steps += 1
            if terminal or (max_episode_timesteps is not None and steps >= max_episode_timesteps):
                break
        returns.append(total)
    return returns


def mean_return(returns: list[float]) -> float:
    return float(np.mean(returns)) if returns else float("nan")
