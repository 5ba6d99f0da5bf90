"""The episode in progress in every row of the batches an agent acts on (a row is one parallel environment).

``Episodes`` keeps, per row, whether a new episode starts at the next ``act``, the return and length so far, and
for a learning agent the recurrent state of its policy and the transitions not yet in the memory, in ``Staging``:

- A transition (s, internals, a, r, terminal, s', next internals) is complete once s' is known: at once for a
  terminal row, or at the next ``act`` otherwise (the next internals, the recurrent state acting left, are known at
  once).
- ``Staging`` holds the transitions of every row in one time-major buffer ``[slot, row]``: each ``act`` writes the
  step of all rows into one slot, ``observe`` its rewards and terminals, and the next ``act`` its next states, one
  slice per field. Off-policy agents store each transition as it completes and reuse the slot; on-policy agents keep
  them, so that every row's transitions since its last write form a contiguous segment (a whole episode, or the
  steps since the last update, cut with terminal 2) for their memory.

``Episodes`` never writes to a memory itself: its methods return the batches that are ready to be stored, and the
agent stores them. Its ``state_dict()`` is the per-row part of an agent's checkpoint.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from torchforce.agents.batches import Batch
from torchforce.core.memories import FieldSpec
from torchforce.core.memories.base import ranges

SLOTS = 64  # the slots an on-policy staging starts with; it doubles when a row's segment needs more


def _allocate(fields: dict[str, FieldSpec], lead: tuple[int, ...]) -> Batch:
    return {name: np.zeros(lead + tuple(field.shape), dtype=field.dtype) for name, field in fields.items()}


class Staging:
    """The transitions of ``num_rows`` rows in a time-major buffer ``{field: [slots, rows, *shape]}``.

    ``step`` is the slot of the last ``act``: its states, recurrent state and actions are written there for every
    row, then its rewards and terminals. A row whose episode ended gets its next state at once (its own state, or
    for a truncation the final state; ``end``), the others wait for the next ``act``'s states (``complete_waiting``).

    With ``keep`` (on-policy agents), every ``act`` takes the next slot, and row r's transitions not yet flushed lie
    in the slots ``first[r]`` up to ``step``, the slot ``step`` included once that row's step there is complete
    (``closed``); full slots move back to the start as flushing frees them, and the buffer doubles when a segment
    needs more. ``flush`` hands out every row's segment, ``flush_row`` one row's. Without ``keep`` there is one slot,
    and the completed transitions are returned at once, for the memory.

    Checkpoints hold this state in the row-major form of format 1 (``open``: the step of the last act and which rows
    wait; ``segments``: each row's staged transitions, ``[rows, length]``): see ``state_dict``.
    """

    def __init__(self, fields: dict[str, FieldSpec], num_rows: int, *, keep: bool) -> None:
        self.fields, self.num_rows, self.keep = fields, num_rows, keep
        self.state_names = [name[len("states/") :] for name in fields if name.startswith("states/")]
        self.buffer = _allocate(fields, (SLOTS if keep else 1, num_rows))
        self.step = -1 if keep else 0  # the first act takes slot 0
        self.first = np.zeros(num_rows, dtype=np.int64)
        self.closed = np.zeros(num_rows, dtype=bool)
        self.waiting = np.zeros(num_rows, dtype=bool)  # acted and observed, waiting for the next state
        self.waiting_rows = 0
        # a checkpoint's own form, until the next record, observe, complete_waiting, flush or drop_open changes it
        self.restored: tuple[dict, dict | None] | None = None

    # ------------------------------------------------------------------ a step

    def record(
        self,
        states: Batch,
        internals: dict[str, torch.Tensor],
        following: dict[str, torch.Tensor],
        actions: dict[str, np.ndarray],
        acted: Batch,
    ) -> None:
        """The step just acted in every row: the (preprocessed) states, the recurrent state acted from and the one
        acting left (``following``: what the next state's values start from), actions, and what acting computed
        that updates may reuse (``acted/<name>`` fields; see ``LearningAgent._acted``)."""
        self.restored = None
        if self.keep:
            self._advance()
        buffer, step = self.buffer, self.step
        for name, values in states.items():
            buffer[f"states/{name}"][step] = values
        for name, tensor in internals.items():
            buffer[f"internals/{name}"][step] = tensor.detach().cpu().numpy()
        for name, tensor in following.items():
            buffer[f"next_internals/{name}"][step] = tensor.detach().cpu().numpy()
        for name, values in actions.items():
            buffer[f"actions/{name}"][step] = values
        for name, values in acted.items():
            buffer[f"acted/{name}"][step] = values

    def _advance(self) -> None:
        """Take the next slot, making room when the buffer is full: the slots before the oldest staged transition
        move back to the start, or, if a row still stages from slot 0, the buffer doubles."""
        step = self.step + 1
        slots = len(self.buffer["terminal"])
        if step == slots:
            start = min(int(self.first.min()), step)
            for name, values in self.buffer.items():
                if start:
                    values[: slots - start] = values[start:]
                else:
                    grown = np.zeros((2 * slots, *values.shape[1:]), dtype=values.dtype)
                    grown[:slots] = values
                    self.buffer[name] = grown
            self.first -= start
            step -= start
        self.step = step
        self.closed[:] = False

    def observe(self, terminal: np.ndarray, reward: np.ndarray) -> None:
        """What followed the step in every row: its (preprocessed) ``reward`` and ``terminal``."""
        self.restored = None
        self.buffer["reward"][self.step] = reward
        self.buffer["terminal"][self.step] = terminal

    def end(self, rows: np.ndarray, truncated: np.ndarray, finals: Batch | None) -> list[Batch]:
        """The steps of ``rows`` (indices), whose episodes ended, are complete: their next states are the states they
        acted on, or for the ``truncated`` rows among them ``finals`` (one row each, preprocessed) when given. The
        other rows wait for the next ``act``. Returns what is ready for the memory (without ``keep``: these
        transitions)."""
        self.waiting[:] = True
        self.waiting_rows = self.num_rows - len(rows)
        if not len(rows):
            return []
        self.waiting[rows] = False
        buffer, step = self.buffer, self.step
        for name in self.state_names:
            following = buffer[f"next_states/{name}"][step]
            following[rows] = buffer[f"states/{name}"][step, rows]
            if finals is not None:
                following[truncated] = finals[name]
        if not self.keep:
            return [{name: values[step, rows] for name, values in buffer.items()}]
        self.closed[rows] = True
        return []

    def complete_waiting(self, states: Batch) -> list[Batch]:
        """The next ``act``'s (preprocessed) ``states`` complete the steps that wait for them. Returns what is ready
        for the memory (without ``keep``: these transitions)."""
        self.restored = None
        step, waiting = self.step, self.waiting
        everyone = self.waiting_rows == self.num_rows
        self.waiting_rows = 0
        if not self.keep:
            rows = slice(None) if everyone else np.flatnonzero(waiting)
            waiting[:] = False
            batch = {name: values[step, rows] for name, values in self.buffer.items()}
            for name, values in states.items():
                batch[f"next_states/{name}"] = values if everyone else values[rows]
            return [batch]
        for name, values in states.items():
            following = self.buffer[f"next_states/{name}"][step]
            if everyone:
                following[...] = values
            else:  # one pass, row by row as the mask says
                np.copyto(following, values, where=waiting.reshape(-1, *(1,) * (values.ndim - 1)))
        waiting[:] = False
        self.closed[:] = True  # every row's step is complete now (or was flushed or dropped: first > step)
        return []

    def drop_open(self) -> None:
        """The open steps will never complete (``reset``): a row's next transition starts a new segment."""
        self.restored = None
        self.waiting[:] = False
        self.waiting_rows = 0
        self.first[:] = self.step + 1
        self.closed[:] = False

    # ------------------------------------------------------------------ segments (keep)

    def _lengths(self) -> np.ndarray:
        return np.maximum(self.step + self.closed - self.first, 0)

    def flush(self, capacity: int | None = None) -> list[Batch]:
        """Every row's staged transitions, each cut where it stands (its last terminal 2 unless it ended an
        episode), row after row: as one batch, or one batch per row when they total more than ``capacity`` rows
        (storing a batch is storing its rows in order, so a memory gets the same either way)."""
        self.restored = None
        lengths = self._lengths()
        rows = np.flatnonzero(lengths)
        if not len(rows):
            return []
        counts = lengths[rows]
        slots, columns = ranges(self.first[rows], counts), np.repeat(rows, counts)
        batch = {name: values[slots, columns] for name, values in self.buffer.items()}
        ends = np.cumsum(counts)
        last = batch["terminal"][ends - 1]
        batch["terminal"][ends[last == 0] - 1] = 2
        self.first += lengths
        if capacity is None or ends[-1] <= capacity:
            return [batch]
        bounds = zip((ends - counts).tolist(), ends.tolist(), strict=True)
        return [{name: values[start:end] for name, values in batch.items()} for start, end in bounds]

    def flush_row(self, row: int) -> Batch | None:
        """The staged transitions of ``row`` as one segment (None if there are none)."""
        first, end = int(self.first[row]), self.step + int(self.closed[row])
        if end <= first:
            return None
        self.first[row] = end
        return {name: values[first:end, row].copy() for name, values in self.buffer.items()}

    # ------------------------------------------------------------------ state

    def state_dict(self) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The ``open`` and ``segments`` states of a checkpoint (format 1; ``segments`` None without ``keep``): the
        step of the last act in every row with ``waiting``, and every row's staged transitions (``buffer``
        ``[rows, length]``, ``lengths``). Restored and not changed since, it is the state that was read (a
        checkpoint of older code also holds whatever lay beyond each row's length)."""
        if self.restored is not None:
            return _copied(self.restored)
        step = max(self.step, 0)
        record = {
            name: values[step].copy() for name, values in self.buffer.items() if not name.startswith("next_states/")
        }
        open_state = {"record": record, "waiting": self.waiting.copy()}
        if not self.keep:
            return open_state, None
        lengths = self._lengths()
        buffer = _allocate(self.fields, (self.num_rows, max(int(lengths.max()), 1)))
        for row, (first, length) in enumerate(zip(self.first.tolist(), lengths.tolist(), strict=True)):
            for name, values in buffer.items():
                values[row, :length] = self.buffer[name][first : first + length, row]
        return open_state, {"buffer": buffer, "lengths": lengths}

    def load_state_dict(self, open_state: dict[str, Any], segments: dict[str, Any] | None, *, acted: bool) -> None:
        """Put a checkpoint's ``open`` and ``segments`` (of ``state_dict``) in place. A row's staged transitions end
        just before the slot of the last act, or with it when that step is complete (observed, and not waiting:
        its episode ended there, or it was dropped)."""
        restored = _copied((open_state, segments))
        open_state, segments = restored
        waiting = np.asarray(open_state["waiting"], dtype=bool)
        lengths = np.zeros(self.num_rows, dtype=np.int64) if segments is None else segments["lengths"]
        closed = ~waiting & (not acted)
        step = max(int((lengths - closed).max()), 0)
        while len(self.buffer["terminal"]) <= step:
            self.buffer = _allocate(self.fields, (2 * len(self.buffer["terminal"]), self.num_rows))
        self.step, self.closed, self.waiting = step, closed, waiting.copy()
        self.waiting_rows = int(np.count_nonzero(waiting))
        self.first = step + closed - lengths.astype(np.int64)
        for name, field in self.fields.items():  # optional fields a checkpoint lacks: zeros, not what was here
            if field.optional and name not in open_state["record"]:
                self.buffer[name][:] = 0
        for name, values in open_state["record"].items():
            self.buffer[name][step] = values
        if segments is not None:
            for row, (first, length) in enumerate(zip(self.first.tolist(), lengths.tolist(), strict=True)):
                for name, values in segments["buffer"].items():
                    self.buffer[name][first : first + length, row] = values[row, :length]
        for name, field in self.fields.items():  # and those with a fallback: a copy of it (FieldSpec)
            if field.fallback is not None and name not in open_state["record"]:
                self.buffer[name][...] = self.buffer[field.fallback]
        self.restored = restored


def _copied(state: Any) -> Any:
    """A copy of a (nested) state of arrays, so that what is handed out and what is kept do not share memory."""
    if isinstance(state, dict):
        return {key: _copied(value) for key, value in state.items()}
    if isinstance(state, tuple):
        return tuple(_copied(value) for value in state)
    return None if state is None else np.array(state)


class Episodes:
    """The episode in progress in each of ``num_rows`` rows. Without ``fields`` (agents that do not learn) it counts
    returns and lengths only; with the memory's ``fields`` it also keeps the policy's recurrent state per row
    (``internals``, of the network's per-row ``internal_shapes``) and the transitions not yet stored (``staging``;
    an ``on_policy`` agent's stay there until they are written as segments, in batches of at most the memory's
    ``capacity`` rows). ``completed`` counts the transitions and episodes completed so far (what the update
    schedule counts). ``episode_segments``: an on-policy agent's finished episodes are ready for the memory as soon
    as they end (``update_mode.unit`` episodes)."""

    def __init__(
        self,
        fields: dict[str, FieldSpec] | None = None,
        *,
        on_policy: bool = False,
        episode_segments: bool = False,
        internal_shapes: dict[str, tuple[int, ...]] | None = None,
        device: torch.device | None = None,
        capacity: int | None = None,
    ) -> None:
        self.fields, self.on_policy, self.episode_segments = fields, on_policy, episode_segments
        self.internal_shapes = dict(internal_shapes or {})
        self.device = device if device is not None else torch.device("cpu")
        self.capacity = capacity
        self.num_rows = 0
        self.acted = False  # acted and not yet observed
        self.new_episode = np.zeros(0, dtype=bool)
        self.starting = False  # some row starts a new episode at the next act (new_episode.any())
        self.returns = np.zeros(0, dtype=np.float64)
        self.lengths = np.zeros(0, dtype=np.int64)
        self.internals: dict[str, torch.Tensor] = {}
        self.staging: Staging | None = None
        self.completed = {"timesteps": 0, "episodes": 0}

    @property
    def learning(self) -> bool:
        return self.fields is not None

    def initial_internals(self, rows: int) -> dict[str, torch.Tensor]:
        """Zero recurrent state for ``rows`` rows (as ``Network.initial_internals``)."""
        return {name: torch.zeros((rows, *shape), device=self.device) for name, shape in self.internal_shapes.items()}

    # ------------------------------------------------------------------ rows and episodes

    def resize(self, rows: int) -> list[Batch]:
        """A new number of rows: every row starts a new episode. Returns the segments staged so far, cut."""
        if self.acted:
            raise RuntimeError(f"act() got {rows} rows but the last act() had {self.num_rows} and was not observed.")
        self.num_rows = rows
        self.new_episode = np.ones(rows, dtype=bool)
        self.starting = rows > 0
        self.returns = np.zeros(rows, dtype=np.float64)
        self.lengths = np.zeros(rows, dtype=np.int64)
        if self.fields is None:  # not learning
            return []
        ready = self.flush()
        self.staging = Staging(self.fields, rows, keep=self.on_policy)
        self.internals = self.initial_internals(rows)
        return ready

    def start_new(self) -> np.ndarray:
        """The rows whose new episode starts now, their recurrent state set to zeros."""
        rows = np.flatnonzero(self.new_episode)
        self.new_episode[:] = False
        self.starting = False
        for name, value in self.internals.items():
            value = value.clone()  # tensors made under inference_mode cannot be changed in place
            value[torch.as_tensor(rows)] = 0.0
            self.internals[name] = value
        return rows

    def end_all(self) -> list[Batch]:
        """``reset()``: every row starts a new episode at the next ``act``; the open steps are dropped (their next
        states never came). Returns the staged segments, cut."""
        self.acted = False
        if not self.num_rows:
            return []
        self.new_episode[:] = True
        self.starting = True
        if self.staging is None:
            return []
        ready = self.flush()
        self.staging.drop_open()
        return ready

    def count(self, reward: np.ndarray) -> None:
        """A step's ``reward`` in every row, into the episodes' returns and lengths."""
        self.returns += reward
        self.lengths += 1

    def finish(self, rows: np.ndarray) -> list[tuple[float, int]]:
        """The ``rows`` (indices) that ended their episode start a new one at the next ``act``. Returns the
        (return, length) of every finished episode, in row order."""
        if not len(rows):
            return []
        finished = [(self.returns[row], self.lengths[row]) for row in rows]
        self.new_episode[rows] = True
        self.starting = True
        self.returns[rows] = 0.0
        self.lengths[rows] = 0
        return finished

    # ------------------------------------------------------------------ transitions

    def _staging(self) -> Staging:
        """The staging: a learning agent has it once it has acted (``resize``)."""
        if self.staging is None:
            raise RuntimeError("no staged transitions: this agent does not learn, or has not acted yet")
        return self.staging

    def record(
        self,
        states: Batch,
        internals: dict[str, torch.Tensor],
        following: dict[str, torch.Tensor],
        actions: dict[str, np.ndarray],
        acted: Batch,
    ) -> None:
        """The step just acted in every row: see ``Staging.record``."""
        self._staging().record(states, internals, following, actions, acted)

    def observe(self, terminal: np.ndarray, reward: np.ndarray) -> None:
        """What followed the step in every row: its (preprocessed) ``reward`` and ``terminal``."""
        self._staging().observe(terminal, reward)

    def end(self, rows: np.ndarray, truncated: np.ndarray, finals: Batch | None) -> list[Batch]:
        """The steps of ``rows``, whose episodes ended, are complete (``Staging.end``); the other rows wait for
        the next ``act``'s states. Returns what is ready to store: the completed transitions (off-policy), or the
        finished episodes (on-policy with ``episode_segments``)."""
        staging = self._staging()
        ready = staging.end(rows, truncated, finals)
        self.completed["timesteps"] += len(rows)
        self.completed["episodes"] += len(rows)
        if self.on_policy and self.episode_segments:
            segments = (staging.flush_row(row) for row in rows.tolist())  # never None: just completed
            ready += [segment for segment in segments if segment is not None]
        return ready

    def waiting(self) -> bool:
        """Whether some row's step waits for its next state (the next ``act``'s)."""
        return self.staging is not None and self.staging.waiting_rows > 0

    def complete_waiting(self, states: Batch) -> list[Batch]:
        """The next ``act``'s ``states`` complete the steps that waited for them. Returns what is ready to store
        (off-policy: those transitions)."""
        staging = self._staging()
        self.completed["timesteps"] += staging.waiting_rows
        return staging.complete_waiting(states)

    def flush(self) -> list[Batch]:
        """Every row's staged segment, cut (terminal 2): on-policy updates on timesteps read them."""
        if self.staging is None or not self.on_policy:
            return []
        return self.staging.flush(self.capacity)

    # ------------------------------------------------------------------ state

    def state_dict(self) -> dict[str, Any]:
        """The per-row bookkeeping as checkpoints hold it (format 1: ``rows``, and for learning agents
        ``completed``, ``internals``, ``open`` and ``segments``)."""
        state: dict[str, Any] = {
            "rows": {
                "num_rows": self.num_rows,
                "acted": self.acted,
                "new_episode": self.new_episode.copy(),
                "returns": self.returns.copy(),
                "lengths": self.lengths.copy(),
            }
        }
        if self.learning:
            state["completed"] = dict(self.completed)
            state["internals"] = {name: value.cpu() for name, value in self.internals.items()}
            state["open"], state["segments"] = (None, None) if self.staging is None else self.staging.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put ``state`` (of ``state_dict``) in place. Whatever was open or staged is dropped (not ready for the
        memory, which a checkpoint replaces), also when the checkpoint has no rows yet."""
        rows = state["rows"]
        self.acted = False
        self.num_rows = 0
        self.staging, self.internals = None, {}
        if rows["num_rows"]:
            self.resize(int(rows["num_rows"]))
        self.acted = bool(rows["acted"])
        self.new_episode = np.array(rows["new_episode"], dtype=bool)
        self.starting = bool(self.new_episode.any())
        self.returns = np.array(rows["returns"], dtype=np.float64)
        self.lengths = np.array(rows.get("lengths", np.zeros(len(self.returns))), dtype=np.int64)
        if not self.learning:
            return
        self.completed = dict(state["completed"])
        self.internals = {name: torch.as_tensor(value).to(self.device) for name, value in state["internals"].items()}
        if state["open"] is not None:
            self._staging().load_state_dict(state["open"], state["segments"], acted=self.acted)
