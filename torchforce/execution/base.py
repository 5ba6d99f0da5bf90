"""``BaseRunner``: what every runner offers (TensorForce 0.4's base class of its runners, under its name), and the
runners' torch thread policy (``torch_threads``)."""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from torchforce.spec import expect_int
from torchforce.spec.spaces import ActionSpec, normalize_actions

TORCH_THREADS = 1  # the runners' default: one intra-op torch thread per run (docs/internals.md, Torch threads)


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


def shared_out(total: int, parts: int) -> list[int]:
    """``total`` shared out among ``parts`` as evenly as it goes, the first ones taking the remainder: a run's counts
    per worker where a checkpoint kept only the run's (saved before it kept each worker's)."""
    share, remainder = divmod(int(total), parts)
    return [share + (index < remainder) for index in range(parts)]


def check_torch_threads(count: Any) -> int | None:
    """A runner's ``torch_threads``: a whole number >= 1, or None to leave torch's setting alone."""
    return expect_int(count, "torch_threads", minimum=1, allow_none=True)


@contextlib.contextmanager
def torch_threads(count: int | None) -> Iterator[None]:
    """Run the block with ``count`` intra-op torch threads in the calling thread (and in threads it starts inside
    the block), then set back what was there before; None changes nothing.

    Small networks stepped once per environment step gain nothing from a pool of threads, and lose much when other
    processes share the cores: 30,000 PPO CartPole steps on one thread took as long as on torch's default of one per
    core on a quiet 2-core machine, and a twentieth of the time on a busy one (bench/README.md, Torch threads in the
    runners)."""
    if count is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def check_actions_fit(agent: Any, environment: Any) -> None:
    """An agent whose actions are not the environment's (names, types, shapes, numbers of actions) is refused before
    a run: a Pong agent (6 actions) on Breakout (4) failed late inside the emulator, and a Breakout agent on Pong ran
    without ever pressing two of its buttons. Bounds of float actions are not compared (an agent may act in a range
    of its own). An agent that keeps no ``actions_spec`` (a user's own class) is not checked."""
    own: dict[str, ActionSpec] | None = getattr(agent, "actions_spec", None)
    if not isinstance(own, dict):
        return
    theirs, _ = normalize_actions(environment.actions)

    def form(specs: dict[str, ActionSpec]) -> dict[str, tuple]:
        return {name: (spec.type, spec.shape, spec.num_actions) for name, spec in specs.items()}

    if form(own) != form(theirs):
        shown = lambda specs: {  # noqa: E731 - each action without its bounds
            name: {k: v for k, v in spec.to_dict().items() if k not in ("min_value", "max_value")}
            for name, spec in specs.items()
        }
        raise ValueError(
            f"the agent's actions are not the environment's: the agent acts with {shown(own)}, {environment} takes "
            f"{shown(theirs)}; build the agent with the environment's actions (create_agent(..., "
            "actions=environment.actions))"
        )
