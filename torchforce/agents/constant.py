"""ConstantAgent: always the same action (``action_values`` maps action names to values)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from torchforce.agents.agent import Agent, Batch
from torchforce.agents.config import ConstantConfig
from torchforce.agents.experience import action_value
from torchforce.spec import SpecError, expect_dict, unknown_name_error

NOT_GIVEN: Any = object()  # action_values may be given as null, which is an error to report


class ConstantAgent(Agent):
    """Always takes the same action, ``action_values``; learns nothing. Options: ``ConstantConfig``."""

    name = "constant"

    def __init__(
        self,
        states: Any,
        actions: Any,
        action_values: Any = NOT_GIVEN,
        *,
        config: ConstantConfig | None = None,
        **options: Any,
    ) -> None:
        if action_values is not NOT_GIVEN:  # 0.4's third positional argument (or a keyword)
            options["action_values"] = action_values
        config = ConstantConfig.resolve(config, options)
        super().__init__(states, actions, config=config)
        action_values = config.action_values
        if self.single_action and not isinstance(action_values, dict):
            action_values = {next(iter(self.actions_spec)): action_values}
        action_values = expect_dict(action_values, "action_values")
        self.values: dict[str, np.ndarray] = {}
        for name, action in self.actions_spec.items():
            if name not in action_values:
                raise SpecError("action_values", f"needs a value for action '{name}'", got=action_values)
            self.values[name] = action_value(action_values[name], action, f"action_values.{name}")
        for name in action_values:
            if name not in self.actions_spec:
                raise unknown_name_error(f"action_values.{name}", "action", name, self.actions_spec)
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
        return {name: np.repeat(value[None], rows, axis=0) for name, value in self.values.items()}, internals
