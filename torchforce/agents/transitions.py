"""A batch retrieved from a memory, as tensors with named fields: what an agent's update works on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import torch

from torchforce.agents.transfer import to_device

FlatBatch = Mapping[str, torch.Tensor]
"""A flat batch (``Transitions.flat``, plus what an agent adds) as an optimizer hands it to a loss function."""


@dataclass
class Transitions:
    """A retrieved batch as tensors: states, internals, actions, next states and next internals (the recurrent state
    acting left, that values of the next state start from) keyed by name, for prioritized
    replay the importance-sampling weights and the storage indices, and what acting computed (``acted``, keyed by
    name: see ``LearningAgent._acted_fields``)."""

    states: dict[str, torch.Tensor]
    internals: dict[str, torch.Tensor]
    actions: dict[str, torch.Tensor]
    reward: torch.Tensor
    terminal: torch.Tensor
    next_states: dict[str, torch.Tensor]
    next_internals: dict[str, torch.Tensor] = field(default_factory=dict)
    weights: torch.Tensor | None = None
    indices: np.ndarray | None = None
    acted: dict[str, torch.Tensor] = field(default_factory=dict)

    @classmethod
    def from_numpy(cls, data: dict[str, np.ndarray], device: torch.device) -> Transitions:
        """A memory's retrieval (flat ``states/<name>``... arrays) on ``device``."""

        def tensors(prefix: str) -> dict[str, torch.Tensor]:
            return {
                key[len(prefix) :]: to_device(np.ascontiguousarray(values), device)
                for key, values in data.items()
                if key.startswith(prefix)
            }

        weights = data.get("weights")
        return cls(
            states=tensors("states/"),
            internals=tensors("internals/"),
            actions=tensors("actions/"),
            reward=to_device(data["reward"], device),
            terminal=to_device(data["terminal"], device),
            next_states=tensors("next_states/"),
            next_internals=tensors("next_internals/"),
            weights=None if weights is None else to_device(weights, device),
            indices=data.get("indices"),
            acted=tensors("acted/"),
        )

    def __len__(self) -> int:
        return int(self.reward.shape[0])

    def flat(self) -> dict[str, torch.Tensor]:
        """One flat dict of tensors with the same leading size, as optimizers take it (``states/<name>``...)."""
        data: dict[str, torch.Tensor] = {"reward": self.reward, "terminal": self.terminal}
        for prefix in ("states", "internals", "actions", "next_states", "next_internals"):
            data.update({f"{prefix}/{name}": value for name, value in getattr(self, prefix).items()})
        if self.weights is not None:
            data["weights"] = self.weights
        return data


def group(data: FlatBatch, prefix: str) -> dict[str, torch.Tensor]:
    """The entries of a flat batch under ``prefix/``, keyed by name."""
    start = len(prefix) + 1
    return {key[start:]: value for key, value in data.items() if key.startswith(prefix + "/")}
