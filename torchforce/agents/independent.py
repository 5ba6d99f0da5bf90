"""What acting apart from training (``act(independent=True)``: evaluation, export) carries from call to call, so
that it leaves the training rows alone: a recurrent state of its own once an independent episode has started (until
then it reads the training rows', never advancing it, and a batch of another size starts from zero), and copies of
the explorations and preprocessing steps that keep a state of an episode (Ornstein-Uhlenbeck's noise, ``sequence``'s
frames, per-episode statistics). Statistics of the whole run are applied frozen (``Agent._act_independent``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:
    from torchforce.agents.agent import Agent
    from torchforce.core.explorations import Exploration
    from torchforce.core.preprocessors import PreprocessorStack


class IndependentActing:
    """Independent acting's state, held by a learning agent, which each call is given (it keeps no reference to it:
    an agent alone is freed as soon as it is dropped, without the cycle collector)."""

    def __init__(self) -> None:
        self.carried: tuple[int, dict[str, torch.Tensor]] | None = None  # (rows, recurrent state) once started
        self._explorations: dict[str, Exploration] | None = None  # see explorations
        self._preprocessing: dict[str, PreprocessorStack] | None = None  # see preprocessing

    def internals(self, agent: Agent, rows: int) -> dict[str, torch.Tensor]:
        """The recurrent state a batch of ``rows`` rows of ``agent`` acts from."""
        if self.carried is not None and self.carried[0] == rows:
            return self.carried[1]
        episodes = agent.episodes
        internals = episodes.internals if rows == episodes.num_rows else agent.policy.network.initial_internals(rows)
        return {k: v.to(agent.device) for k, v in internals.items()}

    def advance(self, rows: int, internals: dict[str, torch.Tensor]) -> None:
        """The recurrent state after an act on ``rows`` rows, carried on where an episode of that many runs."""
        if self.carried is not None and self.carried[0] == rows:
            self.carried = (rows, internals)

    def explorations(self, agent: Agent) -> dict[str, Exploration]:
        """The explorations independent acting applies: the training ones where they keep no state (epsilon,
        Gaussian noise), and a copy of its own of each that does (Ornstein-Uhlenbeck's process per row), so that
        evaluation neither advances nor restarts the training rows' noise. Its state starts over with
        ``start_episode``."""
        if self._explorations is None:
            self._explorations = {name: exploration.apart() for name, exploration in agent.explorations.items()}
        return self._explorations

    def preprocessing(self, agent: Agent) -> dict[str, PreprocessorStack]:
        """The state preprocessing independent acting applies (``PreprocessorStack.apart``): the training rows'
        steps where they keep no state of an episode, and copies of their own of those that do (sequence's frames,
        per-episode running_standardize), which start over with ``start_episode``."""
        if self._preprocessing is None:
            self._preprocessing = {name: stack.apart() for name, stack in agent.preprocessing.items()}
        return self._preprocessing

    def start_episode(self, agent: Agent, rows: int, restart: Any) -> None:
        """An independent episode of ``rows`` rows of ``agent`` starting over (``Agent.start_independent_episode``);
        of the rows ``restart`` (indices) only, where given."""
        restarted = None if restart is None else np.asarray(restart, dtype=np.int64)
        for name, stack in self.preprocessing(agent).items():
            for step, trained in zip(stack, agent.preprocessing[name], strict=True):
                if step is not trained:  # the training rows' own steps are left alone
                    step.reset(restarted)
        for exploration in self.explorations(agent).values():
            if exploration not in agent.explorations.values():
                exploration.reset(restarted)
        if restarted is not None and self.carried is not None and self.carried[0] == rows:
            index = torch.as_tensor(restarted, device=agent.device)
            internals = {k: v.clone().index_fill_(0, index, 0.0) for k, v in self.carried[1].items()}
            self.carried = (rows, internals)
            return
        initial = agent.policy.network.initial_internals(rows)
        self.carried = (rows, {k: v.to(agent.device) for k, v in initial.items()})
