"""``minimal_test``: TensorForce 0.4's agent-test environment (its ``MinimalTest``), rebuilt from its rules.

``specification`` maps action kinds to shapes, e.g. ``{"bool": ()}`` or ``{"int": (2,), "float": (1,)}``; the
kinds are ``bool``, ``int`` (2 values), ``float`` (unbounded) and ``bounded`` (a float in [-0.5, 1.5]). Each kind
has one state, a pair ``(x, y)`` that starts at ``(1, 0)`` and that the kind's action moves:

- ``bool``/``int``: with ``c`` the sum of the action's elements and ``n`` their number, the state becomes
  ``((n - c) / n, c / n)``: all True/1 gives ``(0, 1)``, so the right action is True or 1 everywhere;
- ``float``/``bounded``: with ``a`` the mean of the action's elements, ``x`` falls by ``a`` (not below 0) and
  ``y`` rises by ``a`` (not above 1): large positive actions reach ``(0, 1)``, and ``y`` then stays 1 as long
  as the actions are not negative.

The reward of a kind is ``y`` clipped to [0, 1]; with one kind that is the reward, with several their mean. So an
episode of right actions earns 1 per step. Every step ends the episode with probability 0.25 (terminal 1), so
episodes last 4 steps on average. 0.4's agent tests call an episode good when its reward per step is at least 0.8.

With one kind, states and actions take the single short form (a bare ``(2,)`` state, a bare action); with several,
both are dicts keyed by the kind names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from torchforce.environments.environment import Environment
from torchforce.spec import SpecError, expect_choice

KINDS = ("bool", "int", "float", "bounded")
TERMINAL_PROBABILITY = 0.25
BOUNDS = (-0.5, 1.5)  # of the bounded float action


def _shape(shape: Any, path: str) -> tuple[int, ...]:
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (list, tuple)) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in shape
    ):
        raise SpecError(path, "not an action shape", got=shape, expected="a list of positive integers, or []")
    return tuple(shape)


class MinimalTest(Environment):
    """0.4's minimal agent-test environment for the action kinds and shapes of ``specification`` (module doc)."""

    def __init__(self, specification: Mapping[str, Any] | str = "int", *, seed: int | None = None) -> None:
        if isinstance(specification, str):
            specification = {specification: ()}
        if not isinstance(specification, Mapping) or not specification:
            raise SpecError(
                "environment.specification",
                "not a dict of action kinds to shapes",
                got=specification,
                expected='e.g. {"bool": []} or {"int": [2], "float": [1]}',
            )
        self.specification = {
            expect_choice(kind, "environment.specification", KINDS): _shape(shape, f"environment.specification.{kind}")
            for kind, shape in specification.items()
        }
        self.single = len(self.specification) == 1
        self._rng = np.random.default_rng(seed)
        self._state = {kind: (1.0, 0.0) for kind in self.specification}

    def __str__(self) -> str:
        return "MinimalTest(" + ", ".join(self.specification) + ")"

    def seed(self, seed: int | None) -> int | None:
        self._rng = np.random.default_rng(seed)
        return seed

    @property
    def states(self) -> dict[str, Any]:
        if self.single:
            return {"type": "float", "shape": (2,)}
        return {kind: {"type": "float", "shape": (2,)} for kind in self.specification}

    @property
    def actions(self) -> dict[str, Any]:
        actions = {}
        for kind, shape in self.specification.items():
            if kind == "int":
                actions[kind] = {"type": "int", "shape": shape, "num_actions": 2}
            elif kind == "bounded":
                actions[kind] = {"type": "float", "shape": shape, "min_value": BOUNDS[0], "max_value": BOUNDS[1]}
            else:
                actions[kind] = {"type": kind, "shape": shape}
        return next(iter(actions.values())) if self.single else actions

    def _observe(self) -> Any:
        states = {kind: np.asarray(state, dtype=np.float32) for kind, state in self._state.items()}
        return next(iter(states.values())) if self.single else states

    def reset(self) -> Any:
        self._state = {kind: (1.0, 0.0) for kind in self.specification}
        return self._observe()

    def execute(self, actions: Any) -> tuple[Any, int, float]:
        if self.single:
            actions = {next(iter(self.specification)): actions}
        elif not isinstance(actions, Mapping) or set(actions) != set(self.specification):
            raise ValueError(f"{self}: expected a dict with actions {sorted(self.specification)}, got {actions!r}")
        rewards = []
        for kind, shape in self.specification.items():
            action = np.asarray(actions[kind], dtype=np.float64)
            size = int(np.prod(shape))
            if kind in ("bool", "int"):
                right = float(action.sum())
                self._state[kind] = ((size - right) / size, right / size)
            else:
                step = float(action.sum()) / size
                x, y = self._state[kind]
                self._state[kind] = (max(x - step, 0.0), min(y + step, 1.0))
            rewards.append(min(max(self._state[kind][1], 0.0), 1.0))
        terminal = int(self._rng.random() < TERMINAL_PROBABILITY)
        return self._observe(), terminal, float(np.mean(rewards))
