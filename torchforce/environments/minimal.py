"""Small built-in environments for fast learning tests (numpy only, seedable).

Every step shows a fresh random state; the reward depends only on that state and the action taken, so the best
policy is known exactly and every step of it earns reward 1. Episodes last ``episode_length`` steps and end with
terminal 1, so the optimal return of an episode is ``episode_length`` (10 by default).

``minimal``: one float state ``x`` of shape (1,), uniform in [-1, 1]; one action, its type chosen by
``action_type``:
- ``"int"`` (``num_actions`` 2): reward 1 for action ``1 if x > 0 else 0``, else 0 (a random policy earns 0.5/step);
- ``"bool"``: reward 1 for ``x > 0``, else 0;
- ``"float"`` (unbounded) and ``"bounded"`` (in [-1, 1]): reward ``max(0, 1 - |a - x|)``, best at ``a = x``.

``multi``: named states ``float`` (shape (2,), uniform in [-1, 1]), ``int`` (shape (), 3 values) and ``bool``
(shape ()), and the named actions chosen by ``action_types`` (default all four): ``int`` (3 actions; right when
equal to state ``int``), ``bool`` (right when equal to state ``bool``), ``float`` (unbounded; target
``float[0]``) and ``bounded`` (in [-1, 1]; target ``float[1]``), scored as above. The reward is the mean over the
actions, so the optimal return is again ``episode_length``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from torchforce.environments.environment import Environment
from torchforce.spec import SpecError, expect_choice, expect_int

ACTION_TYPES = ("int", "bool", "float", "bounded")


def _action_spec(kind: str, num_actions: int) -> dict[str, Any]:
    if kind == "int":
        return {"type": "int", "shape": (), "num_actions": num_actions}
    if kind == "bounded":
        return {"type": "float", "shape": (), "min_value": -1.0, "max_value": 1.0}
    return {"type": kind, "shape": ()}


def _score(kind: str, action: Any, target: float) -> float:
    """Reward in [0, 1] for one action against its target (int/bool: exact match; float: closeness)."""
    value = np.asarray(action).item()
    if kind in ("int", "bool"):
        return 1.0 if value == target else 0.0
    return max(0.0, 1.0 - abs(value - target))


class _Episodic(Environment):
    def __init__(self, *, episode_length: int, seed: int | None) -> None:
        self.episode_length = expect_int(episode_length, "environment.episode_length", minimum=1)
        self._rng = np.random.default_rng(seed)
        self._timestep = 0

    def seed(self, seed: int | None) -> int | None:
        self._rng = np.random.default_rng(seed)
        return seed

    def _advance(self) -> int:
        self._timestep += 1
        return 1 if self._timestep >= self.episode_length else 0


class Minimal(_Episodic):
    """One float state, one action of type ``action_type`` (see the module doc); optimal return ``episode_length``."""

    def __init__(self, action_type: str = "int", *, episode_length: int = 10, seed: int | None = None) -> None:
        super().__init__(episode_length=episode_length, seed=seed)
        self.action_type = expect_choice(action_type, "environment.action_type", ACTION_TYPES)
        self._actions = _action_spec(self.action_type, 2)
        self._x = 0.0

    def __str__(self) -> str:
        return f"Minimal({self.action_type})"

    @property
    def states(self) -> dict[str, Any]:
        return {"type": "float", "shape": (1,), "min_value": -1.0, "max_value": 1.0}

    @property
    def actions(self) -> dict[str, Any]:
        return self._actions

    def _observe(self) -> np.ndarray:
        self._x = self._rng.uniform(-1.0, 1.0)
        return np.array([self._x], dtype=np.float32)

    def reset(self) -> np.ndarray:
        self._timestep = 0
        return self._observe()

    def execute(self, actions: Any) -> tuple[np.ndarray, int, float]:
        x = float(np.float32(self._x))
        if self.action_type in ("int", "bool"):
            reward = _score(self.action_type, actions, x > 0)
        else:
            reward = _score(self.action_type, actions, x)
        return self._observe(), self._advance(), reward


class MultiState(_Episodic):
    """Named float/int/bool states and named int/bool/float/bounded actions; optimal return ``episode_length``."""

    def __init__(
        self,
        *,
        action_types: Sequence[str] = ACTION_TYPES,
        episode_length: int = 10,
        seed: int | None = None,
    ) -> None:
        super().__init__(episode_length=episode_length, seed=seed)
        if isinstance(action_types, str) or not action_types:
            raise SpecError("environment.action_types", "not a list of action types", got=action_types)
        self.action_types = tuple(
            expect_choice(kind, f"environment.action_types[{i}]", ACTION_TYPES) for i, kind in enumerate(action_types)
        )
        self._actions = {kind: _action_spec(kind, 3) for kind in sorted(set(self.action_types))}
        self._state: dict[str, np.ndarray] = {}

    def __str__(self) -> str:
        return "MultiState(" + ", ".join(self._actions) + ")"

    @property
    def states(self) -> dict[str, Any]:
        return {
            "bool": {"type": "bool", "shape": ()},
            "float": {"type": "float", "shape": (2,), "min_value": -1.0, "max_value": 1.0},
            "int": {"type": "int", "shape": (), "num_values": 3},
        }

    @property
    def actions(self) -> dict[str, Any]:
        return self._actions

    def _observe(self) -> dict[str, np.ndarray]:
        rng = self._rng
        self._state = {
            "bool": np.asarray(rng.random() < 0.5),
            "float": rng.uniform(-1.0, 1.0, size=2).astype(np.float32),
            "int": np.asarray(rng.integers(3), dtype=np.int64),
        }
        return self._state

    def reset(self) -> dict[str, np.ndarray]:
        self._timestep = 0
        return self._observe()

    def execute(self, actions: Any) -> tuple[dict[str, np.ndarray], int, float]:
        state = self._state
        targets = {
            "int": int(state["int"]),
            "bool": bool(state["bool"]),
            "float": float(state["float"][0]),
            "bounded": float(state["float"][1]),
        }
        try:
            reward = sum(_score(kind, actions[kind], targets[kind]) for kind in self._actions) / len(self._actions)
        except (KeyError, TypeError) as error:
            raise ValueError(
                f"{self}: expected a dict with actions {sorted(self._actions)}, got {actions!r}"
            ) from error
        return self._observe(), self._advance(), reward
