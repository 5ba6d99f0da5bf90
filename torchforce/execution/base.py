"""``BaseRunner``: what every runner offers (TensorForce 0.4's base class of its runners, under its name)."""

from __future__ import annotations

import abc
from typing import Any


class BaseRunner(abc.ABC):
    """A runner drives agents in environments until a limit. Each keeps the history of its finished episodes
    (``episode_rewards``, ``episode_timesteps``, ``episode_times``, one entry per episode, in the order they finished)
    and counts ``global_episode`` and ``global_timestep`` on from it; ``reset(history)`` starts from a given history,
    ``run(...)`` runs (``num_episodes``/``num_timesteps`` are relative to where the counters stand), ``close()``
    closes the environments. ``Runner``, ``ThreadedRunner`` and ``DistributedRunner`` are BaseRunners."""

    episode_rewards: list[float]
    episode_timesteps: list[int]
    episode_times: list[float]

    @abc.abstractmethod
    def reset(self, history: dict[str, list] | None = None) -> None:
        """Start from ``history`` (the three lists), or from nothing."""

    @abc.abstractmethod
    def run(self, *args: Any, **kwargs: Any) -> Any:
        """Run until a limit: see each runner's ``run``."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the environments (and whatever else the runner started)."""
