"""State-action value networks: the critic of DDPG, Q(s, a) from a layer list.

The states and actions are flattened and concatenated into one vector, which the layer list turns into an
embedding and a Linear layer into one value per row: an ordinary, unbounded Q network for any number and shape of
states and float actions (2018's critic was fixed, tanh-bounded to [-1, 1] and took one state and one scalar
action). The 2018 form ``{"size_t0": 400, "size_t1": 300}`` means two dense layers of those sizes.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from torchforce.core.networks import build_network
from torchforce.spec import ActionSpec, SpecError, StateSpec, expect_int

INPUT = "state_action"


def critic_layers(spec: Any, path: str) -> Any:
    """A critic layer list from its spec: a layer list (or anything ``build_network`` takes), or 2018's
    ``{"size_t0": ..., "size_t1": ...}``."""
    if isinstance(spec, dict) and set(spec) <= {"size_t0", "size_t1"} and spec:
        return [{"type": "dense", "size": expect_int(spec[key], f"{path}.{key}", minimum=1)} for key in sorted(spec)]
    return spec


class Critic(nn.Module):
    """``Q(s, a)`` for the ``states`` and float ``actions`` given, from the layer list ``spec``."""

    def __init__(self, spec: Any, states: dict[str, StateSpec], actions: dict[str, ActionSpec], *, path: str) -> None:
        super().__init__()
        self.state_names, self.action_names = list(states), list(actions)
        size = sum(math.prod(state.shape) for state in states.values())
        size += sum(math.prod(action.shape) for action in actions.values())
        self.network = build_network(critic_layers(spec, path), {INPUT: StateSpec(INPUT, (size,), "float")}, path=path)
        if self.network.internals:
            raise SpecError(
                path, "a critic cannot be recurrent", hint="Use dense layers; internal_lstm is for policies."
            )
        self.value = nn.Linear(self.network.output_size, 1)

    def forward(self, states: dict[str, Tensor], actions: dict[str, Tensor]) -> Tensor:
        """One value per row, ``[B]``."""
        rows = next(iter(states.values())).shape[0]
        parts = [states[name].reshape(rows, -1).float() for name in self.state_names]
        parts += [actions[name].reshape(rows, -1).float() for name in self.action_names]
        embedding, _ = self.network({INPUT: torch.cat(parts, dim=1)}, {})
        return self.value(embedding).squeeze(-1)

    def regularization_loss(self) -> Tensor:
        return self.network.regularization_loss()

    @property
    def has_penalties(self) -> bool:
        return self.network.has_penalties
