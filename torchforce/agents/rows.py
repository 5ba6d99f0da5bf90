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
