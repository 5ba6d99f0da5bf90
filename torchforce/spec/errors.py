"""SpecError: one error type for every bad spec, with the path, what arrived, what was expected and a hint."""

from __future__ import annotations

import difflib
import inspect
import json
import os
import reprlib
import sys
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """The closest candidate to ``word``, or None when nothing is close."""
    matches = difflib.get_close_matches(str(word), [str(c) for c in candidates], n=1, cutoff=0.6)
    return matches[0] if matches else None


class Words(str):
    """Text for ``got`` that is shown as written rather than as a JSON string: ``got an instance of torch.optim.SGD``,
    not ``got "SGD (...)"``."""


def type_name(kind: object) -> str:
    """A class's name as it is imported: ``torch.optim.SGD`` (not ``torch.optim.sgd.SGD``), builtins bare (``int``)."""
    module, name = getattr(kind, "__module__", None) or "", getattr(kind, "__qualname__", None) or str(kind)
    if module in ("", "builtins"):
        return name
    parts = module.split(".")
    for end in range(1, len(parts)):
        parent = sys.modules.get(".".join(parts[:end]))
        if parent is not None and getattr(parent, getattr(kind, "__name__", ""), None) is kind:
            return f"{'.'.join(parts[:end])}.{name}"
    return f"{module}.{name}"


def indefinite(noun: str) -> str:
    """``noun`` with its indefinite article: ``an int``, ``a dict``."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def what_it_is(value: Any) -> Any:
    """``value`` as ``got`` for a place that needed an object of some kind: plain JSON values stay themselves
    (``0.1``); a class or function is named (``the class torch.optim.SGD``, ``the function abs``); any other object
    is named by its type (``an instance of torch.optim.SGD``), since its repr may be long, multi-line, or an
    address."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if inspect.isclass(value):
        return Words(f"the class {type_name(value)}")
    if inspect.isroutine(value):
        return Words(f"the function {type_name(value)}")
    return Words(f"an instance of {type_name(type(value))}")


def describe(value: Any, limit: int = 120) -> str:
    """A short, JSON-like rendering of a value for an error message (Python's repr for what JSON cannot show);
    ``Words`` are shown as they are.

    The value is walked lazily and the walk stops once ``limit`` characters are out, so a huge value (a YAML alias
    bomb shares its lists exponentially many times) costs no more than a small one; cycles show as ``[...]``."""
    pieces, size = [], 0
    for piece in _pieces(value, limit, set()):
        pieces.append(piece)
        size += len(piece)
        if size > limit:
            break
    text = "".join(pieces)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _pieces(value: Any, limit: int, open_ids: set[int]) -> Iterator[str]:
    """The rendering of ``value`` in pieces, as ``json.dumps`` writes it (``repr`` for what JSON has no form for).
    ``open_ids`` are the containers being rendered around it (to show a cycle instead of following it)."""
    if isinstance(value, Words):
        yield str(value)
        return
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):  # np.int64(3) -> 3, arrays -> lists
        if getattr(value, "size", 1) > 4 * limit:
            yield f"<array of shape {getattr(value, 'shape', '?')}>"
            return
        value = value.tolist()
    if isinstance(value, (dict, list, tuple)):
        if id(value) in open_ids or len(open_ids) >= min(limit, 50):
            yield "{...}" if isinstance(value, dict) else "[...]"
            return
        open_ids.add(id(value))
        try:
            yield from _container_pieces(value, limit, open_ids)
        finally:
            open_ids.discard(id(value))
        return
    yield _leaf(value, limit)


def _container_pieces(value: dict | list | tuple, limit: int, open_ids: set[int]) -> Iterator[str]:
    dictionary = isinstance(value, dict)
    yield "{" if dictionary else "["
    for index, item in enumerate(value.items() if isinstance(value, dict) else value):
        if index:
            yield ", "
        if dictionary:
            key, item = item
            yield _key(key, limit) + ": "
        yield from _pieces(item, limit, open_ids)
    yield "}" if dictionary else "]"


def _key(key: Any, limit: int) -> str:
    """A dict key as JSON writes it: a string, with numbers and constants turned into strings (``"1"``,
    ``"true"``); any other key shows as its repr."""
    if key is None or isinstance(key, (bool, int, float)):
        return json.dumps(_leaf(key, limit))
    return _leaf(key, limit)


def _leaf(value: Any, limit: int) -> str:
    if isinstance(value, Words):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value[: limit + 1])
    if value is None or isinstance(value, (bool, float)):
        return json.dumps(value)
    if isinstance(value, int):
        try:
            return str(value)
        except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
            return f"<an integer of {value.bit_length()} bits>"
    return _REPR.repr(value)[: limit + 1]


# ``repr`` for what JSON cannot show (sets, objects), with at most a few elements of a container.
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = 200


def _rebuild(path: str, message: str, got: Any, expected: str | None, hint: str | None, file: str | None) -> SpecError:
    return SpecError(path, message, got=got, expected=expected, hint=hint, file=file)


class SpecWarning(UserWarning):
    """A spec that works, but not as its author likely meant (a memory that an update may outgrow, an exploration
    that fits none of an action's elements, bfloat16 on a CPU that computes it in software). ``tfcli`` prints it as
    one ``tfcli: warning: ...`` line."""


_PACKAGE = str(Path(__file__).resolve().parents[1]) + os.sep  # with the separator: not a sibling torchforce_x.py


def warn_spec(message: str) -> None:
    """Warn with a SpecWarning that names the first frame outside torchforce: the user's line that built the agent
    or read the spec, whichever of torchforce's own functions it went through."""
    frame: FrameType | None = sys._getframe()
    level = 1  # stacklevel 1 names this function's frame
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, SpecWarning, stacklevel=level)


class SpecError(ValueError):
    """A spec that cannot be used.

    ``path`` is where in the spec the problem is (``agent.memory.type``), ``message`` what is wrong, ``got`` what
    arrived, ``expected`` what would have been accepted, ``hint`` what to do, ``file`` the file it came from.
    It renders as one sentence plus an indented hint line::

        agent.memory.type: unknown memory "replay_buffer" (in dqn.json).
          Known: latest, prioritized_replay, replay. Did you mean 'replay'?
        agent.update_mode.batch_size: out of range; expected an integer >= 1, got -4.
        network[2]: layer 'dense' needs 'size'; got {"type": "dense", "activation": "relu"}.

    An empty ``message`` leaves just ``path: expected ..., got ...``.
    """

    def __init__(
        self,
        path: str,
        message: str,
        *,
        got: Any = ...,
        expected: str | None = None,
        hint: str | None = None,
        file: str | None = None,
    ) -> None:
        self.path = path
        self.message = message
        self.got = got
        self.expected = expected
        self.hint = hint
        self.file = file
        super().__init__(self.render())

    def render(self) -> str:
        # The sentence is "<path>: <message>; expected <expected>, got <got> (in <file>)." with absent parts left
        # out, so the punctuation stays right whichever parts a caller gives.
        details = []
        if self.expected is not None:
            details.append(f"expected {self.expected}")
        if self.got is not ...:
            details.append(f"got {describe(self.got)}")
        message = self.message.rstrip().rstrip(".")
        text = "; ".join(part for part in (message, ", ".join(details)) if part)
        if self.path:
            text = f"{self.path}: {text}" if text else self.path
        if self.file:
            text += f" (in {self.file})"
        if not text.endswith("."):
            text += "."
        return text + (f"\n  {self.hint}" if self.hint else "")

    def __str__(self) -> str:
        return self.render()

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Exceptions pickle through ``args`` by default, which would lose the keyword-only fields (and fail to
        # rebuild); workers in other processes (multiprocessing, Ray) send errors back pickled.
        return _rebuild, (self.path, self.message, self.got, self.expected, self.hint, self.file)

    def with_file(self, file: str) -> SpecError:
        """The same error, naming the file the spec came from (the first file named wins)."""
        if not self.file:
            self.file = str(file)
            self.args = (self.render(),)
        return self

    def under(self, prefix: str) -> SpecError:
        """The same error with its path placed under ``prefix`` (``network`` -> ``agent.network``, ``[2]`` ->
        ``network[2]``, an empty path -> ``prefix``)."""
        if prefix:
            self.path = f"{prefix}.{self.path}" if self.path and not self.path.startswith("[") else prefix + self.path
            self.args = (self.render(),)
        return self


def unknown_name_error(
    path: str,
    kind: str,
    name: str,
    known: Iterable[str],
    file: str | None = None,
    *,
    aliases: Iterable[str] = (),
) -> SpecError:
    """The error for a name that is not in a table: it lists what is known and suggests the closest.

    ``aliases`` are further accepted names (2018 long names): they are not listed, but may be suggested.
    """
    known = sorted({str(k) for k in known})
    guess = did_you_mean(name, known) or did_you_mean(name, aliases)
    hint = ("Known: " + ", ".join(known) + ".") if known else f"No {kind} is known here."
    if guess:
        hint += f" Did you mean '{guess}'?"
    return SpecError(path, f"unknown {kind} {describe(name)}", hint=hint, file=file)
