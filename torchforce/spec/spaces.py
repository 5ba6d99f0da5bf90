"""States and actions specs (reference §3): the single short form and the named dict form, normalized.

A states spec is ``{"shape": 4, "type": "float"}`` (one state, named ``state``) or ``{"name": {...}, ...}``.
An actions spec is ``{"type": "int", "num_actions": 2}`` (one action, named ``action``) or a dict of those.
Names are kept in sorted order, as in 2018.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torchforce.spec.checks import expect_choice, expect_float, expect_int
from torchforce.spec.errors import SpecError, did_you_mean

TYPES = ("float", "int", "bool")


@dataclass(frozen=True)
class StateSpec:
    """One named state input: its shape (without the batch dimension) and value type."""

    name: str
    shape: tuple[int, ...]
    type: str = "float"
    num_values: int | None = None  # int states: how many distinct values (for embeddings)
    min_value: float | None = None
    max_value: float | None = None

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def to_dict(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"type": self.type, "shape": list(self.shape)}
        for key in ("num_values", "min_value", "max_value"):
            if getattr(self, key) is not None:
                spec[key] = getattr(self, key)
        return spec


@dataclass(frozen=True)
class ActionSpec:
    """One named action: type, shape, and ``num_actions`` (int) or optional bounds (float)."""

    name: str
    type: str
    shape: tuple[int, ...] = ()
    num_actions: int | None = None
    min_value: float | None = None
    max_value: float | None = None

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def bounded(self) -> bool:
        return self.min_value is not None

    def to_dict(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"type": self.type, "shape": list(self.shape)}
        for key in ("num_actions", "min_value", "max_value"):
            if getattr(self, key) is not None:
                spec[key] = getattr(self, key)
        return spec


def _shape(value: Any, path: str) -> tuple[int, ...]:
    if isinstance(value, bool):
        raise SpecError(path, "not a shape", got=value, expected="an integer or a list of integers")
    if isinstance(value, int):
        value = (value,)
    if not isinstance(value, (list, tuple)):
        raise SpecError(path, "not a shape", got=value, expected="an integer or a list of integers")
    return tuple(expect_int(v, f"{path}[{i}]", minimum=1) for i, v in enumerate(value))


def _check_keys(spec: Mapping[str, Any], allowed: tuple[str, ...], path: str) -> None:
    for key in spec:
        if key not in allowed:
            guess = did_you_mean(key, allowed)
            hint = f"Did you mean '{guess}'?" if guess else "Accepted: " + ", ".join(allowed) + "."
            raise SpecError(f"{path}.{key}", "unknown key", hint=hint)


def _bounds(spec: Mapping[str, Any], path: str) -> tuple[float | None, float | None]:
    low, high = spec.get("min_value"), spec.get("max_value")
    if (low is None) != (high is None):
        raise SpecError(path, "min_value and max_value go together", got=dict(spec), expected="both or neither")
    if low is None:
        return None, None
    low = expect_float(low, f"{path}.min_value")
    high = expect_float(high, f"{path}.max_value")
    if not low < high:
        raise SpecError(path, "min_value must be below max_value", got={"min_value": low, "max_value": high})
    return low, high


def state_spec(name: str, spec: Any, path: str) -> StateSpec:
    if isinstance(spec, StateSpec):
        return spec
    if not isinstance(spec, Mapping):
        raise SpecError(path, "not a state spec", got=spec, expected='a dict like {"shape": 4, "type": "float"}')
    _check_keys(spec, ("shape", "type", "num_values", "num_states", "min_value", "max_value"), path)
    if "shape" not in spec:
        raise SpecError(path, "a state needs 'shape'", got=dict(spec))
    kind = expect_choice(spec.get("type", "float"), f"{path}.type", TYPES)
    num_values = spec.get("num_values", spec.get("num_states"))
    if num_values is not None:
        num_values = expect_int(num_values, f"{path}.num_values", minimum=1)
    low, high = _bounds(spec, path)
    return StateSpec(name, _shape(spec["shape"], f"{path}.shape"), kind, num_values, low, high)


def action_spec(name: str, spec: Any, path: str) -> ActionSpec:
    if isinstance(spec, ActionSpec):
        return spec
    if not isinstance(spec, Mapping):
        raise SpecError(path, "not an action spec", got=spec, expected='a dict like {"type": "int", "num_actions": 2}')
    _check_keys(spec, ("type", "shape", "num_actions", "min_value", "max_value"), path)
    kind = expect_choice(spec.get("type", "int"), f"{path}.type", TYPES)
    shape = _shape(spec.get("shape", ()), f"{path}.shape")
    num_actions = None
    if kind == "int":
        if "num_actions" not in spec:
            raise SpecError(path, "an int action needs 'num_actions'", got=dict(spec))
        num_actions = expect_int(spec["num_actions"], f"{path}.num_actions", minimum=1)
    elif "num_actions" in spec:
        raise SpecError(f"{path}.num_actions", f"only int actions take num_actions, this action is {kind}")
    low, high = _bounds(spec, path)
    if low is not None and kind != "float":
        raise SpecError(path, f"only float actions take min_value/max_value, this action is {kind}")
    return ActionSpec(name, kind, shape, num_actions, low, high)


def normalize_states(spec: Any, path: str = "states") -> tuple[dict[str, StateSpec], bool]:
    """Named state specs (sorted by name) and whether the single short form was used."""
    if isinstance(spec, StateSpec):
        return {spec.name: spec}, True
    if not isinstance(spec, Mapping) or not spec:
        raise SpecError(path, "not a states spec", got=spec, expected='{"shape": ..., "type": ...} or {name: {...}}')
    if "shape" in spec:
        return {"state": state_spec("state", spec, path)}, True
    return {name: state_spec(name, spec[name], f"{path}.{name}") for name in sorted(spec)}, False


def normalize_actions(spec: Any, path: str = "actions") -> tuple[dict[str, ActionSpec], bool]:
    """Named action specs (sorted by name) and whether the single short form was used."""
    if isinstance(spec, ActionSpec):
        return {spec.name: spec}, True
    if not isinstance(spec, Mapping) or not spec:
        raise SpecError(path, "not an actions spec", got=spec, expected='{"type": ..., ...} or {name: {...}}')
    if "type" in spec and not isinstance(spec["type"], Mapping):
        return {"action": action_spec("action", spec, path)}, True
    return {name: action_spec(name, spec[name], f"{path}.{name}") for name in sorted(spec)}, False
