"""Small validators for spec values; each raises SpecError naming the path, what arrived and what was expected."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from torchforce.spec.errors import SpecError, did_you_mean


def expect_int(value: Any, path: str, *, minimum: int | None = None, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise SpecError(path, "not an integer", got=value, expected="an integer" + (f" >= {minimum}" if minimum is not None else ""))
    if minimum is not None and value < minimum:
        raise SpecError(path, "out of range", got=value, expected=f"an integer >= {minimum}")
    return value


def expect_float(
    value: Any, path: str, *, minimum: float | None = None, maximum: float | None = None, allow_none: bool = False
) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(path, "not a number", got=value, expected="a number")
    value = float(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        low = "-inf" if minimum is None else minimum
        high = "inf" if maximum is None else maximum
        raise SpecError(path, "out of range", got=value, expected=f"a number in [{low}, {high}]")
    return value


def expect_bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(path, "not a boolean", got=value, expected="true or false")
    return value


def expect_choice(value: Any, path: str, choices: Iterable[str]) -> str:
    choices = list(choices)
    if value not in choices:
        guess = did_you_mean(str(value), choices)
        raise SpecError(
            path,
            "unknown value",
            got=value,
            expected="one of " + ", ".join(repr(c) for c in choices),
            hint=f"Did you mean '{guess}'?" if guess else None,
        )
    return value


def expect_dict(value: Any, path: str) -> dict:
    if not isinstance(value, dict):
        raise SpecError(path, "not a dict", got=value, expected="a JSON object")
    return value
