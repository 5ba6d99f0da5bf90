"""Environment wrappers that keep the 2018 Environment API."""

from __future__ import annotations

from typing import Any

from torchforce.environments.environment import Environment
from torchforce.spec import expect_int


class RepeatActions(Environment):
    """Each action is applied ``repeat`` times (rewards summed; a terminal ends the repeat early), the 2018 runner's
    ``repeat_actions`` as an environment, so it also works for vectorized copies. Spec:
    ``{"type": "repeat_actions", "environment": <spec>, "repeat": 4}``."""

    def __init__(self, environment: Any, repeat: int = 1) -> None:
        self.environment = Environment.from_spec(environment, path="environment.environment")
        self.repeat = expect_int(repeat, "environment.repeat", minimum=1)

    def __str__(self) -> str:
        return f"RepeatActions({self.environment}, {self.repeat})"

    @property
    def states(self) -> dict[str, Any]:
        return self.environment.states

    @property
    def actions(self) -> dict[str, Any]:
        return self.environment.actions

    def reset(self) -> Any:
        return self.environment.reset()

    def execute(self, actions: Any) -> tuple[Any, int, float]:
        total = 0.0
        for _ in range(self.repeat):
            states, terminal, reward = self.environment.execute(actions)
            total += float(reward)
            if terminal:
                break
        return states, terminal, total

    def seed(self, seed: int | None) -> int | None:
        return self.environment.seed(seed)

    @property
    def resumable(self) -> bool:
        return self.environment.resumable

    @property
    def game_goes_on(self) -> bool:
        return self.environment.game_goes_on

    def close(self) -> None:
        self.environment.close()
