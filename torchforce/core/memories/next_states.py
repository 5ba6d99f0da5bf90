"""Next states kept once: a row's next state is, almost always, the state of a row stored after it.

An agent stores a transition (s, a, r, terminal, s') per row. Along an environment's stream, s' of one row is s of the
next row, so storing both doubles a memory's largest fields: an Atari replay of 75,000 frame stacks held 4.2 GB, half
of it copies. ``NextStates`` keeps a link instead: ``successor[i]`` is the storage index of a row whose states are,
byte for byte, row i's next states (i itself for a terminal row, whose next state is its own state). The next states
of a row with no such row (a truncation's final state; the newest row of a stream, until its successor arrives) are
held apart, in ``held``, until a stored row matches them or the ring overwrites them.

Small states (under ``LINK_BYTES`` a row, e.g. CartPole's 16) are simply stored twice: there the links would cost
more time than the copies and save little memory.

Links are made by comparing bytes, never by bookkeeping: a link is only ever made to a row whose states equal the next
states it stands for, so retrievals are exact whatever order rows arrive in. Candidates are found cheaply: within a
batch, the following row (a segment of one stream); across batches, the held rows whose next states have the same
fingerprint (a few dozen bytes sampled from them) as a new row's states. A link always points to a row stored at the
same time or later, so the ring overwrites a row before, or together with, every row it links to.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from torchforce.core.memories.base import FieldSpec

PROBES = 64  # bytes sampled from a row's states for its fingerprint
# Linking pays from states of this many bytes a row: below it, a second copy costs less than the bookkeeping (16
# CartPole rows took 242 us a step linked, 29 us copied) and saves little (16 bytes a row against 8 for the link).
LINK_BYTES = 1024


def linked_fields(fields: Mapping[str, FieldSpec]) -> dict[str, str]:
    """``{"next_states/x": "states/x"}`` for every next-states field with a states field of the same shape and dtype,
    when these states take ``LINK_BYTES`` or more a row: the fields whose values a memory takes from stored states
    (none for small states, which are stored twice)."""
    links = {}
    for name, spec in fields.items():
        if name.startswith("next_states/"):
            own = "states/" + name[len("next_states/") :]
            if fields.get(own) == spec:
                links[name] = own
    size = sum(fields[own].dtype.itemsize * int(np.prod(fields[own].shape)) for own in links.values())
    return links if size >= LINK_BYTES else {}


def _words(values: np.ndarray) -> np.ndarray:
    """``values`` (rows first) as rows of unsigned integers of the same width: their bytes, compared exactly (-0.0 is
    not 0.0, a NaN equals the same NaN)."""
    rows = np.ascontiguousarray(values).reshape(len(values), -1)
    return rows.view(f"u{rows.dtype.itemsize}") if rows.dtype.itemsize in (1, 2, 4, 8) else rows.view(np.uint8)


def rows_equal(one: Mapping[str, np.ndarray], other: Mapping[str, np.ndarray]) -> np.ndarray:
    """Per row, whether every field of ``one`` equals the same field of ``other`` byte for byte."""
    equal = None
    for name, values in one.items():
        same = (_words(values) == _words(other[name])).all(axis=1)
        equal = same if equal is None else equal & same
    assert equal is not None
    return equal


class NextStates:
    """The next states of a memory's rows, as links to stored states (see the module docstring).

    ``links`` maps each next-states field to its states field. The stored states are read through the memory, never
    written.
    """

    def __init__(self, links: Mapping[str, str], fields: Mapping[str, FieldSpec], capacity: int) -> None:
        self.links = dict(links)
        self.specs = {state: fields[state] for state in self.links.values()}
        self.compared = [*self.links, *self.links.values()]  # the batch fields ``link`` reads
        self.successor = np.full(capacity, -1, dtype=np.int64)  # -1: the row's next states are held
        self.held: dict[int, tuple[int, dict[str, np.ndarray]]] = {}  # row -> (fingerprint, {states field: values})
        self.waiting: dict[int, list[int]] = {}  # fingerprint -> held rows with it
        self.probes = {
            state: np.unique(np.linspace(0, spec.dtype.itemsize * int(np.prod(spec.shape)) - 1, PROBES).astype(int))
            for state, spec in self.specs.items()
        }

    def __len__(self) -> int:
        """How many rows hold their next states apart."""
        return len(self.held)

    @property
    def nbytes(self) -> int:
        """The bytes of the links and of the next states held apart."""
        held = sum(values.nbytes for _, row in self.held.values() for values in row.values())
        return self.successor.nbytes + held

    def _fingerprint(self, states: Mapping[str, np.ndarray]) -> int:
        """A hash of a few bytes of one row's ``states`` (``{states field: values}``): equal states, equal prints."""
        parts = []
        for state, probes in self.probes.items():
            parts.append(np.ascontiguousarray(states[state]).reshape(-1).view(np.uint8)[probes].tobytes())
        return hash(tuple(parts))

    # ------------------------------------------------------------------ storing

    def forget(self, rows: np.ndarray) -> None:
        """The storage ``rows`` are about to be overwritten: drop what they hold."""
        for row in rows[self.successor[rows] < 0].tolist():
            self._release(row)
        self.successor[rows] = -1

    def _release(self, row: int) -> None:
        entry = self.held.pop(row, None)
        if entry is None:
            return
        rows = self.waiting[entry[0]]
        rows.remove(row)
        if not rows:
            del self.waiting[entry[0]]

    def _hold(self, row: int, states: dict[str, np.ndarray]) -> None:
        print_ = self._fingerprint(states)
        self.held[row] = (print_, states)
        self.waiting.setdefault(print_, []).append(row)

    def _claim(self, row: int, states: Mapping[str, np.ndarray]) -> None:
        """The new ``row`` with ``states``: every held row whose next states they are links to it."""
        for waiting in list(self.waiting.get(self._fingerprint(states), ())):
            held = self.held[waiting][1]
            if rows_equal(
                {name: values[None] for name, values in held.items()}, {k: v[None] for k, v in states.items()}
            )[0]:
                self._release(waiting)
                self.successor[waiting] = row

    def link(self, rows: np.ndarray, batch: Mapping[str, np.ndarray]) -> None:
        """Link the new storage ``rows``, just written from ``batch`` (its fields, in the memory's dtypes, in stored
        order): to themselves, to the following row of the batch, or held; and rows held from earlier batches to the
        new rows whose states are their next states."""
        n = len(rows)
        states = {state: batch[state] for state in self.links.values()}
        following = {state: batch[name] for name, state in self.links.items()}
        successor = np.full(n, -1, dtype=np.int64)
        own = rows_equal(following, states)
        successor[own] = rows[own]
        fed = np.zeros(n, dtype=bool)  # whether the row before links to this one
        if n > 1:
            fed[1:] = rows_equal({k: v[:-1] for k, v in following.items()}, {k: v[1:] for k, v in states.items()})
            fed[1:] &= ~own[:-1]
            successor[:-1][fed[1:]] = rows[1:][fed[1:]]
        if self.waiting:
            for k in np.flatnonzero(~fed).tolist():
                self._claim(int(rows[k]), {state: values[k] for state, values in states.items()})
        self.successor[rows] = successor
        for k in np.flatnonzero(successor < 0).tolist():
            self._hold(int(rows[k]), {state: values[k].copy() for state, values in following.items()})

    # ------------------------------------------------------------------ retrieving

    def gather(self, indices: np.ndarray, read: Callable[[str, np.ndarray], np.ndarray]) -> dict[str, np.ndarray]:
        """Copies of the next states of the rows at storage ``indices``, one array per next-states field; ``read(field,
        indices)`` returns copies of the memory's stored states."""
        successor = self.successor[indices]
        apart = np.flatnonzero(successor < 0)
        source = successor.copy()
        source[apart] = indices[apart]
        gathered = {}
        for name, state in self.links.items():
            values = read(state, source)
            for k in apart.tolist():
                values[k] = self.held[int(indices[k])][1][state]
            gathered[name] = values
        return gathered

    # ------------------------------------------------------------------ saving

    def state_dict(self, size: int) -> dict[str, Any]:
        """The links of the first ``size`` rows and the next states held apart (``rows``, one array per field)."""
        rows = np.array(sorted(self.held), dtype=np.int64)
        values = {}
        for name, state in self.links.items():
            spec = self.specs[state]
            stacked = [self.held[row][1][state] for row in rows.tolist()]
            values[name] = np.stack(stacked) if stacked else np.zeros((0, *spec.shape), dtype=spec.dtype)
        return {"successor": self.successor[:size].copy(), "rows": rows, "values": values}

    def check_state(self, state: Any, size: int, ages: np.ndarray) -> None:
        """A ValueError unless ``state`` is what ``state_dict(size)`` of these fields returns, for stored rows of
        ``ages`` (per storage index: 0 = the oldest row)."""
        prefix = "memory.load_state_dict: the saved next states"
        if not isinstance(state, Mapping) or state.keys() != {"successor", "rows", "values"}:
            raise ValueError(f"{prefix} must be a dict of successor, rows and values.")
        successor, rows, values = np.asarray(state["successor"]), np.asarray(state["rows"]), state["values"]
        if successor.shape != (size,) or successor.dtype != np.int64:
            raise ValueError(f"{prefix}: successor must be {size} int64 storage indices or -1.")
        if size and not -1 <= successor.min() <= successor.max() < size:
            raise ValueError(f"{prefix}: successor must be -1 or one of the {size} stored rows.")
        linked = np.flatnonzero(successor >= 0)
        if (ages[successor[linked]] < ages[linked]).any():
            raise ValueError(f"{prefix}: a row links to an older row, which the ring would overwrite first.")
        if rows.dtype != np.int64 or not np.array_equal(rows, np.flatnonzero(successor < 0)):
            raise ValueError(f"{prefix}: rows must be the rows whose successor is -1, in order.")
        if not isinstance(values, Mapping) or values.keys() != self.links.keys():
            raise ValueError(f"{prefix}: values must hold the fields {', '.join(self.links)}.")
        for name, state_name in self.links.items():
            spec, saved = self.specs[state_name], np.asarray(values[name])
            if saved.shape != (len(rows), *spec.shape) or saved.dtype != spec.dtype:
                raise ValueError(
                    f"{prefix}: field '{name}' has shape {saved.shape} and dtype {saved.dtype}, expected "
                    f"{(len(rows), *spec.shape)} and {spec.dtype}."
                )

    def load_state_dict(self, state: Mapping[str, Any], size: int) -> None:
        """Restore what ``state_dict(size)`` saved (checked first with ``check_state``)."""
        self.clear()
        self.successor[:size] = state["successor"]
        for k, row in enumerate(np.asarray(state["rows"]).tolist()):
            self._hold(row, {state_name: np.array(state["values"][name][k]) for name, state_name in self.links.items()})

    def clear(self) -> None:
        self.successor[:] = -1
        self.held.clear()
        self.waiting.clear()
