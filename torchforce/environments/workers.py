"""Copies of an environment stepped together as rows of preallocated arrays (``Rows``), in the process of their
``VectorEnvironment`` or in a worker process of it: what a worker runs (``serve_worker``: build its chunk of
copies, then answer the parent's commands, writing into arrays in shared memory), and how the parent stops its
workers (``shutdown_workers``)."""

from __future__ import annotations

import contextlib
import signal
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from torchforce.environments.environment import Environment
from torchforce.spec import SpecError, normalize_actions, normalize_states
from torchforce.spec.errors import indefinite, type_name

DTYPES = {"float": np.float32, "int": np.int64, "bool": np.bool_, "uint8": np.uint8}


def _buffers(states: Mapping[str, Any], n: int) -> dict[str, np.ndarray]:
    return {name: np.zeros((n, *spec.shape), dtype=DTYPES[spec.type]) for name, spec in states.items()}


def _copied(state: Any) -> Any:
    """A state of one copy (an array, or a dict of them) in arrays of its own."""
    return {name: np.array(value) for name, value in state.items()} if isinstance(state, Mapping) else np.array(state)


class Rows:
    """A list of environments stepped into preallocated row buffers; a finished copy is reset at once."""

    def __init__(self, environments: Sequence[Environment]) -> None:
        self.environments = list(environments)
        first = self.environments[0]
        self.state_spec, self.action_spec = first.states, first.actions
        self.state_specs, self.single_state = normalize_states(self.state_spec)
        self.action_specs, self.single_action = normalize_actions(self.action_spec)
        for i, environment in enumerate(self.environments[1:], 1):
            if normalize_states(environment.states)[0] != self.state_specs or (
                normalize_actions(environment.actions)[0] != self.action_specs
            ):
                raise SpecError(f"environments[{i}]", f"{environment} has other states/actions than {first}")
        n = len(self.environments)
        self.states = _buffers(self.state_specs, n)
        self.final_states = _buffers(self.state_specs, n)
        self.terminal = np.zeros(n, dtype=np.int8)
        self.reward = np.zeros(n, dtype=np.float32)
        self.action_names = list(self.action_specs)

    def bind(self, views: Mapping[str, np.ndarray]) -> None:
        """Write into ``views`` (arrays in shared memory, see ``shared_layout``) from now on."""
        self.states = {name: views[f"states/{name}"] for name in self.state_specs}
        self.final_states = {name: views[f"final/{name}"] for name in self.state_specs}
        self.terminal, self.reward = views["terminal"], views["reward"]

    def _write(self, buffers: dict[str, np.ndarray], row: int, state: Any) -> None:
        if self.single_state:
            buffers["state"][row] = state
        else:
            for name, buffer in buffers.items():
                buffer[row] = state[name]

    def reset(self, rows: Sequence[int] | None = None) -> None:
        for row in range(len(self.environments)) if rows is None else rows:
            self._write(self.states, int(row), self.environments[int(row)].reset())

    def execute(self, actions: Any) -> list[int] | None:
        """Step every copy with its row of ``actions`` (an array [n, ...], or a dict of them by action name).

        Returns None when no copy ended, else the rows among those that ended whose game goes on (``game_goes_on``,
        read before the reset); only when a copy ended are ``final_states`` written (otherwise they equal ``states``).
        """
        ended, goes_on = [], []
        terminals, rewards, states = self.terminal, self.reward, self.states
        single_state, names = self.single_state, self.action_names
        single = states["state"] if single_state else None
        for row, environment in enumerate(self.environments):
            action = actions[row] if self.single_action else {name: actions[name][row] for name in names}
            state, terminal, reward = environment.execute(action)
            terminals[row] = terminal
            rewards[row] = reward
            if terminal:  # a copy: an environment may hand out one array, which its reset writes again
                ended.append((row, _copied(state)))
                if environment.game_goes_on:
                    goes_on.append(row)
                state = environment.reset()
            if single is not None:
                single[row] = state
            else:
                self._write(states, row, state)
        if ended:
            for name, buffer in self.final_states.items():
                np.copyto(buffer, states[name])
            for row, state in ended:
                self._write(self.final_states, row, state)
        return goes_on if ended else None

    def seed(self, seeds: Sequence[int | None]) -> list[int | None]:
        return [environment.seed(seed) for environment, seed in zip(self.environments, seeds, strict=True)]

    def get_state(self) -> bytes | None:
        """Every copy pickled, or None when some copy would not go on with its episode (``resumable``)."""
        import cloudpickle

        if not all(environment.resumable for environment in self.environments):
            return None
        return cloudpickle.dumps(self.environments)

    def set_state(self, payload: bytes) -> None:
        import cloudpickle

        from torchforce.environments.gym import retarget_logs

        environments = cloudpickle.loads(payload)
        if len(environments) != len(self.environments):
            raise ValueError(f"the saved state has {len(environments)} copies, this has {len(self.environments)}")
        for environment, restored in zip(self.environments, environments, strict=True):
            retarget_logs(restored, environment)  # its episode records go where this run's go
            environment.close()
        self.environments[:] = environments  # the one list the VectorEnvironment's ``environments`` is

    def close(self) -> None:
        for environment in self.environments:
            environment.close()


def build_copies(factory: Callable[[], Any], count: int) -> list[Environment]:
    """``count`` copies from ``factory``; a ``gymnasium.Env`` it returns is wrapped in the Gym adapter. Copies must
    be distinct objects: a factory returning one environment again would have the rows step it together."""
    from torchforce.environments.gym import Gym
    from torchforce.environments.names import is_gymnasium_env

    environments = []
    for _ in range(count):
        environment = factory()
        if is_gymnasium_env(environment):
            environment = Gym(environment)
        if not isinstance(environment, Environment):
            raise SpecError(
                "factory",
                f"returned {indefinite(type_name(type(environment)))}, not an Environment",
                expected="a torchforce Environment or a gymnasium.Env",
            )
        environments.append(environment)
    seen: set[int] = set()
    for environment in environments:
        inner = environment.gym.unwrapped if isinstance(environment, Gym) else environment
        if id(inner) in seen:
            raise SpecError(
                "factory",
                f"returned the same environment more than once ({environment}), but each of the {count} copies "
                "needs its own",
                hint="Build a new environment on each call: lambda: gymnasium.make(...), not lambda: env.",
            )
        seen.add(id(inner))
    return environments


def _build_rows(payload: bytes) -> Rows:
    import cloudpickle

    factory, count, environments = cloudpickle.loads(payload)
    return Rows(build_copies(factory, count) if environments is None else environments)


def _error_message(error: BaseException) -> tuple[str, Any]:
    if isinstance(error, SpecError):
        return "spec_error", (error.path, error.message, error.expected, error.hint, error.file)
    return "error", traceback.format_exc()


def shared_layout(states: Mapping[str, Any], n: int) -> tuple[list[tuple[str, tuple, str, int]], int]:
    """Where each output array of N rows lies in one shared-memory block: (key, shape, dtype, offset), size."""
    fields = [
        (f"{kind}/{name}", (n, *spec.shape), DTYPES[spec.type])
        for kind in ("states", "final")
        for name, spec in states.items()
    ]
    fields += [("terminal", (n,), np.int8), ("reward", (n,), np.float32)]
    layout, offset = [], 0
    for key, shape, dtype in fields:
        layout.append((key, shape, np.dtype(dtype).str, offset))
        offset += -(-int(np.prod(shape)) * np.dtype(dtype).itemsize // 64) * 64  # 64-byte aligned
    return layout, max(offset, 64)


def shared_views(buffer: Any, layout: list[tuple[str, tuple, str, int]], lo: int = 0, hi: int | None = None) -> dict:
    return {key: np.ndarray(shape, dtype, buffer=buffer, offset=offset)[lo:hi] for key, shape, dtype, offset in layout}


def _serve(connection: Any, rows: Rows | None, memory: list[Any]) -> None:
    """Answer the parent's commands until ``close``; results go into the shared arrays, replies are short."""
    while True:
        try:
            command, data = connection.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        try:
            if command == "close":
                if rows is not None:
                    rows.close()
                _reply(connection, ("ok", None))
                return
            if rows is None:
                raise RuntimeError("the environments of this worker could not be built")
            if command == "execute":
                data = rows.execute(data)
            elif command == "reset":
                rows.reset(data)
            elif command == "seed":
                data = rows.seed(data)
            elif command == "get_state":
                data = rows.get_state()
            elif command == "set_state":
                rows.set_state(data)
                data = None
            elif command == "attach":
                from multiprocessing.shared_memory import SharedMemory

                name, layout, lo, hi = data
                memory.append(SharedMemory(name=name))
                rows.bind(shared_views(memory[0].buf, layout, lo, hi))
                data = None
            else:
                raise ValueError(f"unknown command {command!r}")
            reply = ("ok", data)
        except BaseException as error:  # noqa: BLE001 - every failure goes back to the parent (an environment's own
            reply = _error_message(error)  # BrokenPipeError too: only a reply that cannot be sent means it is gone)
        if not _reply(connection, reply):
            return


def _reply(connection: Any, reply: tuple[str, Any]) -> bool:
    """Send a worker's reply; False when the parent is gone. A reply that cannot be pickled sends its error."""
    try:
        connection.send(reply)
    except OSError:  # BrokenPipeError, ConnectionResetError: nobody reads this pipe any more
        return False
    except Exception as error:  # noqa: BLE001 - pickling the reply failed: the parent gets why
        return _reply(connection, _error_message(error))
    return True


def serve_worker(connection: Any, payload: bytes) -> None:
    """A worker process: builds its chunk of copies, then serves commands until ``close``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and closes us
    rows: Rows | None = None
    memory: list[Any] = []
    try:
        rows = _build_rows(payload)
        connection.send(("ok", (rows.state_spec, rows.action_spec)))
    except BaseException as error:  # noqa: BLE001
        connection.send(_error_message(error))
    _serve(connection, rows, memory)
    rows = None  # drop the views into shared memory before unmapping it
    for block in memory:
        with contextlib.suppress(BufferError):
            block.close()
    connection.close()


def shutdown_workers(processes: list[Any], connections: list[Any], memory: list[Any]) -> None:
    """Ask every worker to close, join it (terminating one that does not stop), free the shared memory."""
    for connection in connections:
        with contextlib.suppress(OSError, ValueError):
            connection.send(("close", None))
    for connection in connections:
        with contextlib.suppress(EOFError, OSError, ValueError):
            if connection.poll(5.0):
                connection.recv()
        connection.close()
    for process in processes:
        process.join(timeout=5.0)
        if process.is_alive():
            process.terminate()
            process.join(timeout=5.0)
        if process.is_alive():
            process.kill()
            process.join()
    for block in memory:
        with contextlib.suppress(FileNotFoundError):
            block.unlink()
        # BufferError: the caller still holds arrays (copy=False); the mapping goes when they do
        with contextlib.suppress(BufferError):
            block.close()
