"""The memory base: a preallocated numpy ring buffer of named fields, with episode bookkeeping.

Rows are kept in insertion order in a ring of ``capacity`` rows; once the ring is full, each new row overwrites the
oldest one. An episode ends at a row whose ``terminal`` is > 0 (1 = true terminal, 2 = truncation or a cut).
Subclasses decide which rows a retrieval returns; this class owns the storage, the pointers and the episode
structure, and the checks every memory shares.

Large next states are not stored twice: a memory whose fields pair ``next_states/x`` with ``states/x`` (1 KiB a row or
more: frames) links each row to the stored row whose states they are, and holds apart only those no stored row has
(``NextStates``). With ``stacked_frames``, image states (rows of height, width and stacked frames) keep each distinct
frame once, in a pool the rows point into (``Frames``).

Row positions come in two kinds: *storage indices* (where a row lives in the ring, what retrievals return as
``indices``) and *offsets* (the row's age rank: 0 = the oldest stored row). Episode and window arithmetic is done
on offsets, which never wrap, and converted to storage indices at the end.
"""

from __future__ import annotations

import copy
import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from torchforce.core.memories.frames import Frames, check_saved, expand, framed_fields
from torchforce.core.memories.next_states import NextStates, linked_fields
from torchforce.spec import SpecError, expect_bool, expect_int
from torchforce.spec.checks import expect_elements

REQUIRED_FIELDS: dict[str, np.dtype] = {"terminal": np.dtype(np.int8), "reward": np.dtype(np.float32)}
RESERVED_NAMES = ("indices", "weights")  # keys that retrievals add to the fields


@dataclass(frozen=True)
class FieldSpec:
    """The per-row shape and the dtype of one stored field (``()`` for a scalar per row). An ``optional`` field may
    be left out of a stored batch or a saved memory: its rows are then zeros, or with a ``fallback`` (the name of
    another field of the same shape and dtype) a copy of that field's rows."""

    shape: tuple[int, ...]
    dtype: np.dtype
    optional: bool = False
    fallback: str | None = None

    def __post_init__(self) -> None:
        shape = tuple(operator.index(size) for size in self.shape)
        if any(size < 0 for size in shape):
            raise ValueError(f"FieldSpec: shape sizes must be >= 0, got {shape}.")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", np.dtype(self.dtype))


def rows_shape(shape: tuple[int, ...]) -> str:
    """``(n, 4, 2)``: how a batch of rows of ``shape`` reads in an error message."""
    return "(" + ", ".join(["n", *(str(size) for size in shape)]) + ")"


def check_fields(fields: Mapping[str, FieldSpec]) -> dict[str, FieldSpec]:
    if not isinstance(fields, Mapping):
        raise TypeError(f"memory fields must be a dict of FieldSpec, got {type(fields).__name__}.")
    for name, spec in fields.items():
        if not isinstance(spec, FieldSpec):
            raise TypeError(f"memory field '{name}' must be a FieldSpec, got {type(spec).__name__}.")
        if name in RESERVED_NAMES:
            raise ValueError(f"memory field name '{name}' is reserved: retrievals add '{name}' themselves.")
    for name, spec in fields.items():
        fallback = fields.get(spec.fallback) if spec.fallback is not None else None
        if spec.fallback is not None and (
            not spec.optional or fallback is None or (fallback.shape, fallback.dtype) != (spec.shape, spec.dtype)
        ):
            raise ValueError(
                f"memory field '{name}': its fallback '{spec.fallback}' must be another field of the same shape and "
                "dtype, and the field itself optional."
            )
    for name, dtype in REQUIRED_FIELDS.items():
        if name not in fields:
            raise ValueError(
                f"memory fields must include '{name}' (shape (), {dtype}); got fields: {', '.join(fields) or 'none'}."
            )
        if fields[name] != FieldSpec((), dtype):
            raise ValueError(
                f"memory field '{name}' must have shape () and dtype {dtype}, "
                f"got shape {fields[name].shape} and dtype {fields[name].dtype}."
            )
    return dict(fields)


def ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(start, start + length)`` for every pair, without a Python loop."""
    total = int(lengths.sum())
    shift = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    return shift + np.arange(total)


def request_count(n: Any, name: str) -> int:
    try:
        n = operator.index(n)
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {n!r}.") from None
    if n < 1:
        raise ValueError(f"{name} must be >= 1, got {n}.")
    return n


class Memory:
    """A ring buffer of rows with named fields (see the module docstring); subclasses define the retrievals.

    Every retrieval returns a dict of numpy arrays (copies) keyed by field name, plus ``indices``: the int64
    storage indices of the returned rows. ``units`` are the retrievals a memory supports (update_mode units).
    """

    units: tuple[str, ...] = ("timesteps", "episodes", "sequences")

    def __init__(
        self,
        *,
        fields: Mapping[str, FieldSpec],
        rng: np.random.Generator,
        capacity: int,
        include_next_states: bool = False,
        stacked_frames: bool = False,
    ) -> None:
        self._capacity = expect_int(capacity, "capacity", minimum=1)
        # 2018 configs name whether next states are stored; here the agent decides which fields exist.
        self.include_next_states = expect_bool(include_next_states, "include_next_states")
        self.stacked_frames = expect_bool(stacked_frames, "stacked_frames")
        self.fields = check_fields(fields)
        framed = framed_fields(self.fields) if self.stacked_frames else []
        if self.stacked_frames and not framed:
            states = ", ".join(
                f"{name} {spec.shape}" for name, spec in self.fields.items() if name.startswith("states/")
            )
            raise SpecError(
                "stacked_frames",
                "keeps image states (rows of height, width and stacked frames) frame by frame, but these states have "
                f"no image: {states or 'no states'}",
                got=stacked_frames,
                hint="Leave stacked_frames out unless the states are frame stacks such as Atari's (84, 84, 4).",
            )
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"memory rng must be a numpy Generator, got {type(rng).__name__}.")
        self.rng = rng
        links = linked_fields(self.fields)
        # the fields kept in the ring; linked next states are taken from the states (see NextStates), framed states
        # from their pools (see Frames)
        self._stored = {name: spec for name, spec in self.fields.items() if name not in links and name not in framed}
        self._data = self._allocate()
        self._frames = {name: Frames(self.fields[name], self._capacity) for name in framed}
        self._next_states = NextStates(links, self.fields, self._capacity) if links else None
        self._next = 0  # storage index the next row goes to
        self._size = 0  # rows stored (<= capacity)
        # False once the row before the oldest stored one was overwritten in the middle of an episode: the oldest
        # episode is then partial and does not count as complete.
        self._oldest_starts_episode = True

    def _allocate(self) -> dict[str, np.ndarray]:
        """One zeroed array of ``capacity`` rows per field; a field too large for one array (``MAX_ELEMENTS``), or
        for the machine's memory, is a SpecError naming the capacity."""
        hint = "Lower memory.capacity (it counts timesteps; agents derive its default from update_mode.batch_size)."
        frames = framed_fields(self._stored)  # image states: pooled frame by frame, no array of capacity rows
        data = {}
        for name, spec in self._stored.items():
            elements = self._capacity * math.prod(spec.shape)
            expect_elements(
                elements,
                "capacity",
                f"the memory's field '{name}' ({self._capacity} rows of shape {spec.shape})",
                hint=hint
                + (" Or, for stacked frames (Atari's), set memory.stacked_frames: true." if name in frames else ""),
            )
            try:
                data[name] = np.zeros((self._capacity, *spec.shape), dtype=spec.dtype)
            except MemoryError:
                raise SpecError(
                    "capacity",
                    f"field '{name}' ({self._capacity} rows of shape {spec.shape}) does not "
                    "fit in this machine's memory",
                    got=self._capacity,
                    hint=hint,
                ) from None
        return data

    def _fields_match(self, names: Any, expected: Mapping[str, Any]) -> bool:
        """Whether ``names`` are the keys of ``expected`` (the fields, or the stored ones), but for optional ones."""
        if names == expected.keys():  # every field: the common case, a store's hot path
            return True
        given = set(names)
        return given <= expected.keys() and all(self.fields[name].optional for name in expected.keys() - given)

    @property
    def capacity(self) -> int:
        return self._capacity

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return f"{type(self).__name__}(capacity={self._capacity}, stored={self._size}, fields={list(self.fields)})"

    @property
    def nbytes(self) -> int:
        """The bytes this memory holds: its ring, its pools of frames, and the links and next states it holds apart."""
        held = 0 if self._next_states is None else self._next_states.nbytes
        pooled = sum(frames.nbytes for frames in self._frames.values())
        return sum(data.nbytes for data in self._data.values()) + pooled + held

    @property
    def num_episodes(self) -> int:
        """How many complete episodes are stored."""
        return len(self._episode_bounds()[0])

    # storing

    def store(self, batch: Mapping[str, np.ndarray]) -> None:
        """Append the rows of ``batch`` (every field, same number of rows, at most ``capacity``) in order."""
        self._write(batch)

    def _write(self, batch: Mapping[str, np.ndarray]) -> tuple[int, int]:
        """Store ``batch``; returns the storage index of its first row and its number of rows."""
        arrays, n = self._check_batch(batch)
        start = self._next
        if n == 0:
            return start, 0
        overwritten = self._size + n - self._capacity
        if overwritten > 0:
            newest_lost = (start - self._size + overwritten - 1) % self._capacity
            self._oldest_starts_episode = bool(self._data["terminal"][newest_lost] > 0)
        end = start + n
        if overwritten > 0:
            lost = self._storage_indices(np.arange(overwritten))
            if self._next_states is not None:
                self._next_states.forget(lost)
            for frames in self._frames.values():
                frames.forget(lost)
        stored = {name: array for name, array in arrays.items() if name in self._data}
        for name in self._data.keys() - stored.keys():  # optional fields left out
            stored[name] = self._given(arrays, name, n)
        if end <= self._capacity:
            for name, array in stored.items():
                self._data[name][start:end] = array
        else:
            split = self._capacity - start
            for name, array in stored.items():
                self._data[name][start:] = array[:split]
                self._data[name][: end - self._capacity] = array[split:]
        self._next = end % self._capacity
        self._size = min(self._size + n, self._capacity)
        if not self._frames and self._next_states is None:  # small states (CartPole's): the ring is all
            return start, n
        rows = (start + np.arange(n)) % self._capacity
        for name, frames in self._frames.items():
            frames.store(rows, np.asarray(self._given(arrays, name, n), self.fields[name].dtype))
        if self._next_states is not None:
            compared = self._next_states.compared
            self._next_states.link(rows, {name: np.asarray(arrays[name], self.fields[name].dtype) for name in compared})
        return start, n

    def _given(self, arrays: Mapping[str, np.ndarray], name: str, n: int) -> np.ndarray:
        """The ``n`` rows of field ``name`` in a stored batch: as given, or for an optional field left out its
        fallback's rows, or zeros."""
        if name in arrays:
            return arrays[name]
        fallback = self.fields[name].fallback
        if fallback is not None and fallback in arrays:
            return arrays[fallback]
        return np.zeros((n, *self.fields[name].shape), self.fields[name].dtype)

    def _check_batch(self, batch: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], int]:
        if not isinstance(batch, Mapping):
            raise ValueError(f"memory.store expects a dict of arrays, got {type(batch).__name__}.")
        if not self._fields_match(batch.keys(), self.fields):
            missing = [name for name in self.fields if name not in batch]
            extra = [name for name in batch if name not in self.fields]
            raise ValueError(
                f"memory.store: the batch fields do not match the memory's. Expected: {', '.join(self.fields)}; "
                f"missing: {', '.join(missing) or 'none'}; unexpected: {', '.join(map(str, extra)) or 'none'}."
            )
        arrays = {}
        n = None
        for name, spec in self.fields.items():
            if name not in batch:  # an optional field (_fields_match): zeros
                continue
            array = np.asarray(batch[name])
            if array.ndim != len(spec.shape) + 1 or array.shape[1:] != spec.shape:
                raise ValueError(
                    f"memory.store: field '{name}' expected shape {rows_shape(spec.shape)}, got {array.shape}."
                )
            if not np.can_cast(array.dtype, spec.dtype, "same_kind"):
                raise ValueError(f"memory.store: field '{name}' expected dtype {spec.dtype}, got {array.dtype}.")
            if n is None:
                n = array.shape[0]
            elif array.shape[0] != n:
                raise ValueError(
                    f"memory.store: every field needs the same number of rows; "
                    f"'{next(iter(self.fields))}' has {n}, '{name}' has {array.shape[0]}."
                )
            arrays[name] = array
        assert n is not None  # check_fields: every memory has the fields terminal and reward
        if n > self._capacity:
            raise SpecError(
                "memory.capacity",
                f"cannot store {n} rows at once in a memory of capacity {self._capacity}",
                hint="An on-policy agent stores each finished episode whole (update_mode unit 'episodes'), or "
                "everything since its last update (update_mode.frequency): raise memory.capacity above that.",
            )
        return arrays, n

    # positions and episodes

    def _storage_indices(self, offsets: np.ndarray) -> np.ndarray:
        """Storage indices of the rows at ``offsets`` (0 = the oldest stored row)."""
        oldest = (self._next - self._size) % self._capacity
        return (np.asarray(offsets, dtype=np.int64) + oldest) % self._capacity

    def _terminal_in_order(self) -> np.ndarray:
        """The stored ``terminal`` values, oldest first."""
        terminal = self._data["terminal"]
        if self._size < self._capacity:
            return terminal[: self._size]
        return np.concatenate((terminal[self._next :], terminal[: self._next]))

    def _episode_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Offsets of the first and of the last row of every complete episode, oldest first."""
        ends = np.flatnonzero(self._terminal_in_order() > 0)
        starts = np.zeros_like(ends)
        starts[1:] = ends[:-1] + 1
        if not self._oldest_starts_episode:
            return starts[1:], ends[1:]
        return starts, ends

    def _window_starts(self, length: int) -> np.ndarray:
        """Offsets where ``length`` consecutive rows start without an episode end before their last row."""
        if length > self._size:
            return np.zeros(0, dtype=np.int64)
        ended = self._terminal_in_order() > 0
        ends_before = np.zeros(self._size + 1, dtype=np.int64)  # ends_before[k]: episode ends among rows 0..k-1
        np.cumsum(ended, out=ends_before[1:])
        crossings = ends_before[length - 1 : self._size] - ends_before[: self._size - length + 1]
        return np.flatnonzero(crossings == 0)

    def _gather(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        """Copies of the rows at storage ``indices``, plus the indices themselves."""
        indices = np.asarray(indices, dtype=np.int64)
        following = {} if self._next_states is None else self._next_states.gather(indices, self._read)
        batch = {name: following[name] if name in following else self._read(name, indices) for name in self.fields}
        batch["indices"] = indices.copy()
        return batch

    def _read(self, name: str, indices: np.ndarray) -> np.ndarray:
        """Copies of the stored field ``name`` (in the ring or pooled as frames) at storage ``indices``."""
        frames = self._frames.get(name)
        return self._data[name][indices] if frames is None else frames.gather(indices)

    def _describe(self) -> str:
        return f"{self._size} rows, {self.num_episodes} complete episodes, capacity {self._capacity}"

    def _episodes_error(self, n: int) -> ValueError:
        """Too few complete episodes for a retrieval of ``n``; a full memory will never hold more, so then it is
        the capacity that is wrong (for the episodes' length)."""
        message = f"cannot retrieve {n} complete episodes: the memory holds {self._describe()}"
        if self._size < self._capacity:
            return ValueError(message + ".")
        return SpecError(
            "memory.capacity",
            message,
            hint=f"The memory is full, so its episodes are too long for {n} of them to fit: raise memory.capacity "
            "(it counts timesteps, not episodes), or lower update_mode.batch_size.",
        )

    def _require_rows(self, request: str) -> None:
        if self._size == 0:
            raise ValueError(f"cannot retrieve {request}: the memory is empty (capacity {self._capacity}).")

    # retrieving

    def contents(self) -> dict[str, np.ndarray]:
        """Copies of every stored row, oldest first, next states included, with their storage ``indices``: what a
        memory holds, to look at (retrievals are for learning)."""
        return self._gather(self._storage_indices(np.arange(self._size)))

    def retrieve_timesteps(self, n: int) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def retrieve_episodes(self, n: int) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def retrieve_sequences(self, n: int, length: int) -> dict[str, np.ndarray]:
        raise NotImplementedError

    # saving

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly: contents, pointers, episode flag and the rng's state.

        The memory restores the state of the generator it was given; give it its own generator if the caller's
        must not be reset on load.
        """
        state = {
            "capacity": self._capacity,
            # the rows in use only: a memory fills from row 0, so until it is full they are the first ``size``
            "data": {name: data[: self._size].copy() for name, data in self._data.items()},
            "next": self._next,
            "size": self._size,
            "oldest_starts_episode": self._oldest_starts_episode,
            "rng": copy.deepcopy(self.rng.bit_generator.state),
        }
        if self._frames:  # each distinct frame once, as the pools keep them
            state["frames"] = {name: frames.state_dict(self._size) for name, frames in self._frames.items()}
        if self._next_states is not None:
            state["next_states"] = self._next_states.state_dict(self._size)
        return state

    def _saved_frames(self, state: Mapping[str, Any], data: dict[str, Any], size: int) -> dict[str, Any]:
        """The frames a saved memory pooled, checked: ``{field: (ids, planes)}`` for the fields this memory pools too;
        the others go into ``data``, expanded into rows."""
        saved_frames = state.get("frames", {})
        if not isinstance(saved_frames, Mapping):
            raise ValueError("memory.load_state_dict: the saved frames must be a dict of fields.")
        pooled = {}
        for name, saved in saved_frames.items():
            if name not in self.fields or name in data:
                raise ValueError(
                    f"memory.load_state_dict: saved frames of field '{name}', which "
                    + ("the saved data also holds." if name in data else "this memory does not have.")
                )
            ids, planes = check_saved(saved, self.fields[name], size, name)
            if name in self._frames:
                pooled[name] = (ids, planes)
            else:
                data[name] = expand(ids, planes)
        return pooled

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what ``state_dict`` saved, checked first: a bad state changes nothing. A memory saved before next
        states were linked (its data holds them in full) loads too: its rows link to themselves or to the row after
        them where their bytes say so, and the rest are held apart until overwritten. Frames saved pooled load into a
        memory without ``stacked_frames``, and states saved in full into one with it."""
        if state["capacity"] != self._capacity:
            raise ValueError(
                f"memory.load_state_dict: the saved memory has capacity {state['capacity']}, this one {self._capacity}."
            )
        size = int(state["size"])
        data = dict(state["data"])
        pooled = self._saved_frames(state, data, size)
        in_rows = {name: data.pop(name) for name in self._frames if name in data}  # saved in full, pooled here
        missing = [n for n in self._frames if n not in pooled and n not in in_rows and not self.fields[n].optional]
        plain = {name: spec for name, spec in self.fields.items() if name not in self._frames}
        same_fields = self._fields_match(data.keys(), self._data)
        in_full = (
            self._next_states is not None and "next_states" not in state and self._fields_match(data.keys(), plain)
        )
        if missing or (not same_fields and not in_full):
            raise ValueError(
                f"memory.load_state_dict: the saved fields ({', '.join([*data, *in_rows, *pooled])}) differ from this "
                f"memory's ({', '.join([*self._data, *self._frames])})."
            )
        start = int(state["next"])
        for name, saved in {**data, **in_rows}.items():
            own = (self._capacity, *self.fields[name].shape)
            dtype = self.fields[name].dtype
            # the rows in use (older checkpoints saved all ``capacity`` rows)
            if saved.shape[1:] != own[1:] or saved.dtype != dtype or not size <= len(saved) <= own[0]:
                raise ValueError(
                    f"memory.load_state_dict: saved field '{name}' has shape {saved.shape} and dtype {saved.dtype}, "
                    f"expected {size} to {own[0]} rows of shape {own[1:]} and {dtype}."
                )
        oldest = (start - size) % self._capacity
        if self._next_states is not None and not in_full:
            if "next_states" not in state:
                raise ValueError("memory.load_state_dict: the saved memory has no next_states.")
            self._next_states.check_state(state["next_states"], size, (np.arange(size) - oldest) % self._capacity)
        for name, values in self._data.items():
            saved = data.get(name)  # an optional field the memory was saved without: zeros, or its fallback's rows
            fallback = self.fields[name].fallback
            if saved is None and fallback is not None and fallback in data:
                saved = data[fallback]
            filled = 0 if saved is None else len(saved)
            if saved is not None:
                values[:filled] = saved
            values[filled:] = 0
        for name, frames in self._frames.items():
            if name in pooled:
                frames.load(*pooled[name])
                continue
            frames.clear()
            spec = self.fields[name]
            saved = in_rows.get(name)  # an optional field the memory was saved without: zeros, or its fallback's rows
            fallback = spec.fallback
            if saved is None and fallback is not None:
                saved = in_rows.get(fallback, data.get(fallback))
            frames.store(np.arange(size), np.zeros((size, *spec.shape), spec.dtype) if saved is None else saved[:size])
        self._next = start
        self._size = size
        self._oldest_starts_episode = bool(state["oldest_starts_episode"])
        self.rng.bit_generator.state = copy.deepcopy(state["rng"])
        if self._next_states is None:
            return
        if not in_full:
            self._next_states.load_state_dict(state["next_states"], size)
            return
        self._next_states.clear()
        rows = self._storage_indices(np.arange(size))
        compared = self._next_states.compared
        self._next_states.link(
            rows, {name: data[name][rows] if name in data else self._read(name, rows) for name in compared}
        )
