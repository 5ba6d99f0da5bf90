"""VectorEnvironment: N copies of an environment stepped as one batch, in this process or in worker processes.

A copy whose episode ends (terminal 1 or 2) is reset at once: ``execute`` returns the new episode's first state in
``states`` for that row and the finished episode's last state in ``final_states`` (for the other rows
``final_states`` equals ``states``; when no copy ended, ``final_states`` is ``states``, the same object). Learners
bootstrap truncated rows (terminal 2) from ``final_states``.

Outputs are written into preallocated arrays, row by row (in subprocess mode: arrays in shared memory that each
worker fills with its rows, so only actions and short replies cross the pipes). With ``copy=True`` (the default)
the arrays handed out are copies the caller may keep; with ``copy=False`` they are the internal buffers themselves,
overwritten by the next ``reset``/``execute``, which suits a loop that consumes each step at once.

``mode="subprocess"`` runs the copies in worker processes (default ``min(N, number of CPUs)``), each stepping a
contiguous chunk of copies. Factories and environments travel to the workers with cloudpickle; workers start with
the ``spawn`` method (safe next to torch threads), so a script that builds a subprocess VectorEnvironment needs the
usual ``if __name__ == "__main__":`` guard. An error in a worker is raised here as ``VectorEnvironmentError`` with
the worker's traceback text (a SpecError keeps its type). ``close()`` stops and joins every worker it started.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from torchforce.environments.environment import Environment
from torchforce.environments.workers import (
    Rows,
    build_copies,
    serve_worker,
    shared_layout,
    shared_views,
    shutdown_workers,
)
from torchforce.spec import SpecError, expect_choice, expect_int, normalize_actions, normalize_states
from torchforce.spec.errors import what_it_is


class VectorStep(NamedTuple):
    """One step of N copies: ``states``/``final_states`` are arrays [N, ...] (or dicts of them, by state name),
    ``terminal`` int8 [N] (0, 1, 2) and ``reward`` float32 [N]. ``goes_on``: bool [N], True for the rows whose
    episode ended as a part of a game that goes on (``Environment.game_goes_on``: an Atari life lost with
    ``episodic_life``); None when no row's did."""

    states: Any
    terminal: np.ndarray
    reward: np.ndarray
    final_states: Any
    goes_on: np.ndarray | None = None


class VectorEnvironmentError(RuntimeError):
    """An environment failed inside a worker process; the message carries the worker's traceback."""


class VectorEnvironment:
    """N copies of an environment stepped as one batch.

    Args:
        environments: the copies, already built (sync mode; in subprocess mode they are pickled to the workers).
        factory: a no-argument callable building one copy (give ``num_environments``); in subprocess mode it is
            sent to the workers with cloudpickle, so lambdas and closures work.
        num_environments: how many copies ``factory`` builds.
        mode: ``"sync"`` (step them one after another in this process) or ``"subprocess"``.
        num_workers: worker processes in subprocess mode (default ``min(N, number of CPUs)``).
        copy: hand out copies of the output arrays (True) or the internal buffers (False).

    ``environments`` (the attribute) lists the copies in sync mode; in subprocess mode they live in the workers.
    """

    def __init__(
        self,
        environments: Sequence[Environment] | None = None,
        *,
        factory: Callable[[], Environment] | None = None,
        num_environments: int | None = None,
        mode: str = "sync",
        num_workers: int | None = None,
        copy: bool = True,
    ) -> None:
        self.mode = expect_choice(mode, "mode", ("sync", "subprocess"))
        if (environments is None) == (factory is None):
            raise SpecError("", "give either environments or factory (with num_environments)")
        if environments is not None:
            environments = list(environments)
            if not environments:
                raise SpecError("environments", "needs at least one environment")
            if num_environments is not None and num_environments != len(environments):
                raise SpecError("num_environments", "does not match the environments given", got=num_environments)
            num_environments = len(environments)
        num_environments = expect_int(num_environments, "num_environments", minimum=1)
        self._n = num_environments
        self.copy = copy
        self._closed = False
        self._out_of_step: str | None = None  # why the workers' replies no longer match the commands (see _gather)
        self._processes: list[Any] = []
        self._connections: list[Any] = []
        self._chunks: list[tuple[int, int]] = []
        self._memory: list[Any] = []
        if self.mode == "sync":
            if environments is None:
                assert factory is not None  # one of the two is given, checked above
                environments = build_copies(factory, num_environments)
            self._rows: Rows | None = Rows(environments)
            self.environments = self._rows.environments
            state_spec, action_spec = self._rows.state_spec, self._rows.action_spec
        else:
            self._rows = None
            self.environments = []
            state_spec, action_spec = self._start_workers(environments, factory, num_workers)
        self._state_spec, self._action_spec = state_spec, action_spec
        self._state_specs, self._single_state = normalize_states(state_spec)
        self._action_specs, self._single_action = normalize_actions(action_spec)
        if self._rows is None:
            self._share_buffers()
        else:
            self._states, self._final = self._rows.states, self._rows.final_states
            self._terminal, self._reward = self._rows.terminal, self._rows.reward

    # ------------------------------------------------------------------------------------------------- workers

    def _start_workers(
        self, environments: list[Environment] | None, factory: Callable[[], Environment] | None, num_workers: int | None
    ) -> tuple[Any, Any]:
        import cloudpickle

        n = self._n
        workers = expect_int(num_workers, "num_workers", minimum=1, allow_none=True)
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        workers = min(n, workers or cpus or 1)
        bounds = np.linspace(0, n, workers + 1).round().astype(int)
        self._chunks = [(int(lo), int(hi)) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
        context = multiprocessing.get_context("spawn")
        self._finalizer = weakref.finalize(self, shutdown_workers, self._processes, self._connections, self._memory)
        for lo, hi in self._chunks:
            chunk = None if environments is None else environments[lo:hi]
            try:
                payload = cloudpickle.dumps((factory, hi - lo, chunk))
            except Exception as error:  # noqa: BLE001 - whatever pickling raises, say what to do instead
                self.close()
                raise SpecError(
                    "environments" if chunk is not None else "factory",
                    f"cannot be sent to a worker process: {error}",
                    hint="Pass a factory that builds the environment inside the worker (make_vector does this).",
                ) from None
            parent, child = context.Pipe()
            process = context.Process(target=serve_worker, args=(child, payload), daemon=True, name=f"env-worker-{lo}")
            process.start()
            child.close()
            self._processes.append(process)
            self._connections.append(parent)
        try:
            specs = self._gather()
        except BaseException:
            self.close()
            raise
        first = [normalize_states(specs[0][0])[0], normalize_actions(specs[0][1])[0]]
        for index, (states, actions) in enumerate(specs[1:], 1):  # as Rows checks the copies of one worker
            if [normalize_states(states)[0], normalize_actions(actions)[0]] != first:
                self.close()
                lo = self._chunks[index][0]
                raise SpecError(
                    f"environments[{lo}]",
                    f"has other states/actions than environments[0]: {states}, {actions} against {specs[0][0]}, "
                    f"{specs[0][1]}",
                )
        return specs[0]

    def _share_buffers(self) -> None:
        """Put the output arrays in shared memory that every worker writes its rows into."""
        from multiprocessing.shared_memory import SharedMemory

        layout, size = shared_layout(self._state_specs, self._n)
        try:
            self._memory.append(SharedMemory(create=True, size=size))
            views = shared_views(self._memory[0].buf, layout)
            self._command("attach", [(self._memory[0].name, layout, lo, hi) for lo, hi in self._chunks])
        except BaseException:
            self.close()
            raise
        self._states = {name: views[f"states/{name}"] for name in self._state_specs}
        self._final = {name: views[f"final/{name}"] for name in self._state_specs}
        self._terminal, self._reward = views["terminal"], views["reward"]

    def _send(self, messages: Mapping[int, Any]) -> list[int]:
        """Each worker its message; returns the workers whose pipe is broken (the process died), which got none."""
        if self._out_of_step is not None:
            raise VectorEnvironmentError(f"{self}: {self._out_of_step}; close it and build a new one")
        dead = []
        for index, message in messages.items():
            try:
                self._connections[index].send(message)
            except OSError:  # BrokenPipeError, ConnectionResetError: nobody reads that pipe any more
                dead.append(index)
        return dead

    def _gather(self, workers: Sequence[int] | None = None, dead: Sequence[int] = ()) -> list[Any]:
        """One reply from each worker asked (all by default, in order; ``dead`` ones, which could not be sent their
        message, fail without one); the first failure is raised after all have answered, so that no reply is left
        in a pipe for the next command to read."""
        replies: list[Any] = []
        failure: Exception | None = None
        for index in range(len(self._connections)) if workers is None else workers:
            connection, (lo, hi) = self._connections[index], self._chunks[index]
            try:
                if index in dead:
                    raise EOFError
                status, data = connection.recv()
            except BaseException as error:
                if not isinstance(error, (EOFError, OSError)):  # a Ctrl-C while waiting: replies left unread
                    self._out_of_step = f"interrupted ({type(error).__name__}) while its workers answered a command"
                    raise
                process = self._processes[index]
                process.join(timeout=1.0)
                status, data = "error", f"the worker process exited unexpectedly (exit code {process.exitcode})"
            if status == "spec_error" and failure is None:
                path, message, expected, hint, file = data
                failure = SpecError(path, message, expected=expected, hint=hint, file=file)
            elif status == "error" and failure is None:
                failure = VectorEnvironmentError(f"environment worker {index} (copies {lo}..{hi - 1}) failed:\n{data}")
            replies.append(data)
        if failure is not None:
            raise failure
        return replies

    def _command(self, command: str, data: Sequence[Any] | None = None) -> list[Any]:
        if self._closed:
            raise RuntimeError("this VectorEnvironment is closed")
        messages = {index: (command, None if data is None else data[index]) for index in range(len(self._connections))}
        return self._gather(dead=self._send(messages))

    # ------------------------------------------------------------------------------------------------- the API

    @property
    def num_environments(self) -> int:
        return self._n

    def __len__(self) -> int:
        return self._n

    @property
    def states(self) -> dict[str, Any]:
        """The states spec of one copy."""
        return self._state_spec

    @property
    def actions(self) -> dict[str, Any]:
        """The actions spec of one copy."""
        return self._action_spec

    def __str__(self) -> str:
        return f"VectorEnvironment({self._n}, mode={self.mode})"

    def _out(self, buffers: dict[str, np.ndarray]) -> Any:
        if self._single_state:
            return buffers["state"].copy() if self.copy else buffers["state"]
        return {name: buffer.copy() for name, buffer in buffers.items()} if self.copy else dict(buffers)

    def reset(self) -> Any:
        """Reset every copy; the first states as an array [N, ...] (or a dict of them)."""
        if self._rows is not None:
            self._rows.reset()
        else:
            self._command("reset")
        return self._out(self._states)

    def reset_rows(self, rows: Sequence[int] | np.ndarray) -> Any:
        """Reset only the copies in ``rows`` (e.g. those cut by a step limit); their new first states, one row each
        in the order given. The other copies carry on, and their rows in the state buffers are left as they were."""
        indices = np.asarray(rows, dtype=np.int64).reshape(-1)
        if len(indices) and (indices.min() < 0 or indices.max() >= self._n):
            raise IndexError(f"{self}: rows must lie in 0..{self._n - 1}, got {indices.tolist()}")
        if self._rows is not None:
            self._rows.reset(indices.tolist())
        else:
            chunks = [[int(row) - lo for row in indices if lo <= row < hi] for lo, hi in self._chunks]
            active = [index for index, chunk in enumerate(chunks) if chunk]
            dead = self._send({index: ("reset", chunks[index]) for index in active})
            self._gather(active, dead)
        if self._single_state:
            return self._states["state"][indices].copy()
        return {name: buffer[indices].copy() for name, buffer in self._states.items()}

    def _batch_actions(self, actions: Any) -> Any:
        try:
            if self._single_action:
                if isinstance(actions, Mapping) and set(actions) == {"action"}:
                    actions = actions["action"]
                batch = np.asarray(actions)
                if batch.shape[:1] != (self._n,):
                    raise ValueError(f"expected {self._n} rows, got shape {batch.shape}")
                return batch
            batches = {name: np.asarray(actions[name]) for name in self._action_specs}
            for name, value in batches.items():
                if value.shape[:1] != (self._n,):
                    raise ValueError(f"action '{name}': expected {self._n} rows, got shape {value.shape}")
            return batches
        except (KeyError, TypeError, ValueError, IndexError) as error:
            form = (
                "an array [N, ...]" if self._single_action else f"a dict of arrays [N, ...] {list(self._action_specs)}"
            )
            raise ValueError(f"{self}: actions must be {form}: {error}") from None

    def execute(self, actions: Any) -> VectorStep:
        """Step every copy with its row of ``actions``; finished copies are reset (see the module doc)."""
        batch = self._batch_actions(actions)
        if self._rows is not None:
            replies = [self._rows.execute(batch)]
        else:
            if self._single_action:
                chunks = [batch[lo:hi] for lo, hi in self._chunks]
            else:
                chunks = [{name: value[lo:hi] for name, value in batch.items()} for lo, hi in self._chunks]
            replies = self._command("execute", chunks)  # the workers write their rows into the shared arrays
        ended = replies.count(None) < len(replies)  # some worker's copy ended (a hot path: no generator)
        goes_on = None
        if ended:
            for reply, (lo, hi) in zip(replies, self._chunks or [(0, self._n)], strict=True):
                if reply is None:  # that worker left its final rows as they were
                    for name, buffer in self._final.items():
                        buffer[lo:hi] = self._states[name][lo:hi]
                elif reply:
                    if goes_on is None:
                        goes_on = np.zeros(self._n, dtype=bool)
                    goes_on[np.asarray(reply) + lo] = True
        if self.copy:
            terminal, reward = self._terminal.copy(), self._reward.copy()
        else:
            terminal, reward = self._terminal, self._reward
        states = self._out(self._states)
        return VectorStep(states, terminal, reward, self._out(self._final) if ended else states, goes_on)

    def seed(self, seed: int | None) -> list[int | None]:
        """Seed copy i with ``seed + i`` (all None for None), from each copy's next reset on."""
        seeds = [None if seed is None else seed + i for i in range(self._n)]
        if self._rows is not None:
            return self._rows.seed(seeds)
        results = self._command("seed", [seeds[lo:hi] for lo, hi in self._chunks])
        return [value for chunk in results for value in chunk]

    def get_state(self) -> list[bytes] | None:
        """Every copy pickled as it is now (cloudpickle; one blob per worker, one in all in sync mode), for exact
        pause and resume; None when some copy would not go on with its episode from a pickle (``resumable``: a
        Gymnasium environment that pickling builds again, of a kind whose simulator cannot be restored), so that a
        run resumes with new episodes. Raises whatever pickling raises for environments that cannot be pickled.

        The blobs are pickles (a Gymnasium environment can only be saved whole), so ``set_state`` runs whatever they
        hold: store them apart from plain data and give ``set_state`` only blobs you trust (the client's
        checkpoints keep them in ``environments.pkl``, signed, and load them only when trusted)."""
        blobs = [self._rows.get_state()] if self._rows is not None else self._command("get_state")
        kept = [blob for blob in blobs if blob is not None]
        return kept if len(kept) == len(blobs) else None

    def set_state(self, blobs: list[bytes]) -> None:
        """Replace every copy with the pickled ones of ``get_state`` (same mode and number of workers); the state
        buffers are not touched: the caller continues from the states it saved along with the blobs.

        Unpickling runs whatever the blobs hold, in this process or in the workers: pass only blobs you trust
        (see ``get_state``)."""
        if blobs is None:
            raise ValueError(
                f"{self}: no saved state to restore (a checkpoint's environments that were not loaded); keep these "
                "environments and start new episodes instead (Runner.run without resume)"
            )
        if self._rows is not None:
            if len(blobs) != 1:
                raise ValueError(f"{self}: expected 1 state blob, got {len(blobs)}")
            self._rows.set_state(blobs[0])
            return
        if len(blobs) != len(self._connections):
            raise ValueError(
                f"{self}: expected {len(self._connections)} state blobs (one per worker), got {len(blobs)}"
            )
        self._command("set_state", blobs)

    def close(self) -> None:
        """Close every copy; in subprocess mode stop and join the workers. Calling it again does nothing."""
        if self._closed:
            return
        self._closed = True
        if self._rows is not None:
            self._rows.close()
        else:
            # release the shared memory views; these attributes are typed for an open environment, and a closed one
            # is not used again
            self._states = self._final = self._terminal = self._reward = None  # type: ignore[assignment]
            self._finalizer()

    def __enter__(self) -> VectorEnvironment:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def make_vector(
    spec: Any,
    num_environments: int,
    *,
    mode: str = "sync",
    seed: int | None = None,
    num_workers: int | None = None,
    copy: bool = True,
) -> VectorEnvironment:
    """A VectorEnvironment of ``num_environments`` copies built from an environment spec (anything
    ``Environment.from_spec`` accepts that can be built more than once: a name, a dict, a file, a class or a factory;
    a ``gymnasium.Env`` instance only for one copy); with ``seed``, copy i is seeded with ``seed + i``. Without it, a
    ``seed`` in a dict spec is taken the same way: each copy built from the spec alone would start with that seed,
    and all would play the same episodes."""
    from torchforce.environments.names import is_gymnasium_env

    num_environments = expect_int(num_environments, "num_environments", minimum=1)
    if isinstance(spec, Environment):
        raise SpecError("environment", "make_vector needs a spec to build copies from, not a built environment")
    if is_gymnasium_env(spec) and num_environments > 1:
        raise SpecError(
            "environment",
            f"one gymnasium.Env instance can be wrapped only once, not into {num_environments} copies",
            got=what_it_is(spec),
            hint=_copies_hint(spec, num_environments),
        )
    factory = functools.partial(Environment.from_spec, spec)
    vector = VectorEnvironment(
        factory=factory, num_environments=num_environments, mode=mode, num_workers=num_workers, copy=copy
    )
    if seed is None and isinstance(spec, dict) and type(spec.get("seed")) is int:
        seed = spec["seed"]
    if seed is not None:
        vector.seed(seed)
    return vector


def _copies_hint(env: Any, count: int) -> str:
    """How to ask for ``count`` copies of what the ``gymnasium.Env`` instance ``env`` is."""
    from torchforce.environments.names import gym_registry

    gym_id = env.spec.id if env.spec is not None and env.spec.id in gym_registry() else None
    if gym_id is None:
        return f"Pass a factory that makes a new environment on each call: make_vector(lambda: MyEnv(...), {count})."
    return (
        f"Pass its id, make_vector({gym_id!r}, {count}), or a factory that makes a new environment on each call: "
        f"make_vector(lambda: gymnasium.make({gym_id!r}, ...), {count})."
    )
