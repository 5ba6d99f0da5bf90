"""What ``act`` and ``observe`` take and give, as batches: states as ``{name: [rows, *shape]}`` arrays (one state
or a batch of them, an array for the single state form or a dict for named states), actions back in the form the
states came in, and ``observe``'s terminal and reward as one value per row."""

from __future__ import annotations

from typing import Any

import numpy as np

from torchforce.spec import StateSpec

Batch = dict[str, np.ndarray]
STATE_DTYPES: dict[str, np.dtype] = {
    "float": np.dtype(np.float32),
    "int": np.dtype(np.int64),
    "bool": np.dtype(np.bool_),
    "uint8": np.dtype(np.uint8),  # image states (spec.spaces.STATE_TYPES)
}


def as_batch(states: Any, specs: dict[str, StateSpec], single: bool) -> tuple[Batch, bool]:
    """What ``act`` was given as a batch ``{name: [rows, *shape]}``, and whether it was one already: one state or a
    batch of states, an array (single state form) or a dict of arrays (named states), checked against ``specs``."""
    batched: bool | None
    if single:
        ((name, spec),) = specs.items()
        array: np.ndarray = _as_state(states, spec, "state")
        batched = array.ndim == len(spec.shape) + 1
        if array.shape[int(batched) :] != spec.shape:
            raise ValueError(f"state has shape {array.shape}, expected {spec.shape} or (batch, *{spec.shape})")
        return {name: array if batched else array[None]}, batched
    if not isinstance(states, dict):
        raise TypeError(f"this agent has named states {sorted(specs)}: pass a dict of arrays")
    missing = set(specs) - set(states)
    if missing:
        raise ValueError(f"states is missing {sorted(missing)}")
    batch: Batch = {}
    batched = None
    rows: int | None = None
    for name, spec in specs.items():
        array = _as_state(states[name], spec, f"state '{name}'")
        is_batched = array.ndim == len(spec.shape) + 1
        if array.shape[int(is_batched) :] != spec.shape:
            raise ValueError(f"state '{name}' has shape {array.shape}, expected {spec.shape} or (batch, *{spec.shape})")
        if batched is not None and (is_batched != batched or (is_batched and array.shape[0] != rows)):
            raise ValueError(
                f"states disagree on batching: '{name}' has shape {array.shape}, the first state "
                f"{'a batch of ' + str(rows) if batched else 'no batch dimension'}"
            )
        batched, rows = is_batched, array.shape[0] if is_batched else 1
        batch[name] = array if is_batched else array[None]
    return batch, bool(batched)


def _as_state(values: Any, spec: StateSpec, what: str) -> np.ndarray:
    """``values`` as the state's array type. Floats given for an integer state (frames already scaled to [0, 1] for a
    uint8 image, say) are refused unless each is a whole number the type holds: the cast would turn them into other
    numbers (0.7 into 0) without a word."""
    dtype = STATE_DTYPES[spec.type]
    if dtype.kind in "iu" and isinstance(values, np.ndarray) and values.dtype.kind == "f":
        limits = np.iinfo(dtype)
        whole = np.array_equal(values, np.floor(values)) and (values.size == 0 or limits.min <= values.min())
        if not whole or (values.size and values.max() > limits.max):
            raise ValueError(
                f"{what} is {values.dtype} with values that {spec.type} does not hold (from {values.min():g} to "
                f"{values.max():g}); expected {spec.type} values"
                + (" (0-255: image frames unscaled, as the environment gives them)" if spec.type == "uint8" else "")
            )
    return np.asarray(values, dtype=dtype)


def as_output(actions: Batch, batched: bool, single: bool) -> Any:
    """Actions in the form the states came in: one or a batch; an array (single action form) or a dict."""
    if not batched:
        actions = {name: values[0] for name, values in actions.items()}
    if single:
        return next(iter(actions.values()))
    return actions


def per_row(value: Any, dtype: type, name: str, num_rows: int) -> np.ndarray:
    """``observe``'s ``terminal`` or ``reward``: a scalar or one value per row, as a flat array."""
    array: np.ndarray = np.asarray(value).astype(dtype).reshape(-1)
    if array.shape[0] == 1 and num_rows > 1:
        raise ValueError(f"{name}: {num_rows} rows acted, so observe needs {num_rows} values")
    if array.shape[0] != num_rows:
        raise ValueError(f"{name}: expected {num_rows} values (one per row), got {array.shape[0]}")
    return array
