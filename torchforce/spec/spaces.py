"""States and actions specs (docs/tensorforce-0.4.md, States and actions): the single short form and the named dict
form, normalized.

A states spec is ``{"shape": 4, "type": "float"}`` (one state, named ``state``) or ``{"name": {...}, ...}``.
An actions spec is ``{"type": "int", "num_actions": 2}`` (one action, named ``action``) or a dict of those.
Names are kept in sorted order, as in 2018.

Limits (``checks.py``): one sample of a state or action has at most ``MAX_ELEMENTS`` (2^31) elements, counting an
int action's ``num_actions`` logits per element; ``min_value``/``max_value`` are finite, within +-``MAX_SPAN``
(10^38) and at most ``MAX_SPAN`` apart, so that bounded actions stay finite in float32.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torchforce.spec.checks import MAX_SPAN, expect_choice, expect_elements, expect_float, expect_int
from torchforce.spec.errors import SpecError, did_you_mean

TYPES = ("float", "int", "bool")
# States may also be "uint8": images (Atari frames) kept as bytes through memory and batches, scaled to floats
# inside the network (the "divide" layer); four times smaller than float32 in a replay memory.
STATE_TYPES = (*TYPES, "uint8")


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

    @property
    def bounds(self) -> tuple[float, float]:
        """``(min_value, max_value)`` of a bounded float action; a ValueError for an unbounded one."""
        if self.min_value is None or self.max_value is None:
            raise ValueError(f"the action '{self.name}' has no min_value/max_value")
        return self.min_value, self.max_value

    @property
    def num_values(self) -> int:
        """How many values one element of an int or bool action takes: ``num_actions``, or 2 for a bool."""
        if self.type == "bool":
            return 2
        if self.num_actions is None:
            raise ValueError(f"the {self.type} action '{self.name}' has no num_actions")
        return self.num_actions

    def to_dict(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"type": self.type, "shape": list(self.shape)}
        for key in ("num_actions", "min_value", "max_value"):
            if getattr(self, key) is not None:
                spec[key] = getattr(self, key)
        return spec


STATE_KEYS = ("shape", "type", "num_values", "num_states", "min_value", "max_value")
ACTION_KEYS = ("type", "shape", "num_actions", "min_value", "max_value")
STATE_EXAMPLE = '{"shape": 4, "type": "float"}'
ACTION_EXAMPLE = '{"type": "int", "num_actions": 2}'


def _shape(value: Any, path: str) -> tuple[int, ...]:
    """A shape: an int (-> 1-tuple) or a list of ints >= 1; ``[]`` / ``()`` is a scalar. At most ``MAX_ELEMENTS``
    elements in all."""
    if isinstance(value, (list, tuple)):
        shape = tuple(expect_int(v, f"{path}[{i}]", minimum=1) for i, v in enumerate(value))
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        shape = (expect_int(value, path, minimum=1),)
    else:
        raise SpecError(path, "not a shape", got=value, expected="an integer or a list of integers")
    expect_elements(math.prod(shape), path, f"one sample of shape {list(shape)}")
    return shape


def _check_keys(spec: Mapping[str, Any], allowed: tuple[str, ...], path: str) -> None:
    for key in spec:
        if key not in allowed:
            guess = did_you_mean(str(key), allowed)
            hint = f"Did you mean '{guess}'?" if guess else "Accepted: " + ", ".join(allowed) + "."
            raise SpecError(f"{path}.{key}", "unknown key", hint=hint)


def _given(spec: Mapping[str, Any], key: str) -> bool:
    return spec.get(key) is not None


def _bound(value: Any, path: str, unbounded: str) -> float:
    """One bound: a finite number within +-MAX_SPAN (float32's range, with room)."""
    try:
        value = expect_float(value, path)
    except SpecError as error:
        if error.message == "not a finite number":
            error.hint = unbounded
            error.args = (error.render(),)
        raise
    if abs(value) > MAX_SPAN:
        expected = f"a number in [{-MAX_SPAN:g}, {MAX_SPAN:g}]"
        raise SpecError(path, "out of float32's range", got=value, expected=expected, hint=unbounded)
    return value


def _bounds(spec: Mapping[str, Any], path: str) -> tuple[float | None, float | None]:
    low, high = spec.get("min_value"), spec.get("max_value")
    if (low is None) != (high is None):
        raise SpecError(path, "min_value and max_value go together", got=dict(spec), expected="both or neither")
    if low is None:
        return None, None
    unbounded = "Leave out both min_value and max_value for an unbounded value."
    low, high = _bound(low, f"{path}.min_value", unbounded), _bound(high, f"{path}.max_value", unbounded)
    if not low < high:
        raise SpecError(path, "min_value must be below max_value", got={"min_value": low, "max_value": high})
    if high - low > MAX_SPAN:
        raise SpecError(
            path,
            "min_value and max_value are too far apart: values between them overflow float32",
            got={"min_value": low, "max_value": high},
            expected=f"max_value - min_value <= {MAX_SPAN:g}",
            hint=unbounded,
        )
    return low, high


def _single_form(spec: Mapping[str, Any], keys: tuple[str, ...], entry: type, path: str, example: str) -> bool:
    """Whether ``spec`` is the single short form (its values are plain) or the named form (its values are specs).

    Deciding by the values, not by the presence of ``shape``/``type``, lets a named state be called ``shape`` and
    a named action ``type``.
    """
    nested = [key for key, value in spec.items() if isinstance(value, (Mapping, entry))]
    if not nested:
        return True
    plain = [key for key in spec if key not in nested and key in keys]
    if plain:
        raise SpecError(
            f"{path}.{plain[0]}",
            "mixes the single form and the named form",
            hint=f"Write either one spec like {example}, or named specs {{name: {example}, ...}}.",
        )
    return False


def _fields(spec: StateSpec | ActionSpec) -> dict[str, Any]:
    """A ready spec's fields as a spec dict, to be validated like one (a hand-built spec may be wrong)."""
    return {key: value for key, value in vars(spec).items() if key != "name" and value is not None}


def _check_name(name: Any, path: str) -> str:
    if not isinstance(name, str) or not name:
        raise SpecError(path, "not a name", got=name, expected="a non-empty string")
    return name


def state_spec(name: str, spec: Any, path: str) -> StateSpec:
    """One state's spec validated into a StateSpec; a ready StateSpec is checked again and takes ``name``."""
    if isinstance(spec, StateSpec):
        spec = _fields(spec)
    if not isinstance(spec, Mapping):
        raise SpecError(path, "not a state spec", got=spec, expected=f"a dict like {STATE_EXAMPLE}")
    _check_keys(spec, STATE_KEYS, path)
    if _given(spec, "num_values") and _given(spec, "num_states"):
        raise SpecError(f"{path}.num_states", "num_states is the 2018 name of num_values; give only one of them")
    if "shape" not in spec:
        raise SpecError(path, "a state needs 'shape'", got=dict(spec))
    kind = expect_choice(spec.get("type", "float"), f"{path}.type", STATE_TYPES)
    shape = _shape(spec["shape"], f"{path}.shape")
    key = "num_states" if _given(spec, "num_states") else "num_values"
    num_values = expect_int(spec.get(key), f"{path}.{key}", minimum=1, allow_none=True)
    if num_values is not None:  # an embedding of the values has a row per value
        expect_elements(num_values, f"{path}.{key}", "a table of one entry per value")
    if num_values is not None and kind != "int":
        raise SpecError(f"{path}.{key}", f"only int states take {key}, this state is {kind}")
    low, high = _bounds(spec, path)
    if low is not None and kind == "bool":
        raise SpecError(path, "a bool state takes no min_value/max_value")
    return StateSpec(name, shape, kind, num_values, low, high)


def action_spec(name: str, spec: Any, path: str) -> ActionSpec:
    """One action's spec validated into an ActionSpec; a ready ActionSpec is checked again and takes ``name``."""
    if isinstance(spec, ActionSpec):
        spec = _fields(spec)
    if not isinstance(spec, Mapping):
        raise SpecError(path, "not an action spec", got=spec, expected=f"a dict like {ACTION_EXAMPLE}")
    _check_keys(spec, ACTION_KEYS, path)
    kind = expect_choice(spec.get("type", "int"), f"{path}.type", TYPES)
    shape = _shape(spec.get("shape", ()), f"{path}.shape")
    num_actions = None
    if kind == "int":
        if "num_actions" not in spec:
            raise SpecError(path, "an int action needs 'num_actions'", got=dict(spec))
        num_actions = expect_int(spec["num_actions"], f"{path}.num_actions", minimum=1)
        expect_elements(
            math.prod(shape) * num_actions,
            f"{path}.num_actions",
            f"the {num_actions} logits of each of the {math.prod(shape)} action elements",
        )
    elif _given(spec, "num_actions"):
        raise SpecError(f"{path}.num_actions", f"only int actions take num_actions, this action is {kind}")
    if kind != "float" and (_given(spec, "min_value") or _given(spec, "max_value")):
        raise SpecError(path, f"only float actions take min_value/max_value, this action is {kind}")
    low, high = _bounds(spec, path)
    return ActionSpec(name, kind, shape, num_actions, low, high)


def normalize_states(spec: Any, path: str = "states") -> tuple[dict[str, StateSpec], bool]:
    """Named state specs (sorted by name) and whether the single short form was used (its state is ``state``)."""
    if isinstance(spec, StateSpec):
        return {spec.name: state_spec(spec.name, spec, path)}, True
    if not isinstance(spec, Mapping):
        raise SpecError(path, "not a states spec", got=spec, expected=f"{STATE_EXAMPLE} or {{name: {{...}}, ...}}")
    if not spec:
        raise SpecError(path, "no states given", expected=f"{STATE_EXAMPLE} or {{name: {{...}}, ...}}")
    if _single_form(spec, STATE_KEYS, StateSpec, path, STATE_EXAMPLE):
        return {"state": state_spec("state", spec, path)}, True
    names = sorted(_check_name(name, f"{path}.{name}") for name in spec)
    return {name: state_spec(name, spec[name], f"{path}.{name}") for name in names}, False


def normalize_actions(spec: Any, path: str = "actions") -> tuple[dict[str, ActionSpec], bool]:
    """Named action specs (sorted by name) and whether the single short form was used (its action is ``action``)."""
    if isinstance(spec, ActionSpec):
        return {spec.name: action_spec(spec.name, spec, path)}, True
    if not isinstance(spec, Mapping):
        raise SpecError(path, "not an actions spec", got=spec, expected=f"{ACTION_EXAMPLE} or {{name: {{...}}, ...}}")
    if not spec:
        raise SpecError(path, "no actions given", expected=f"{ACTION_EXAMPLE} or {{name: {{...}}, ...}}")
    if _single_form(spec, ACTION_KEYS, ActionSpec, path, ACTION_EXAMPLE):
        return {"action": action_spec("action", spec, path)}, True
    names = sorted(_check_name(name, f"{path}.{name}") for name in spec)
    return {name: action_spec(name, spec[name], f"{path}.{name}") for name in names}, False
