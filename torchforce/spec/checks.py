"""Small validators for spec values; each raises SpecError naming the path, what arrived and what was expected.

Numbers from numpy (``np.int64``, ``np.float32``, as Gymnasium spaces hand them out) count as numbers; booleans
never do (``true`` is not ``1`` in a spec). Numbers are finite unless a caller says infinity means something.

The limits below refuse, when a spec is read, what could never run (issue 7, "Hardening"):

- ``MAX_ELEMENTS``: one tensor or array holds at most 2^31 elements: a state, an action, a layer's weights or
  output per sample, a memory field over its whole capacity. Beyond that, torch's 32-bit indexing fails in many
  kernels, and the float32 storage alone (8 GiB) is more than an agent can hold in memory.
- ``MAX_STEPS``: one update takes at most 10^4 inner steps of any loop a spec sets (``multi_step`` num_steps,
  line-search and conjugate-gradient iterations, evolutionary samples, PPO's optimization steps and epochs). More
  would make a single update run for hours or for ever (3 * 10^12 steps).
- ``MAX_SPAN``: bounds (``min_value``/``max_value``) are finite and at most 10^38 apart, so that they, their span
  and every value between them fit in float32, the type actions are computed in. Larger spans turn the sampled
  actions into inf or NaN.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any, Literal, overload

from torchforce.spec.errors import SpecError, did_you_mean

MAX_ELEMENTS = 2**31
MAX_STEPS = 10_000
MAX_SPAN = 1e38
FLOAT32_MAX = 3.4028234663852886e38  # numpy.finfo(numpy.float32).max, without importing numpy here
MAX_TIMESTEP = 2**63 - 1  # a timestep count: what an int64 counter holds


def _range(kind: str, minimum: float | None, maximum: float | None) -> str:
    """What is expected, in words: ``kind`` ("an integer", "a finite number") within the bounds given."""
    if minimum is not None and maximum is not None:
        return f"{kind} in [{minimum}, {maximum}]"
    if minimum is not None:
        return f"{kind} >= {minimum}"
    if maximum is not None:
        return f"{kind} <= {maximum}"
    return kind


def _int_range(minimum: int | None, maximum: int | None) -> str:
    return _range("an integer", minimum, maximum)


@overload
def expect_int(
    value: Any,
    path: str,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    allow_none: Literal[False] = False,
) -> int: ...
@overload
def expect_int(
    value: Any, path: str, *, minimum: int | None = None, maximum: int | None = None, allow_none: bool
) -> int | None: ...
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
        value = int(value)  # type: ignore[call-overload]  # numbers.Real declares no __int__; real numbers have it
    else:
        raise SpecError(path, "not an integer", got=value, expected=_int_range(minimum, maximum))
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise SpecError(path, "out of range", got=value, expected=_int_range(minimum, maximum))
    return value


def _float_range(minimum: float | None, maximum: float | None) -> str:
    return _range("a finite number", minimum, maximum)


@overload
def expect_float(
    value: Any,
    path: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    allow_none: Literal[False] = False,
    finite: bool = True,
) -> float: ...
@overload
def expect_float(
    value: Any,
    path: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    allow_none: bool,
    finite: bool = True,
) -> float | None: ...
def expect_float(
    value: Any,
    path: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    allow_none: bool = False,
    finite: bool = True,
) -> float | None:
    """``value`` as a float; ints are accepted, bools and NaN are not, nor infinity unless ``finite=False`` (where
    it means "no limit", e.g. a clipping bound). ``minimum``/``maximum`` are inclusive."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise SpecError(path, "not a number", got=value, expected="a number")
    given = value
    try:
        value = float(value)
    except OverflowError:  # an int beyond float's range (10^309)
        value = math.inf if value > 0 else -math.inf
    if math.isnan(value):
        raise SpecError(path, "not a number", got=given, expected="a number")
    if finite and math.isinf(value):
        raise SpecError(path, "not a finite number", got=given, expected=_float_range(minimum, maximum))
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        low = "-inf" if minimum is None else minimum
        high = "inf" if maximum is None else maximum
        raise SpecError(path, "out of range", got=value, expected=f"a number in [{low}, {high}]")
    return value


@overload
def expect_float32(
    value: Any,
    path: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    allow_none: Literal[False] = False,
) -> float: ...
@overload
def expect_float32(
    value: Any, path: str, *, minimum: float | None = None, maximum: float | None = None, allow_none: bool
) -> float | None: ...
def expect_float32(
    value: Any, path: str, *, minimum: float | None = None, maximum: float | None = None, allow_none: bool = False
) -> float | None:
    """``expect_float`` for a value that goes into a float32 tensor as it is (an initial weight or bias): within
    +-``FLOAT32_MAX``, where larger numbers would overflow."""
    value = expect_float(value, path, minimum=minimum, maximum=maximum, allow_none=allow_none)
    if value is not None and abs(value) > FLOAT32_MAX:
        raise SpecError(
            path, "out of float32's range", got=value, expected=f"a number in [-{FLOAT32_MAX:g}, {FLOAT32_MAX:g}]"
        )
    return value


@overload
def expect_limited_int(
    value: Any,
    path: str,
    *,
    minimum: int,
    maximum: int,
    hint: str | None = None,
    allow_none: Literal[False] = False,
) -> int: ...
@overload
def expect_limited_int(
    value: Any, path: str, *, minimum: int, maximum: int, hint: str | None = None, allow_none: bool
) -> int | None: ...
def expect_limited_int(
    value: Any, path: str, *, minimum: int, maximum: int, hint: str | None = None, allow_none: bool = False
) -> int | None:
    """``expect_int`` with an upper limit that is reported with ``hint`` (the lower bound's message is
    ``expect_int``'s own)."""
    value = expect_int(value, path, minimum=minimum, allow_none=allow_none)
    if value is not None and value > maximum:
        raise SpecError(path, "out of range", got=value, expected=_int_range(minimum, maximum), hint=hint)
    return value


@overload
def expect_steps(value: Any, path: str, *, minimum: int = 1, allow_none: Literal[False] = False) -> int: ...
@overload
def expect_steps(value: Any, path: str, *, minimum: int = 1, allow_none: bool) -> int | None: ...
def expect_steps(value: Any, path: str, *, minimum: int = 1, allow_none: bool = False) -> int | None:
    """A number of inner steps or iterations of one update: an integer in [``minimum``, ``MAX_STEPS``]."""
    return expect_limited_int(
        value,
        path,
        minimum=minimum,
        maximum=MAX_STEPS,
        allow_none=allow_none,
        hint=f"One update takes at most {MAX_STEPS} steps (10^4), so that it ends in reasonable time.",
    )


def expect_elements(count: int, path: str, what: str, *, hint: str | None = None) -> int:
    """``count`` (the elements of one tensor: ``what``), if at most ``MAX_ELEMENTS``; otherwise a SpecError."""
    if count > MAX_ELEMENTS:
        raise SpecError(
            path,
            f"{what} would have {count} elements, more than one tensor may hold",
            expected=f"at most {MAX_ELEMENTS} (2^31)",
            hint=hint,
        )
    return count


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


def expect_keys(value: Any, path: str, keys: tuple[str, ...]) -> dict:
    """``value`` as an object (a copy) of some of ``keys``; an unknown key is an error naming it, with a guess."""
    value = dict(expect_dict(value, path))
    for key in value:
        if key not in keys:
            guess = did_you_mean(str(key), keys)
            raise SpecError(
                f"{path}.{key}",
                "unknown key",
                hint=f"Did you mean '{guess}'?" if guess else "Known: " + ", ".join(keys) + ".",
            )
    return value
