"""The episode in progress in every row of the batches an agent acts on (a row is one parallel environment).

``Episodes`` keeps, per row, whether a new episode starts at the next ``act``, the return and length so far, and
for a learning agent the recurrent state of its policy, the open step and the steps staged for the memory:

- A transition (s, internals, a, r, terminal, s') is complete once s' is known: at once for a terminal row, or at
  the next ``act`` otherwise. ``OpenSteps`` holds each row's open transition until then.
- ``Segments`` stages completed transitions per row, so that on-policy agents write contiguous segments (whole
  episodes, or the steps since the last update, cut with terminal 2) into their memory.

``Episodes`` never writes to a memory itself: its methods return the batches that are ready to be stored, and the
agent stores them. Its ``state_dict()`` is the per-row part of an agent's checkpoint.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from torchforce.agents.batches import Batch
from torchforce.core.memories import FieldSpec


def _allocate(fields: dict[str, FieldSpec], lead: tuple[int, ...]) -> Batch:
    return {name: np.zeros(lead + tuple(field.shape), dtype=field.dtype) for name, field in fields.items()}


class OpenSteps:
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

    def flush_all(self) -> list[Batch]:
        """Every row's staged transitions, each cut where it stands (terminal 2 unless it ended an episode)."""
        segments = (self.flush(row, cut=True) for row in range(len(self.lengths)))
        return [segment for segment in segments if segment is not None]

    def state_dict(self) -> dict[str, Any]:
        return {"buffer": {name: values.copy() for name, values in self.buffer.items()}, "lengths": self.lengths.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.buffer = {name: np.array(values) for name, values in state["buffer"].items()}
        self.lengths = np.array(state["lengths"], dtype=np.int64)


class Episodes:
    """The episode in progress in each of ``num_rows`` rows. Without ``fields`` (agents that do not learn) it counts
    returns and lengths only; with the memory's ``fields`` it also keeps the policy's recurrent state per row
    (``internals``, of the network's per-row ``internal_shapes``), the open steps and, for an ``on_policy`` agent,
    the staged segments. ``completed`` counts the transitions and episodes completed so far (what the update
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
    ) -> None:
        self.fields, self.on_policy, self.episode_segments = fields, on_policy, episode_segments
        self.internal_shapes = dict(internal_shapes or {})
        self.device = device if device is not None else torch.device("cpu")
        self.num_rows = 0
        self.acted = False  # acted and not yet observed
        self.new_episode = np.zeros(0, dtype=bool)
        self.returns = np.zeros(0, dtype=np.float64)
        self.lengths = np.zeros(0, dtype=np.int64)
        self.internals: dict[str, torch.Tensor] = {}
        self.open: OpenSteps | None = None
        self.staged: Segments | None = None
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
        self.returns = np.zeros(rows, dtype=np.float64)
        self.lengths = np.zeros(rows, dtype=np.int64)
        if self.fields is None:  # not learning
            return []
        ready = self.staged.flush_all() if self.staged is not None else []
        self.open = OpenSteps(self.fields, rows)
        self.staged = Segments(self.fields, rows) if self.on_policy else None
        self.internals = self.initial_internals(rows)
        return ready

    def start_new(self) -> np.ndarray:
        """The rows whose new episode starts now, their recurrent state set to zeros."""
        rows = np.flatnonzero(self.new_episode)
        self.new_episode[rows] = False
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
        if self.open is None:
            return []
        self.open.waiting[:] = False
        return self.staged.flush_all() if self.staged is not None else []

    def count(self, reward: np.ndarray) -> None:
        """A step's ``reward`` in every row, into the episodes' returns and lengths."""
        self.returns += reward
        self.lengths += 1

    def finish(self, ended: np.ndarray) -> list[tuple[float, int]]:
        """The rows that ``ended`` their episode start a new one at the next ``act``. Returns the (return, length)
        of every finished episode, in row order."""
        rows = np.flatnonzero(ended)
        finished = [(self.returns[row], self.lengths[row]) for row in rows]
        self.new_episode[rows] = True
        self.returns[rows] = 0.0
        self.lengths[rows] = 0
        return finished

    # ------------------------------------------------------------------ transitions

    def _open(self) -> OpenSteps:
        """The open steps: a learning agent has them once it has acted (``resize``)."""
        if self.open is None:
            raise RuntimeError("no open steps: this agent does not learn, or has not acted yet")
        return self.open

    def _staged(self) -> Segments:
        """The staged segments: an on-policy learning agent has them once it has acted (``resize``)."""
        if self.staged is None:
            raise RuntimeError("no staged segments: this agent is not an on-policy learner, or has not acted yet")
        return self.staged

    def record(self, states: Batch, internals: dict[str, torch.Tensor], actions: dict[str, np.ndarray]) -> None:
        """The step just acted in every row: the (preprocessed) states, the recurrent state acted from, actions."""
        record = self._open().record
        for name, values in states.items():
            record[f"states/{name}"][:] = values
        for name, tensor in internals.items():
            record[f"internals/{name}"][:] = tensor.detach().cpu().numpy()
        for name, values in actions.items():
            record[f"actions/{name}"][:] = values

    def observe(self, terminal: np.ndarray, reward: np.ndarray) -> None:
        """What followed the open steps: their (preprocessed) ``reward`` and ``terminal``."""
        record = self._open().record
        record["reward"][:] = reward
        record["terminal"][:] = terminal

    def acted_states(self, rows: np.ndarray, names: Any) -> Batch:
        """The states ``rows`` acted on in their open step (the next states of steps that ended an episode)."""
        record = self._open().record
        return {name: record[f"states/{name}"][rows] for name in names}

    def wait_for_next_states(self, rows: np.ndarray) -> None:
        """The open steps of ``rows`` (a mask) are complete once the next ``act`` brings their next states."""
        self._open().waiting[:] = rows

    def waiting(self) -> bool:
        """Whether some row's open step waits for its next state (the next ``act``'s)."""
        return self.open is not None and bool(self.open.waiting.any())

    def complete_waiting(self, states: Batch) -> list[Batch]:
        """The next ``act``'s ``states`` complete the steps that waited for them. Returns what is ready to store."""
        open_steps = self._open()
        waiting = open_steps.waiting
        if waiting.all():
            ready = self.complete(None, states)
        else:
            selected = np.flatnonzero(waiting)
            ready = self.complete(selected, {name: values[selected] for name, values in states.items()})
        open_steps.waiting[:] = False
        return ready

    def complete(self, rows: np.ndarray | None, next_states: Batch) -> list[Batch]:
        """The open steps of ``rows`` (None: all) are complete with ``next_states``. Off-policy: they are ready to
        store. On-policy: they are staged per row, and an ended episode is ready if ``episode_segments``."""
        batch = self._open().take(rows, next_states)
        self.completed["timesteps"] += self.num_rows if rows is None else len(rows)
        if not self.on_policy:
            self.completed["episodes"] += int(np.count_nonzero(batch["terminal"]))
            return [batch]
        indices = np.arange(self.num_rows) if rows is None else rows
        staged = self._staged()
        staged.append(batch, indices)
        ready = []
        for row in indices[batch["terminal"] != 0]:
            self.completed["episodes"] += 1
            if self.episode_segments and (segment := staged.flush(int(row))) is not None:  # never None: just staged
                ready.append(segment)
        return ready

    def flush(self) -> list[Batch]:
        """Every row's staged segment, cut (terminal 2): on-policy updates on timesteps read them."""
        return [] if self.staged is None else self.staged.flush_all()

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
            state["open"] = None if self.open is None else self.open.state_dict()
            state["segments"] = None if self.staged is None else self.staged.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put ``state`` (of ``state_dict``) in place. Whatever was open or staged is dropped (not ready for the
        memory, which a checkpoint replaces), also when the checkpoint has no rows yet."""
        rows = state["rows"]
        self.acted = False
        self.num_rows = 0
        self.open, self.staged, self.internals = None, None, {}
        if rows["num_rows"]:
            self.resize(int(rows["num_rows"]))
        self.acted = bool(rows["acted"])
        self.new_episode = np.array(rows["new_episode"], dtype=bool)
        self.returns = np.array(rows["returns"], dtype=np.float64)
        self.lengths = np.array(rows.get("lengths", np.zeros(len(self.returns))), dtype=np.int64)
        if not self.learning:
            return
        self.completed = dict(state["completed"])
        self.internals = {name: torch.as_tensor(value).to(self.device) for name, value in state["internals"].items()}
        if state["open"] is not None:
            self._open().load_state_dict(state["open"])
        if state["segments"] is not None:
            self._staged().load_state_dict(state["segments"])
