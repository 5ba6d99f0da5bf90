"""RandomAgent: uniform random actions (int and bool uniform, bounded floats uniform in [min, max], unbounded
floats standard normal). It learns nothing; it is the baseline every other agent must beat."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from torchforce.agents.agent import Agent, Batch
from torchforce.agents.config import RandomConfig


class RandomAgent(Agent):
    """Acts uniformly at random and learns nothing. Options: ``RandomConfig``."""

    name = "random"

    def __init__(self, states: Any, actions: Any, *, config: RandomConfig | None = None, **options: Any) -> None:
        config = RandomConfig.resolve(config, options)
        super().__init__(states, actions, config=config)
        self._finish()
        self._load_on_start()

    def _act_rows(
        self,
        batch: Batch,
        internals: dict[str, torch.Tensor],
        *,
        deterministic: bool,
        record: bool = False,
        explorations: Any = None,  # the agent explores nothing
    ) -> tuple[dict[str, np.ndarray], dict[str, torch.Tensor]]:
        rows = next(iter(batch.values())).shape[0]
        actions: dict[str, np.ndarray] = {}
        for name, action in self.actions_spec.items():
            shape = (rows, *action.shape)
            if action.type == "int":
                actions[name] = self.rng.integers(0, action.num_values, size=shape, dtype=np.int64)
            elif action.type == "bool":
                actions[name] = self.rng.random(size=shape) < 0.5
            elif action.bounded:
                low, high = action.bounds
                actions[name] = self.rng.uniform(low, high, size=shape).astype(np.float32)
            else:
                actions[name] = self.rng.standard_normal(size=shape).astype(np.float32)
        return actions, internals
