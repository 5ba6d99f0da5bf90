"""RandomAgent: uniform random actions (int and bool uniform, bounded floats uniform in [min, max], unbounded
floats standard normal). It learns nothing; it is the baseline every other agent must beat."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from torchforce.agents.agent import Agent, Batch


class RandomAgent(Agent):
    name = "random"

    def __init__(
        self,
        states: Any,
        actions: Any,
        *,
        batched_observe: bool = True,
        batching_capacity: int = 1000,
        scope: str = "random",
        device: str | None = None,
        saver: dict | None = None,
        summarizer: dict | None = None,
        execution: dict | None = None,
        distributed: dict | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(states, actions, batched_observe=batched_observe, batching_capacity=batching_capacity,
                         scope=scope, device=device, saver=saver, summarizer=summarizer,
                         execution=execution or distributed, seed=seed)  # fmt: skip
        self._remember(locals())
        self._load_on_start()

    def _act_rows(
        self, batch: Batch, internals: dict[str, torch.Tensor], *, deterministic: bool
    ) -> tuple[dict[str, np.ndarray], dict[str, torch.Tensor]]:
        rows = next(iter(batch.values())).shape[0]
        actions = {}
        for name, action in self.actions_spec.items():
            shape = (rows, *action.shape)
            if action.type == "int":
                actions[name] = self.rng.integers(0, action.num_actions, size=shape, dtype=np.int64)
            elif action.type == "bool":
                actions[name] = self.rng.random(size=shape) < 0.5
            elif action.bounded:
                actions[name] = self.rng.uniform(action.min_value, action.max_value, size=shape).astype(np.float32)
            else:
                actions[name] = self.rng.standard_normal(size=shape).astype(np.float32)
        return actions, internals
