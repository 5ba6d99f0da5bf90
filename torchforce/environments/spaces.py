"""Gymnasium spaces as 2018 states/actions specs, with the converters between the two
(docs/tensorforce-0.4.md, Environments).

Observations (states):
- ``Box`` -> one float state of the Box's shape, with ``min_value``/``max_value`` when the bounds are finite, within
  the spec's limit (``MAX_SPAN``: float32's range, so a Box of +-float32 max counts as unbounded) and the same for
  every element. Every Box is a float state, uint8 images included: observations arrive as float32
  (0..255 for images; scaling is the agent's preprocessing).
- ``Discrete(n)`` -> int state of shape ``()`` with ``num_values=n`` (values shifted so they start at 0).
- ``MultiDiscrete`` -> int state of its shape, ``num_values`` = the largest ``nvec``.
- ``MultiBinary`` -> bool state of its shape.

Actions:
- ``Discrete(n)`` -> int action with ``num_actions=n``; executed as a Python int (plus the space's ``start``).
- ``Box`` with finite bounds (within ``MAX_SPAN``, as for states) that are the same for every element -> one float
  action with ``min_value``/``max_value`` and the Box's shape; a Box without bounds -> one float action without
  bounds; a Box whose bounds differ between elements -> one float scalar action per element, ``action0``..
  ``actionN`` (row-major), each with its own bounds, put back together into one array on execute.
- ``MultiBinary`` -> bool action of its shape; ``MultiDiscrete`` with one ``nvec`` value -> int action of its shape,
  otherwise one int action per element like non-uniform Boxes.

``Tuple`` and ``Dict`` spaces are flattened into named entries: element ``i`` of a Tuple is ``state{i}``, entry
``i`` with key ``k`` of a Dict is ``state{i}-{k}`` (``action...`` for actions); deeper levels append ``-{i}`` or
``-{i}-{k}``. Names map back to the nested structure on execute.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from torchforce.spec import SpecError
from torchforce.spec.checks import MAX_SPAN

Reader = Callable[[Any], Any]
Writer = Callable[[Mapping[str, Any]], Any]


def _child(name: str, label: str, root: str) -> str:
    return name + label if name == root else f"{name}-{label}"


def _uniform(values: np.ndarray) -> float | None:
    """The single finite value of an array whose elements are all equal, else None."""
    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    if flat.size == 0 or not np.isfinite(flat[0]) or not np.all(flat == flat[0]):
        return None
    return float(flat[0])


def _usable_bounds(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Where ``[low, high]`` can be a spec's bounds: finite, ordered, within +-MAX_SPAN and at most MAX_SPAN apart."""
    with np.errstate(invalid="ignore", over="ignore"):
        return (
            np.isfinite(low)
            & np.isfinite(high)
            & (high > low)
            & (np.abs(low) <= MAX_SPAN)
            & (np.abs(high) <= MAX_SPAN)
            & (high - low <= MAX_SPAN)
        )


def _space_error(space: Any, path: str, role: str) -> SpecError:
    return SpecError(
        path,
        f"unsupported {role} space {type(space).__name__}",
        expected="Box, Discrete, MultiDiscrete, MultiBinary, or Tuple/Dict of these",
    )


# ---------------------------------------------------------------------------------------------------------- states


def _state_leaf(space: Any, path: str) -> tuple[dict[str, Any], Reader]:
    from gymnasium import spaces

    if isinstance(space, spaces.Box):
        spec: dict[str, Any] = {"type": "float", "shape": tuple(space.shape)}
        low, high = _uniform(space.low), _uniform(space.high)
        if low is not None and high is not None and _usable_bounds(np.asarray(low), np.asarray(high)):
            spec.update(min_value=low, max_value=high)
        return spec, _as_float32
    if isinstance(space, spaces.Discrete):
        start = int(space.start)
        spec = {"type": "int", "shape": (), "num_values": int(space.n)}
        return spec, (_as_int64 if start == 0 else lambda value: np.asarray(value - start, dtype=np.int64))
    if isinstance(space, spaces.MultiDiscrete):
        spec = {"type": "int", "shape": tuple(space.shape), "num_values": int(np.max(space.nvec))}
        starts = np.asarray(space.start, dtype=np.int64)
        if not starts.any():
            return spec, _as_int64
        return spec, lambda value: np.asarray(value, dtype=np.int64) - starts
    if isinstance(space, spaces.MultiBinary):
        return {"type": "bool", "shape": tuple(space.shape)}, _as_bool
    raise _space_error(space, path, "observation")


def _as_float32(value: Any) -> np.ndarray:
    return np.asarray(value, dtype=np.float32)


def _as_int64(value: Any) -> np.ndarray:
    return np.asarray(value, dtype=np.int64)


def _as_bool(value: Any) -> np.ndarray:
    return np.asarray(value, dtype=bool)


def _state_leaves(space: Any, name: str, where: tuple, out: list, path: str) -> None:
    from gymnasium import spaces

    if isinstance(space, spaces.Tuple):
        for i, sub in enumerate(space.spaces):
            _state_leaves(sub, _child(name, str(i), "state"), (*where, i), out, path)
    elif isinstance(space, spaces.Dict):
        for i, (key, sub) in enumerate(space.spaces.items()):
            _state_leaves(sub, _child(name, f"{i}-{key}", "state"), (*where, key), out, path)
    else:
        spec, read = _state_leaf(space, path)
        out.append((name, where, spec, read))


def _pick(value: Any, where: tuple) -> Any:
    for key in where:
        value = value[key]
    return value


def states_from_space(space: Any, path: str = "observation_space") -> tuple[dict[str, Any], Reader]:
    """The states spec of an observation space and a function from observations to states.

    For a single (non-Tuple/Dict) space the spec is the short form and the reader returns one array.
    """
    leaves: list = []
    _state_leaves(space, "state", (), leaves, path)
    if len(leaves) == 1 and not leaves[0][1]:
        return leaves[0][2], leaves[0][3]
    specs = {name: spec for name, _, spec, _ in leaves}
    readers = [(name, where, read) for name, where, _, read in leaves]

    def read_all(observation: Any) -> dict[str, np.ndarray]:
        return {name: read(_pick(observation, where)) for name, where, read in readers}

    return specs, read_all


# --------------------------------------------------------------------------------------------------------- actions


def _elementwise(space: Any, name: str, specs: dict, element_specs: list[dict], dtype: Any) -> Writer:
    """One scalar action per element of ``space`` (row-major), reassembled into an array of the space's shape."""
    names = []
    for j, spec in enumerate(element_specs):
        names.append(_child(name, str(j), "action"))
        specs[names[-1]] = spec
    shape = tuple(space.shape)
    start = np.asarray(getattr(space, "start", 0)).reshape(-1)

    integer = np.issubdtype(dtype, np.integer)

    def write(actions: Mapping[str, Any]) -> np.ndarray:
        values = np.fromiter((actions[n] for n in names), dtype=np.float64, count=len(names))
        if integer:  # an integer Box's float action rounds to the nearest value (a cast would cut toward 0)
            values = np.rint(values)
        return (values + start).astype(dtype).reshape(shape)

    return write


def _box_action(space: Any, name: str, specs: dict) -> Writer | None:
    low = np.asarray(space.low, dtype=np.float64).reshape(-1)
    high = np.asarray(space.high, dtype=np.float64).reshape(-1)
    bounded = _usable_bounds(low, high)
    shape, dtype = tuple(space.shape), space.dtype
    uniform = bounded.all() and _uniform(low) is not None and _uniform(high) is not None
    if uniform or not bounded.any():
        spec: dict[str, Any] = {"type": "float", "shape": shape}
        if uniform:
            spec.update(min_value=float(low[0]), max_value=float(high[0]))
        specs[name] = spec
        return None  # a single leaf: the caller converts with np.asarray
    element_specs = []
    for j in range(low.size):
        spec = {"type": "float", "shape": ()}
        if bounded[j]:
            spec.update(min_value=float(low[j]), max_value=float(high[j]))
        element_specs.append(spec)
    return _elementwise(space, name, specs, element_specs, dtype)


def _leaf_converter(space: Any) -> Callable[[Any], Any]:
    """Agent value -> Gymnasium value for a space that maps to one action."""
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        # the type the space's own samples have (np.int64): its contains() check, which many environments run on
        # every step, takes a slower path for a Python int
        start, integer = int(space.start), space.dtype.type
        return integer if start == 0 else (lambda value: integer(int(value) + start))
    shape, dtype = tuple(space.shape), space.dtype
    starts = np.asarray(getattr(space, "start", 0))
    if isinstance(space, spaces.MultiDiscrete) and starts.any():
        return lambda value: (np.asarray(value, dtype=np.int64).reshape(shape) + starts).astype(dtype)
    if isinstance(space, spaces.Box) and np.issubdtype(dtype, np.integer):
        # the agent acts with floats in the bounds: the nearest integer, where a cast would cut toward 0
        return lambda value: np.rint(np.asarray(value, dtype=np.float64)).astype(dtype).reshape(shape)
    return lambda value: np.asarray(value, dtype=dtype).reshape(shape)


def _action_node(space: Any, name: str, specs: dict, path: str) -> tuple[Writer, Callable[[Any], Any] | None]:
    """A writer from the flat action dict to this (sub)space's value, and the leaf converter if it is one action."""
    from gymnasium import spaces

    if isinstance(space, spaces.Tuple):
        children = [_action_node(sub, _child(name, str(i), "action"), specs, path)[0] for i, sub in enumerate(space)]
        return (lambda actions: tuple(child(actions) for child in children)), None
    if isinstance(space, spaces.Dict):
        keyed = [
            (key, _action_node(sub, _child(name, f"{i}-{key}", "action"), specs, path)[0])
            for i, (key, sub) in enumerate(space.spaces.items())
        ]
        return (lambda actions: {key: child(actions) for key, child in keyed}), None
    if isinstance(space, spaces.Discrete):
        specs[name] = {"type": "int", "shape": (), "num_actions": int(space.n)}
    elif isinstance(space, spaces.Box):
        write = _box_action(space, name, specs)
        if write is not None:
            return write, None
    elif isinstance(space, spaces.MultiBinary):
        specs[name] = {"type": "bool", "shape": tuple(space.shape)}
    elif isinstance(space, spaces.MultiDiscrete):
        nvec = np.asarray(space.nvec).reshape(-1)
        if np.all(nvec == nvec[0]):
            specs[name] = {"type": "int", "shape": tuple(space.shape), "num_actions": int(nvec[0])}
        else:
            element_specs = [{"type": "int", "shape": (), "num_actions": int(n)} for n in nvec]
            return _elementwise(space, name, specs, element_specs, space.dtype), None
    else:
        raise _space_error(space, path, "action")
    convert = _leaf_converter(space)
    return (lambda actions: convert(actions[name])), convert


def actions_from_space(space: Any, path: str = "action_space") -> tuple[dict[str, Any], Callable[[Any], Any], bool]:
    """The actions spec of an action space, a function from agent actions to Gymnasium actions, and whether the
    spec is the single short form (then the function takes a bare action, otherwise a dict keyed by name)."""
    specs: dict[str, Any] = {}
    write, convert = _action_node(space, "action", specs, path)
    if convert is not None and list(specs) == ["action"]:
        return specs["action"], convert, True
    return specs, write, False
