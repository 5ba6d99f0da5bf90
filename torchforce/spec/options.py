"""Typed options: dataclass fields that carry one line of documentation and the check of a scalar value, and the
checks themselves. A check validates a value (``check(value, path) -> value``, normalized: 4.0 -> 4 for an integer)
with the ``torchforce.spec`` validators and says what JSON Schema knows of it (``schema()``: ranges, choices).
The agent configs (``torchforce.agents.config``) are made of such fields."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field
from typing import Any, Protocol

from torchforce.spec.checks import MAX_STEPS, expect_bool, expect_choice, expect_float, expect_int, expect_steps
from torchforce.spec.errors import SpecError


class Check(Protocol):
    """What a field's check does: validate (and normalize) a value, and describe it in JSON Schema terms."""

    def __call__(self, value: Any, path: str) -> Any: ...

    def schema(self) -> dict[str, Any]: ...


# A check validates one scalar option (``check(value, path) -> value``, normalized: 4.0 -> 4 for an integer) and
# says what JSON Schema knows of it (``schema()``: ranges, choices).


def _bound(value: float) -> str:
    return f"{value:g}"


@dataclass(frozen=True)
class Integer:
    """An integer within [``minimum``, ``maximum``]; ``steps``: a number of an update's inner steps (at most
    ``MAX_STEPS``, as ``expect_steps``); ``expected`` words the range in an out-of-range error."""

    minimum: int | None = None
    maximum: int | None = None
    nullable: bool = False
    steps: bool = False
    expected: str | None = None

    def __call__(self, value: Any, path: str) -> int | None:
        if self.steps:
            return expect_steps(value, path, minimum=self.minimum or 0, allow_none=self.nullable)
        value = expect_int(value, path, minimum=self.minimum, allow_none=self.nullable)
        if value is not None and self.maximum is not None and value > self.maximum:
            raise SpecError(path, "out of range", got=value, expected=self.expected or f"an integer <= {self.maximum}")
        return value

    def schema(self) -> dict[str, Any]:
        bounds = {"minimum": self.minimum, "maximum": MAX_STEPS if self.steps else self.maximum}
        return {key: value for key, value in bounds.items() if value is not None}


MAX_SEED = 2**64 - 1  # the largest seed torch.manual_seed takes
# A seed (the agent's, the experiment's, each of --seeds): null, or an integer in [0, MAX_SEED].
SEED = Integer(minimum=0, maximum=MAX_SEED, nullable=True, expected="an integer in [0, 2^64 - 1]")


@dataclass(frozen=True)
class Number:
    """A finite number within [``minimum``, ``maximum``]; ``open_minimum``/``open_maximum`` leave an end out
    (``Number(minimum=0.0, maximum=1.0, open_minimum=True)``: (0, 1]); ``hint`` goes with an out-of-range error."""

    minimum: float | None = None
    maximum: float | None = None
    open_minimum: bool = False
    open_maximum: bool = False
    nullable: bool = False
    hint: str | None = None

    def __call__(self, value: Any, path: str) -> float | None:
        if not (self.open_minimum or self.open_maximum):
            return expect_float(value, path, minimum=self.minimum, maximum=self.maximum, allow_none=self.nullable)
        number = expect_float(value, path, allow_none=self.nullable)
        if number is not None and not self._within(number):
            low = "-inf" if self.minimum is None else _bound(self.minimum)
            high = "inf" if self.maximum is None else _bound(self.maximum)
            interval = f"{'(' if self.open_minimum else '['}{low}, {high}{')' if self.open_maximum else ']'}"
            raise SpecError(path, "out of range", got=value, expected=f"a number in {interval}", hint=self.hint)
        return number

    def _within(self, number: float) -> bool:
        if self.minimum is not None and (number <= self.minimum if self.open_minimum else number < self.minimum):
            return False
        return self.maximum is None or (number < self.maximum if self.open_maximum else number <= self.maximum)

    def schema(self) -> dict[str, Any]:
        bounds = {
            "exclusiveMinimum" if self.open_minimum else "minimum": self.minimum,
            "exclusiveMaximum" if self.open_maximum else "maximum": self.maximum,
        }
        return {key: value for key, value in bounds.items() if value is not None}


@dataclass(frozen=True)
class Flag:
    """``true`` or ``false``."""

    def __call__(self, value: Any, path: str) -> bool:
        return expect_bool(value, path)

    def schema(self) -> dict[str, Any]:
        return {}


@dataclass(frozen=True)
class Choice:
    """One of ``choices`` (or null where ``nullable``)."""

    choices: tuple[str, ...]
    nullable: bool = False

    def __call__(self, value: Any, path: str) -> str | None:
        return None if value is None and self.nullable else expect_choice(value, path, self.choices)

    def schema(self) -> dict[str, Any]:
        return {"enum": [*self.choices, *([None] if self.nullable else [])]}


@dataclass(frozen=True)
class Text:
    """A string (or null where ``nullable``)."""

    nullable: bool = False

    def __call__(self, value: Any, path: str) -> str | None:
        if not isinstance(value, str) and not (value is None and self.nullable):
            raise SpecError(path, "not a string", got=value, expected="a string" + " or null" * self.nullable)
        return value

    def schema(self) -> dict[str, Any]:
        return {}


def option(default: Any = MISSING, doc: str = "", check: Check | None = None) -> Any:
    """A config field: its ``default`` (none: required), one line of ``doc``, and the ``check`` of a scalar option
    (None: a structured spec its builder checks). A mutable default would be shared, so it is refused."""
    if isinstance(default, (dict, list, set)):
        raise TypeError(f"option default {default!r} is mutable: use None and document what None stands for")
    return field(default=default, metadata={"doc": doc, "check": check})
