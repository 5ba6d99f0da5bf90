"""What the tests' own small environments share: one number a state, two actions."""

from __future__ import annotations

from typing import Any

from torchforce.environments import Environment


class OneNumber(Environment):
    """The spaces of a test environment: a state of one float, an action of two values. Subclasses step."""

    @property
    def states(self) -> dict[str, Any]:
        return {"type": "float", "shape": (1,)}

    @property
    def actions(self) -> dict[str, Any]:
        return {"type": "int", "num_actions": 2}
