"""SpecError: one error type for every bad spec, with the path, what arrived, what was expected and a hint."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from typing import Any


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """The closest candidate to ``word``, or None when nothing is close."""
    matches = difflib.get_close_matches(str(word), [str(c) for c in candidates], n=1, cutoff=0.6)
    return matches[0] if matches else None


def describe(value: Any, limit: int = 120) -> str:
    """A short, JSON-like rendering of a value for an error message."""
    try:
        text = json.dumps(value, default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class SpecError(ValueError):
    """A spec that cannot be used.

    ``path`` is where in the spec the problem is (``agent.memory.type``), ``message`` what is wrong, ``got`` what
    arrived, ``expected`` what would have been accepted, ``hint`` what to do, ``file`` the file it came from.
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
        text = f"{self.path}: {self.message}" if self.path else self.message
        if self.expected is not None:
            text += f"; expected {self.expected}"
        if self.got is not ...:
            text += f", got {describe(self.got)}"
        text += f" (in {self.file})." if self.file else "."
        return text + (f"\n  {self.hint}" if self.hint else "")

    def __str__(self) -> str:
        return self.render()

    def with_file(self, file: str) -> SpecError:
        """The same error, naming the file the spec came from (the first file named wins)."""
        if not self.file:
            self.file = str(file)
            self.args = (self.render(),)
        return self

    def under(self, prefix: str) -> SpecError:
        """The same error with its path placed under ``prefix`` (``network`` -> ``agent.network``)."""
        if prefix:
            self.path = f"{prefix}.{self.path}" if self.path and not self.path.startswith("[") else prefix + self.path
            self.args = (self.render(),)
        return self


def unknown_name_error(path: str, kind: str, name: str, known: Iterable[str], file: str | None = None) -> SpecError:
    """The error for a name that is not in a table: it lists what is known and suggests the closest."""
    known = sorted(set(known))
    guess = did_you_mean(name, known)
    hint = "Known: " + ", ".join(known) + "." + (f" Did you mean '{guess}'?" if guess else "")
    return SpecError(path, f"unknown {kind} {describe(name)}", hint=hint, file=file)
