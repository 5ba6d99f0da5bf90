"""The timestep of a model: what its target network's synchronization, its optimizers' learning-rate schedules, PPO's
clipping schedule and the explorations' schedules follow. An agent's model counts the agent's acts; worker agents
sharing one model (``torchforce.execution.sharing``) count all of theirs, as 2018's workers, which shared one model
with one timestep counter, did."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchforce.agents.agent import Agent


class ModelClock:
    """The timestep of the model that ``agents`` learn into: the sum of their own ``timestep`` counters, read when
    asked (an update, or an act that explores: a sum over a few workers, next to nothing an act), plus ``offset``,
    the acts the counters do not hold (those of a run a checkpoint continues, whose workers start again at 0)."""

    def __init__(self, agent: Agent) -> None:
        self.agents = [agent]
        self.offset = 0

    @property
    def timestep(self) -> int:
        return self.offset + sum(agent.timestep for agent in self.agents)

    def set(self, timestep: int) -> None:
        """Make the model's timestep ``timestep`` now (a checkpoint's), counting on from there."""
        self.offset = timestep - sum(agent.timestep for agent in self.agents)

    def join(self, agent: Agent) -> None:
        """Count ``agent``'s acts from now on (a worker that starts to share the model); the timestep stays."""
        self.offset -= agent.timestep
        self.agents.append(agent)
