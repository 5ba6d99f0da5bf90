"""Small validators for spec values; each raises SpecError naming the path, what arrived and what was expected.

Numbers from numpy (``np.int64``, ``np.float32``, as Gymnasium spaces hand them out) count as numbers; booleans
never do (``true`` is not ``1`` in a spec).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any

from torchforce.spec.errors import SpecError, did_you_mean


def _int_range(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f"an integer in [{minimum}, {maximum}]"
    if minimum is not None:
        return f"an integer >= {minimum}"
    if maximum is not None:
        return f"an integer <= {maximum}"
    return "an integer"


def expect_int(
    value: Any,
    path: str,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    allow_none: bool = False,
) -> int | None:
    """``value`` as an int; a float with an integer value (``4.0``) is accepted, a bool is not."""
    if value is None and allow_none:
        return None
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = int(value)
    elif isinstance(value, numbers.Real) and not isinstance(value, bool) and float(value).is_integer():
        value = int(value)
    else:
        raise SpecError(path, "not an integer", got=value, expected=_int_range(minimum, maximum))
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise SpecError(path, "out of range", got=value, expected=_int_range(minimum, maximum))
    return value


def expect_float(
    value: Any, path: str, *, minimum: float | None = None, maximum: float | None = None, allow_none: bool = False
) -> float | None:
    """``value`` as a float; ints are accepted, bools and NaN are not. ``minimum``/``maximum`` are inclusive."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
        raise SpecError(path, "not a number", got=value, expected="a number")
    value = float(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        low = "-inf" if minimum is None else minimum
        high = "inf" if maximum is None else maximum
        raise SpecError(path, "out of range", got=value, expected=f"a number in [{low}, {high}]")
    return value


def expect_bool(value: Any, path: str) -> bool:
    """``value`` if it is ``true`` or ``false``; 0/1 and strings are errors."""
    if not isinstance(value, bool):
        raise SpecError(path, "not a boolean", got=value, expected="true or false")
    return value


def expect_choice(value: Any, path: str, choices: Iterable[str]) -> str:
    """``value`` if it is one of ``choices``; otherwise the error lists them and suggests the closest."""
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
    """``value`` if it is a dict (a JSON object)."""
    if not isinstance(value, dict):
        raise SpecError(path, "not a dict", got=value, expected="a JSON object")
    return value
