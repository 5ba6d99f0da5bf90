"""Bookkeeping between ``act`` and ``observe`` for every row (parallel environment) of a batch.

A transition (s, internals, a, r, terminal, s') is complete once s' is known: at once for a terminal row, or at
the next ``act`` otherwise. ``Rows`` holds the open transition of each row; ``Segments`` stages completed
transitions per row so on-policy agents can write contiguous segments (whole episodes, or the data since the last
update) into their memory.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from torchforce.core.memories import FieldSpec
from torchforce.spec import ActionSpec, StateSpec

Batch = dict[str, np.ndarray]


def _allocate(fields: dict[str, FieldSpec], lead: tuple[int, ...]) -> Batch:
    return {name: np.zeros(lead + tuple(field.shape), dtype=field.dtype) for name, field in fields.items()}


class Rows:
    """The open transition of each of ``num_rows`` rows (everything but the next states)."""

    def __init__(self, fields: dict[str, FieldSpec], num_rows: int) -> None:
        self.fields = {name: field for name, field in fields.items() if not name.startswith("next_states/")}
        self.num_rows = num_rows
        self.record = _allocate(self.fields, (num_rows,))
        self.waiting = np.zeros(num_rows, dtype=bool)  # acted and observed, waiting for the next state

    def take(self, rows: np.ndarray | None, next_states: Batch) -> Batch:
        """The transitions of ``rows`` (all rows when None), completed with ``next_states`` (already row-selected)."""
        if rows is None:
            batch = dict(self.record)
        else:
            batch = {name: values[rows] for name, values in self.record.items()}
        for name, values in next_states.items():
            batch[f"next_states/{name}"] = values
        return batch

    def state_dict(self) -> dict[str, Any]:
        return {"record": {name: values.copy() for name, values in self.record.items()}, "waiting": self.waiting.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.record = {name: np.array(values) for name, values in state["record"].items()}
        self.waiting = np.array(state["waiting"], dtype=bool)
        self.num_rows = len(self.waiting)


class Segments:
    """Completed transitions staged per row, in order, until they are flushed as contiguous segments."""

    def __init__(self, fields: dict[str, FieldSpec], num_rows: int, length: int = 64) -> None:
        self.fields = fields
        self.buffer = _allocate(fields, (num_rows, length))
        self.lengths = np.zeros(num_rows, dtype=np.int64)

    @property
    def count(self) -> int:
        return int(self.lengths.sum())

    def append(self, batch: Batch, rows: np.ndarray) -> None:
        positions = self.lengths[rows]
        if len(positions) and positions.max() >= next(iter(self.buffer.values())).shape[1]:
            self._grow(int(positions.max()) + 1)
        for name, values in batch.items():
            self.buffer[name][rows, positions] = values
        self.lengths[rows] += 1

    def _grow(self, needed: int) -> None:
        for name, values in self.buffer.items():
            length = values.shape[1]
            while length < needed:
                length *= 2
            grown = np.zeros((values.shape[0], length) + values.shape[2:], dtype=values.dtype)
            grown[:, : values.shape[1]] = values
            self.buffer[name] = grown

    def flush(self, row: int, *, cut: bool = False) -> Batch | None:
        """The staged transitions of ``row`` as one segment (None if empty); ``cut`` marks an open end with 2."""
        length = int(self.lengths[row])
        if length == 0:
            return None
        segment = {name: values[row, :length].copy() for name, values in self.buffer.items()}
        if cut and segment["terminal"][-1] == 0:
            segment["terminal"][-1] = 2
        self.lengths[row] = 0
        return segment

    def state_dict(self) -> dict[str, Any]:
        return {"buffer": {name: values.copy() for name, values in self.buffer.items()}, "lengths": self.lengths.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.buffer = {name: np.array(values) for name, values in state["buffer"].items()}
        self.lengths = np.array(state["lengths"], dtype=np.int64)


# ---------------------------------------------------------------------------------------------- inputs and outputs

STATE_DTYPES = {"float": np.float32, "int": np.int64, "bool": np.bool_}


def as_batch(states: Any, specs: dict[str, StateSpec], single: bool) -> tuple[Batch, bool]:
    """What ``act`` was given as a batch ``{name: [rows, *shape]}``, and whether it was one already: one state or a
    batch of states, an array (single state form) or a dict of arrays (named states), checked against ``specs``."""
    if single:
        ((name, spec),) = specs.items()
        array = np.asarray(states, dtype=STATE_DTYPES[spec.type])
        batched = array.ndim == len(spec.shape) + 1
        if not batched and array.shape != spec.shape:
            raise ValueError(f"state has shape {array.shape}, expected {spec.shape} or (batch, *{spec.shape})")
        return {name: array if batched else array[None]}, batched
    if not isinstance(states, dict):
        raise TypeError(f"this agent has named states {sorted(specs)}: pass a dict of arrays")
    missing = set(specs) - set(states)
    if missing:
        raise ValueError(f"states is missing {sorted(missing)}")
    batch, batched, rows = {}, None, None
    for name, spec in specs.items():
        array = np.asarray(states[name], dtype=STATE_DTYPES[spec.type])
        is_batched = array.ndim == len(spec.shape) + 1
        if array.shape[int(is_batched) :] != spec.shape:
            raise ValueError(f"state '{name}' has shape {array.shape}, expected {spec.shape} or (batch, *{spec.shape})")
        if batched is not None and (is_batched != batched or (is_batched and array.shape[0] != rows)):
            raise ValueError(f"states disagree on batching: '{name}' has shape {array.shape}, the first state "
                             f"{'a batch of ' + str(rows) if batched else 'no batch dimension'}")  # fmt: skip
        batched, rows = is_batched, array.shape[0] if is_batched else 1
        batch[name] = array if is_batched else array[None]
    return batch, bool(batched)


def as_output(actions: Batch, batched: bool, single: bool) -> Any:
    """Actions in the form the states came in: one or a batch; an array (single action form) or a dict."""
    if not batched:
        actions = {name: values[0] for name, values in actions.items()}
    if single:
        return next(iter(actions.values()))
    return actions


def per_row(value: Any, dtype: type, name: str, num_rows: int) -> np.ndarray:
    """``observe``'s ``terminal`` or ``reward``: a scalar or one value per row, as a flat array."""
    array = np.asarray(value).astype(dtype).reshape(-1)
    if array.shape[0] == 1 and num_rows > 1:
        raise ValueError(f"{name}: {num_rows} rows acted, so observe needs {num_rows} values")
    if array.shape[0] != num_rows:
        raise ValueError(f"{name}: expected {num_rows} values (one per row), got {array.shape[0]}")
    return array


def experience_batch(
    experiences: Any,
    to_batch: Any,
    actions: dict[str, ActionSpec],
    single_action: bool,
    internals: dict[str, tuple[int, ...]],
) -> Batch | None:
    """Recorded steps (a list of dicts, or a dict of lists, with ``states``, ``actions``, ``terminal``, ``reward``
    and optionally ``internals``) as memory rows without next states; ``to_batch`` turns one step's states into a
    batch of one. An open end is marked terminal 2. None when there are no steps."""
    if isinstance(experiences, dict):
        count = len(experiences["reward"])
        experiences = [{key: experiences[key][i] for key in experiences} for i in range(count)]
    if not experiences:
        return None
    steps = [to_batch(e["states"])[0] for e in experiences]
    batch: Batch = {f"states/{name}": np.concatenate([step[name] for step in steps]) for name in steps[0]}
    for name, action in actions.items():
        values = [e["actions"] if single_action else e["actions"][name] for e in experiences]
        batch[f"actions/{name}"] = np.asarray(values, dtype=STATE_DTYPES[action.type]).reshape((-1,) + action.shape)
    for name, shape in internals.items():
        values = [e.get("internals", {}).get(name, np.zeros(shape)) for e in experiences]
        batch[f"internals/{name}"] = np.asarray(values, dtype=np.float32)
    batch["terminal"] = np.asarray([int(e["terminal"]) for e in experiences], dtype=np.int8)
    batch["reward"] = np.asarray([e["reward"] for e in experiences], dtype=np.float32)
    if batch["terminal"][-1] == 0:
        batch["terminal"][-1] = 2
    return batch
